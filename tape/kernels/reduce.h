// Reductions over a set of axes (sum, max, min) and arg-reductions along one axis.
// Shapes:   axes_mask bit i => axis i reduced; y holds sx with the reduced dims removed (the
//           keepdims shape has the same layout). argmax/argmin: y has sx without `axis`.
// DTypes:   float, double, int32, int64.
// Facts:    Deterministic: partial results use fixed chunk sizes (kReduceChunk) independent of the
//           thread count and combine in order, so results repeat bit for bit. The inner loops
//           (a contiguous run in 128 bytes of lanes, rows added in row order) exist per
//           instruction-set level (ukernels/reduce_loops.cc, picked by cpu_isa()) and follow one
//           order written in the source (ukernels/internal/reduce_loops.h): every level gives the
//           same bits. An empty reduction gives 0 (sum), the lowest value / -inf (max) or the
//           highest / +inf (min). NaN propagates through max/min. argmax/argmin: the first extreme
//           wins.
// Errors:   std::invalid_argument for a mask bit >= rank, an axis out of range, or argmax/argmin
//           over an empty axis with a non-empty output.
// Ref:      tf.reduce_sum, tf.reduce_max, tf.reduce_min, tf.argmax, tf.argmin
#pragma once

#include <cstdint>

#include "tape/core/shape.h"

namespace tapeflow::kernels {

// y = the sum of x over the axes in axes_mask (0 for an empty reduction).
template <class T>
void reduce_sum(const T* x, const Shape& sx, std::uint32_t axes_mask, T* y);
// y = the maximum of x over the axes in axes_mask (NaN propagates; lowest value / -inf if empty).
template <class T>
void reduce_max(const T* x, const Shape& sx, std::uint32_t axes_mask, T* y);
// y = the minimum of x over the axes in axes_mask (NaN propagates; highest value / +inf if empty).
template <class T>
void reduce_min(const T* x, const Shape& sx, std::uint32_t axes_mask, T* y);
// How reduce_sum sums `rows` rows of `cols` > 1 values, for each of `outer` outputs of cols
// values (innermost axis kept): per column, partials of this many consecutive rows, each summed
// from 0 in row order, then added in order from 0 (a single partial when the result is `rows`).
// Exposed so that a kernel making the rows on the fly sums them bit for bit as reduce_sum would
// (conv.h: conv2d_backprop_filter_bias_with_argmax).
std::int64_t reduce_sum_rows_per_partial(std::int64_t outer, std::int64_t rows, std::int64_t cols);

// y = the index of the largest element along `axis` (the first on ties), as int64.
template <class T>
void argmax(const T* x, const Shape& sx, int axis, std::int64_t* y);
// y = the index of the smallest element along `axis` (the first on ties), as int64.
template <class T>
void argmin(const T* x, const Shape& sx, int axis, std::int64_t* y);

}  // namespace tapeflow::kernels
