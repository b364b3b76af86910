// Index ops: gather, segment sums, one-hot encoding and arg-max/min.
//
// DTypes:   indices and segment ids are int32 or int64; values any dtype unless noted.
// Errors:   std::invalid_argument naming the op and the shapes/dtypes/values received.
// Ref:      tf.gather, tf.math.unsorted_segment_sum, tf.one_hot, tf.math.argmax,
//           tensorflow/python/ops/array_grad.py, math_grad.py
#pragma once

#include <cstdint>

#include "tape/core/tensor.h"

namespace tapeflow {

// Picks slices of params along `axis` at `indices` (rows for axis 0).
// Shapes:   params [p0, ..., pn], indices I -> params.shape[:axis] + I + params.shape[axis+1:].
// DTypes:   params any dtype; indices int32/int64.
// Errors:   std::invalid_argument for a scalar params, a bad axis, non-integer indices, or an
//           index outside [0, params.shape[axis]) ("gather: index 7 out of range [0, 5) ...").
// Gradient: params: unsorted_segment_sum of g over the indices (duplicates add up); indices: none.
// Ref:      tf.gather (batch_dims = 0)
Tensor gather(const Tensor& params, const Tensor& indices, int axis = 0);

// Sums the slices of data that share a segment id: y[s] = sum of data[i...] with ids[i...] == s.
// Shapes:   data ids.shape + R, segment_ids ids.shape -> [num_segments] + R.
// DTypes:   data float32, float64, int32, int64; segment_ids int32/int64.
// Facts:    negative ids are dropped (as TF); segments without ids are 0; sums are deterministic.
// Errors:   std::invalid_argument if ids.shape is not a prefix of data.shape, num_segments < 0, or
//           an id >= num_segments.
// Gradient: data: gather(g, segment_ids) (0 where an id was negative); ids: none.
// Ref:      tf.math.unsorted_segment_sum
Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, std::int64_t num_segments);

// One-hot encoding along a new last axis: y[..., j] = on if indices[...] == j else off.
// Shapes:   indices I -> I + [depth].
// DTypes:   indices int32/int64; result `dtype` (any).
// Facts:    an index outside [0, depth) gives a row of `off` (as TF).
// Errors:   std::invalid_argument for non-integer indices or depth < 0. No gradient.
// Ref:      tf.one_hot (axis = -1)
Tensor one_hot(const Tensor& indices, std::int64_t depth, double on_value = 1.0, double off_value = 0.0,
               DType dtype = DType::kFloat32);

// Index of the largest / smallest element along `axis` (the first one on ties; NaN counts as
// the extreme, as NumPy).
// Shapes:   x [d0, ..., dn] -> x's shape without `axis`.
// DTypes:   x float32, float64, int32, int64; result int64.
// Errors:   std::invalid_argument for a scalar, a bad axis, bool input or an empty axis. No gradient.
// Ref:      tf.math.argmax, tf.math.argmin (output_type int64)
Tensor argmax(const Tensor& x, int axis = 0);
// Index of the smallest element along `axis` (the first on ties; NaN counts as smallest). As argmax.
// Ref: tf.math.argmin
Tensor argmin(const Tensor& x, int axis = 0);

}  // namespace tapeflow
