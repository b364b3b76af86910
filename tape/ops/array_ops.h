// Array ops: shape manipulation, broadcasting, slicing, joining and indexing.
//
// DTypes:   any dtype unless noted; gradients flow for float32/float64.
// Errors:   std::invalid_argument naming the op and the shapes/arguments received.
// Ref:      tf.reshape, tf.broadcast_to, tf.transpose, tf.concat, tf.stack, tf.slice, tf.gather,
//           tensorflow/python/ops/array_grad.py
#pragma once

#include <cstdint>
#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow {

// Same elements, new shape; one dimension may be -1 (inferred). Gradient: reshape back.
Tensor reshape(const Tensor& x, const std::vector<std::int64_t>& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
// Broadcasts x to `shape` (NumPy rules). Gradient: sum_to_shape back.
Tensor broadcast_to(const Tensor& x, const Shape& shape);
// Sums x down to `shape`, which must broadcast to x's shape (the adjoint of broadcast_to; used by
// gradients of broadcasting ops). Gradient: broadcast_to back.
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

}  // namespace tapeflow
