// Attribute encoding and geometry of the convolution and pooling ops (conv_ops.cc, pool_ops.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tape/core/tensor.h"
#include "tape/kernels/conv.h"
#include "tape/ops/conv_ops.h"
#include "tape/runtime/attrs.h"

namespace tapeflow::ops_internal {

// Attrs "strides", "dilations" ([h, w]), "padding" ("VALID"/"SAME"/"EXPLICIT"),
// "explicit_paddings" ([top, bottom, left, right]).
Attrs window_attrs(Size2D strides, const Padding2D& padding, Size2D dilations);

// OpDef::check_attrs of the window ops: "strides", "dilations" and (pool ops) "ksize" of two
// entries in [1, 2^31 - 1], "explicit_paddings" of four in [0, 2^31 - 1], "padding" one of the modes
// (pool ops: "VALID"/"SAME"), and the shape attribute `shape_attr` (if any) a rank-4 shape.
std::function<void(const Attrs&)> check_window_attrs_of(const char* op, bool pool, const char* shape_attr = nullptr);

// Validates an NHWC input shape and a window (kh, kw) with c_window input channels (0: any, as
// pooling) and f outputs, and returns the geometry. Errors: std::invalid_argument naming `op`.
kernels::Conv2DGeometry window_geometry(const char* op, const Shape& input, std::int64_t kh, std::int64_t kw,
                                        std::int64_t c_window, std::int64_t f, const Attrs& attrs);

// Errors: std::invalid_argument naming `op` when one image of `shape` [N, H, W, C] has 2^31 or more
// elements (argmax indices are int32, flattened within an image).
void check_argmax_image(const char* op, const Shape& shape);

// [N, Ho, Wo, F] of a geometry.
Shape output_shape(const kernels::Conv2DGeometry& g);

// Errors: std::invalid_argument naming `op`, `what` and the received shape if it is not rank 4.
void check_rank4(const char* op, const char* what, const Shape& s);
// Errors: std::invalid_argument naming `op` if the gradient's shape is not `expected`.
void check_grad_shape(const char* op, const Shape& expected, const Tensor& grad);

}  // namespace tapeflow::ops_internal
