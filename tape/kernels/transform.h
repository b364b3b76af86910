// Copy kernels that rearrange elements: transpose, slice, concat, gather, segment sums, one_hot.
// Shapes:   transpose: y has sx permuted (y dim i = sx[perm[i]]).
//           slice: y (sy) = x[begin[i] : begin[i] + sy[i]] on every axis.
//           concat: inputs equal except on `axis`; y is their concatenation along it.
//           gather: params sp, n_indices flat indices along `axis` -> sp[:axis] + [n_indices] + sp[axis+1:].
//           unsorted_segment_sum: data [rows, row_size], ids [rows] -> y [num_segments, row_size].
//           one_hot: indices [n] -> y [n, depth].
// DTypes:   transpose/slice/concat/gather: float, double, int32, int64, bool; unsorted_segment_sum:
//           float, double, int32, int64; one_hot: float, double, int32, int64, bool. Indices: int32, int64.
// Facts:    unsorted_segment_sum zeroes y first, drops negative ids (as TensorFlow) and adds rows in
//           order (deterministic). one_hot: an out-of-range index gives a row of `off`.
// Errors:   std::invalid_argument: bad perm, slice out of bounds, concat shape mismatch,
//           "gather: index 7 out of range [0, 5)", segment id >= num_segments.
// Ref:      tf.transpose, tf.slice, tf.concat, tf.gather, tf.math.unsorted_segment_sum, tf.one_hot
#pragma once

#include <cstdint>

#include "tape/core/shape.h"

namespace tapeflow::kernels {

// y = x with its axes permuted: y's dim i is sx[perm[i]]. Errors: std::invalid_argument for a bad perm.
template <class T>
void transpose(const T* x, const Shape& sx, const int* perm, T* y);
// y (shape sy) = the block of x (shape sx) starting at begin[i] on every axis.
// Errors: std::invalid_argument if the block leaves x.
template <class T>
void slice(const T* x, const Shape& sx, const std::int64_t* begin, const Shape& sy, T* y);
// y = the `count` arrays xs[i] (shapes[i]) joined along `axis`.
// Errors: std::invalid_argument if the shapes differ on another axis.
template <class T>
void concat(const T* const* xs, const Shape* shapes, int count, int axis, T* y);
// y = params' slices along `axis` at the n_indices flat indices (tf.gather).
// Errors: std::invalid_argument "gather: index I out of range [0, D)".
template <class T, class I>
void gather(const T* params, const Shape& sp, const I* indices, std::int64_t n_indices, int axis, T* y);
// y[s] = sum of the data rows r with ids[r] == s (y zeroed first; negative ids dropped).
// Errors: std::invalid_argument for an id >= num_segments.
template <class T, class I>
void unsorted_segment_sum(const T* data, std::int64_t rows, std::int64_t row_size, const I* ids,
                          std::int64_t num_segments, T* y);
// y[i, j] = on if indices[i] == j, else off (an out-of-range index gives a row of off).
template <class T, class I>
void one_hot(const I* indices, std::int64_t n, std::int64_t depth, T on, T off, T* y);

}  // namespace tapeflow::kernels
