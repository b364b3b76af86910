// Array ops: shape manipulation, broadcasting, slicing, padding and joining.
//
// DTypes:   any dtype (float32, float64, int32, int64, bool) unless noted; gradients flow for
//           float32/float64 only.
// Errors:   std::invalid_argument naming the op and the shapes/arguments received.
// Gradient: every op is linear; its gradient is another op of this family (transpose <-> transpose,
//           slice <-> pad, concat -> slices, broadcast_to <-> sum_to_shape), so any order works.
// Ref:      tf.reshape, tf.broadcast_to, tf.transpose, tf.concat, tf.stack, tf.slice, tf.pad,
//           tf.tile, tensorflow/python/ops/array_grad.py
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow {

// Same elements, new shape; one dimension may be -1 (inferred). Gradient: reshape back.
Tensor reshape(const Tensor& x, const std::vector<std::int64_t>& shape);
// reshape to a Shape (every dim given, no -1); the element counts must match. Ref: tf.reshape
Tensor reshape(const Tensor& x, const Shape& shape);
// Broadcasts x to `shape` (NumPy rules). Gradient: sum_to_shape back.
Tensor broadcast_to(const Tensor& x, const Shape& shape);
// Sums x down to `shape`, which must broadcast to x's shape (the adjoint of broadcast_to; used by
// gradients of broadcasting ops). Gradient: broadcast_to back.
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

// Permutes the axes of x: output axis i is input axis perm[i]. Without perm, reverses the axes.
// Shapes:   x [d0, ..., dn] -> [d_perm[0], ..., d_perm[n]].
// Errors:   std::invalid_argument if perm is not a permutation of 0..rank-1 (names perm and shape).
// Gradient: transpose by the inverse permutation.
// Ref:      tf.transpose (permute is PyTorch's name for the same op)
Tensor transpose(const Tensor& x);
// Output axis i is x's axis perm[i] (see above). Ref: tf.transpose(x, perm)
Tensor transpose(const Tensor& x, const std::vector<int>& perm);
// The same as transpose(x, perm), under PyTorch's name.
Tensor permute(const Tensor& x, const std::vector<int>& perm);

// Inserts a size-1 axis at `axis` (in [-rank-1, rank]; negative counts from the end of the result).
// Shapes:   [2, 3], axis 1 -> [2, 1, 3]; axis -1 -> [2, 3, 1].
// Errors:   std::invalid_argument for an axis out of range. Gradient: via reshape.
// Ref:      tf.expand_dims
Tensor expand_dims(const Tensor& x, int axis);

// Removes size-1 axes: all of them, or exactly the listed ones.
// Shapes:   [1, 2, 1] -> [2]; with axes {-1} -> [1, 2].
// Errors:   std::invalid_argument if a listed axis is out of range or not of size 1.
// Gradient: via reshape. Ref: tf.squeeze
Tensor squeeze(const Tensor& x);
// Removes exactly the listed axes (negative counts from the end), each of which must have size 1.
// Ref: tf.squeeze(x, axis)
Tensor squeeze(const Tensor& x, const std::vector<int>& axes);

// Joins tensors along an existing axis.
// Shapes:   inputs equal except on `axis` -> that axis is the sum of theirs.
// DTypes:   all inputs share one dtype.
// Errors:   std::invalid_argument for no inputs, scalars, a bad axis, differing ranks, shapes or
//           dtypes (names every input's shape and dtype).
// Gradient: the matching slice of g for each input.
// Ref:      tf.concat
Tensor concat(const std::vector<Tensor>& values, int axis);

// Stacks same-shaped tensors along a new axis (in [-rank-1, rank]).
// Shapes:   n inputs [a, b], axis 0 -> [n, a, b]; axis -1 -> [a, b, n].
// Errors:   std::invalid_argument for no inputs or differing shapes/dtypes. Gradient: via concat.
// Ref:      tf.stack
Tensor stack(const std::vector<Tensor>& values, int axis = 0);
// The inverse of stack: the slices of x along `axis`, with that axis removed.
// Shapes:   [n, a, b], axis 0 -> n tensors [a, b]. Ref: tf.unstack
std::vector<Tensor> unstack(const Tensor& x, int axis = 0);
// Splits x along `axis` into `num_splits` equal parts, or into parts of the given sizes (one may
// be -1: the rest). Errors: std::invalid_argument if the sizes do not add up to the axis length.
// Ref: tf.split
std::vector<Tensor> split(const Tensor& x, int num_splits, int axis = 0);
// Splits x along `axis` into parts of the given sizes (one may be -1: the rest); they must add up
// to the axis length. Ref: tf.split(x, size_splits, axis)
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis = 0);

// The block of x starting at `begin` with extent `size` on every axis; size -1 means "to the end".
// Shapes:   begin and size have one entry per axis of x; y has shape size (with -1 resolved).
// Errors:   std::invalid_argument for wrong lengths, negative begin, or a block outside x.
// Gradient: pad g back with zeros to x's shape.
// Ref:      tf.slice
Tensor slice(const Tensor& x, const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& size);

// Pads x with `constant_value` (converted to x's dtype): paddings[i] = {before, after} on axis i.
// Shapes:   [2, 3], paddings {{1, 0}, {2, 2}} -> [3, 7].
// Errors:   std::invalid_argument if paddings has not one pair per axis or a pad is negative.
// Gradient: slice of g (the constant gets none).
// Ref:      tf.pad (mode "CONSTANT")
Tensor pad(const Tensor& x, const std::vector<std::pair<std::int64_t, std::int64_t>>& paddings,
           double constant_value = 0.0);

// Repeats x `multiples[i]` times along axis i.
// Shapes:   [2, 3], multiples {2, 1} -> [4, 3].
// Errors:   std::invalid_argument if multiples has not one entry per axis or one is negative.
// Gradient: via broadcast_to (g reshaped and summed over the copies).
// Ref:      tf.tile
Tensor tile(const Tensor& x, const std::vector<std::int64_t>& multiples);

}  // namespace tapeflow
