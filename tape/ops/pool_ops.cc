// Pooling ops: MaxPool, MaxPoolGrad, MaxPoolGradGrad, AvgPool, AvgPoolGrad, and the argmax pair
// MaxPoolGradWithArgmax / MaxPoolGradGradWithArgmax (kernels in tape/kernels/conv.h); declared in
// conv_ops.h. Gradients written with these ops.
#include <stdexcept>
#include <string>

#include "tape/kernels/conv.h"
#include "tape/ops/conv_ops.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/conv_geometry.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

using ops_internal::check_arity;
using ops_internal::check_grad_shape;
using ops_internal::check_rank4;
using ops_internal::check_window_attrs_of;
using ops_internal::describe;
using ops_internal::output_shape;

namespace {

Attrs pool_attrs(const char* op, Size2D ksize, Size2D strides, const std::string& padding) {
  if (padding != "VALID" && padding != "SAME")
    throw std::invalid_argument(std::string(op) + ": padding must be \"VALID\" or \"SAME\", got \"" + padding + "\"");
  return ops_internal::window_attrs(strides, padding, {1, 1}).set("ksize", std::vector<std::int64_t>{ksize[0], ksize[1]});
}

kernels::Conv2DGeometry pool_geometry(const char* op, const Shape& input, const Attrs& at) {
  check_rank4(op, "input", input);
  const auto& k = at.get_ints("ksize");
  if (k.size() != 2) throw std::invalid_argument(std::string(op) + ": ksize " + ints_to_string(k) + " needs 2 entries");
  return ops_internal::window_geometry(op, input, k[0], k[1], 0, input[3], at);
}

void check_float(const char* op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string(op) + ": expected float32 or float64, got " + describe(x));
}

// One-input pool: MaxPool / AvgPool.
template <bool kMax>
TensorList pool_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* op = kMax ? "max_pool2d" : "avg_pool2d";
  check_arity(op, in, 1);
  const Tensor& x = in[0];
  check_float(op, x);
  const kernels::Conv2DGeometry g = pool_geometry(op, x.shape(), at);
  Tensor y = Tensor::empty(output_shape(g), x.dtype());
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kMax)
      kernels::max_pool2d(x.data<T>(), y.mutable_data<T>(), g);
    else
      kernels::avg_pool2d(x.data<T>(), y.mutable_data<T>(), g);
  });
  return {y};
}

// MaxPoolGrad {input, grad [N,Ho,Wo,C]} -> [N,H,W,C]; MaxPoolGradGrad {input, grad [N,H,W,C]} -> [N,Ho,Wo,C].
template <bool kGradGrad>
TensorList max_grad_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* op = kGradGrad ? "max_pool2d_grad_grad" : "max_pool2d_grad";
  check_arity(op, in, 2);
  const Tensor &x = in[0], &d = in[1];
  ops_internal::check_same_dtype(op, x, d);
  check_float(op, x);
  const kernels::Conv2DGeometry g = pool_geometry(op, x.shape(), at);
  if (kGradGrad ? d.shape() != x.shape() : d.shape() != output_shape(g))
    throw std::invalid_argument(std::string(op) + ": grad must have shape " +
                                (kGradGrad ? x.shape() : output_shape(g)).to_string() + ", got " +
                                d.shape().to_string());
  Tensor y = Tensor::empty(kGradGrad ? output_shape(g) : x.shape(), x.dtype());
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kGradGrad)
      kernels::max_pool2d_grad_grad(x.data<T>(), d.data<T>(), y.mutable_data<T>(), g);
    else
      kernels::max_pool2d_grad(x.data<T>(), d.data<T>(), y.mutable_data<T>(), g);
  });
  return {y};
}

// AvgPoolGrad {grad [N,Ho,Wo,C]}, attr orig_input_shape -> [N,H,W,C].
TensorList avg_grad_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* op = "avg_pool2d_grad";
  check_arity(op, in, 1);
  const Tensor& d = in[0];
  check_float(op, d);
  const Shape sx(at.get_ints("orig_input_shape"));
  const kernels::Conv2DGeometry g = pool_geometry(op, sx, at);
  check_grad_shape(op, output_shape(g), d);
  Tensor dx = Tensor::empty(sx, d.dtype());
  dispatch_floating(d.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernels::avg_pool2d_grad(d.data<T>(), dx.mutable_data<T>(), g);
  });
  return {dx};
}

Attrs without_shape(const Attrs& at) {
  Attrs out;
  for (const auto& [k, v] : at.items())
    if (k != "orig_input_shape") out.set(k, v);
  return out;
}

Tensor max_grad(const Tensor& x, const Tensor& g, const Attrs& at) {
  static const OpDef& op = op_def("MaxPoolGrad");
  return execute1(op, {x, g}, at);
}
Tensor max_grad_grad(const Tensor& x, const Tensor& g, const Attrs& at) {
  static const OpDef& op = op_def("MaxPoolGradGrad");
  return execute1(op, {x, g}, at);
}
Tensor avg_pool(const Tensor& x, const Attrs& at) {
  static const OpDef& op = op_def("AvgPool");
  return execute1(op, {x}, without_shape(at));
}
Tensor avg_grad(const Shape& sx, const Tensor& g, const Attrs& at) {
  static const OpDef& op = op_def("AvgPoolGrad");
  return execute1(op, {g}, without_shape(at).set("orig_input_shape", sx.to_vector()));
}

// y = max over windows: dx = MaxPoolGrad(x, g).
TensorList max_pool_gradient(const GradContext& c, std::span<const Tensor> g) {
  return {max_grad(c.input(0), g[0], c.attrs())};
}
// MaxPoolGrad(x, d) is linear in d and piecewise constant in x: dd = MaxPoolGradGrad(x, G), dx none.
TensorList max_grad_gradient(const GradContext& c, std::span<const Tensor> g) {
  TensorList out{Tensor(), Tensor()};
  if (c.needs_gradient(1)) out[1] = max_grad_grad(c.input(0), g[0], c.attrs());
  return out;
}
// MaxPoolGradGrad(x, d) = d gathered at the argmaxes: its adjoint is MaxPoolGrad(x, G).
TensorList max_grad_grad_gradient(const GradContext& c, std::span<const Tensor> g) {
  TensorList out{Tensor(), Tensor()};
  if (c.needs_gradient(1)) out[1] = max_grad(c.input(0), g[0], c.attrs());
  return out;
}
// Linear pair: AvgPool's adjoint is AvgPoolGrad and back.
TensorList avg_pool_gradient(const GradContext& c, std::span<const Tensor> g) {
  return {avg_grad(c.input_shape(0), g[0], c.attrs())};
}
TensorList avg_grad_gradient(const GradContext& c, std::span<const Tensor> g) { return {avg_pool(g[0], c.attrs())}; }


// MaxPoolGradWithArgmax {grad [N,Ho,Wo,C], argmax int32 [N,Ho,Wo,C]} -> orig_input_shape;
// MaxPoolGradGradWithArgmax {grad orig_input_shape, argmax} -> [N,Ho,Wo,C].
template <bool kGradGrad>
TensorList argmax_grad_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* op = kGradGrad ? "max_pool2d_grad_grad_with_argmax" : "max_pool2d_grad_with_argmax";
  check_arity(op, in, 2);
  const Tensor &d = in[0], &am = in[1];
  check_float(op, d);
  if (am.dtype() != DType::kInt32)
    throw std::invalid_argument(std::string(op) + ": argmax must be int32, got " + describe(am));
  const Shape sx(at.get_ints("orig_input_shape"));
  const kernels::Conv2DGeometry g = pool_geometry(op, sx, at);
  ops_internal::check_argmax_image(op, sx);
  if (am.shape() != output_shape(g))
    throw std::invalid_argument(std::string(op) + ": argmax must have the pooled shape " +
                                output_shape(g).to_string() + ", got " + am.shape().to_string());
  if (d.shape() != (kGradGrad ? sx : output_shape(g)))
    throw std::invalid_argument(std::string(op) + ": grad must have shape " +
                                (kGradGrad ? sx : output_shape(g)).to_string() + ", got " + d.shape().to_string());
  Tensor y = Tensor::empty(kGradGrad ? output_shape(g) : sx, d.dtype());
  dispatch_floating(d.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const bool ok =
        kGradGrad ? kernels::max_pool2d_grad_grad_with_argmax(d.data<T>(), am.data<std::int32_t>(), y.mutable_data<T>(), g)
                  : kernels::max_pool2d_grad_with_argmax(d.data<T>(), am.data<std::int32_t>(), y.mutable_data<T>(), g);
    if (!ok)
      throw std::invalid_argument(std::string(op) + ": argmax holds an index outside its pooling window (ksize " +
                                  ints_to_string(at.get_ints("ksize")) + ", strides " +
                                  ints_to_string(at.get_ints("strides")) + ", input " + sx.to_string() +
                                  "); it must come from max pooling with these attributes");
  });
  return {y};
}

Tensor argmax_grad(const Tensor& g, const Tensor& argmax, const Attrs& at) {
  static const OpDef& op = op_def("MaxPoolGradWithArgmax");
  return execute1(op, {g, argmax}, at);
}
Tensor argmax_grad_grad(const Tensor& g, const Tensor& argmax, const Attrs& at) {
  static const OpDef& op = op_def("MaxPoolGradGradWithArgmax");
  return execute1(op, {g, argmax}, at);
}

// Both are linear in grad, each the other's adjoint (a scatter and the matching gather); argmax
// (integer) gets none.
TensorList argmax_grad_gradient(const GradContext& c, std::span<const Tensor> g) {
  return {c.needs_gradient(0) ? argmax_grad_grad(g[0], c.input(1), c.attrs()) : Tensor(), Tensor()};
}
TensorList argmax_grad_grad_gradient(const GradContext& c, std::span<const Tensor> g) {
  return {c.needs_gradient(0) ? argmax_grad(g[0], c.input(1), c.attrs()) : Tensor(), Tensor()};
}

// Batched: K folds into N for both inputs (the indices are per image, so an unbatched argmax is
// tiled as is) and into orig_input_shape.
template <bool kGradGrad>
TensorList argmax_grad_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  const std::int64_t k = ctx.size();
  const auto fold = [&](int i) {
    Shape s = ctx.shape(i);
    s[0] *= k;
    return reshape(ctx.dense(i), s);
  };
  Shape sx(ctx.attrs().get_ints("orig_input_shape"));
  sx[0] *= k;
  Attrs at = ctx.attrs();
  at.set("orig_input_shape", sx.to_vector());
  const Tensor y = kGradGrad ? argmax_grad_grad(fold(0), fold(1), at) : argmax_grad(fold(0), fold(1), at);
  Shape split{k, y.shape()[0] / k};
  for (int d = 1; d < y.rank(); ++d) split.push_back(y.shape()[d]);
  return {reshape(y, split)};
}

// AvgPoolGrad batched: K folds into the gradient's example axis and into orig_input_shape.
TensorList avg_grad_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  const std::int64_t k = ctx.size();
  const Shape per = ctx.shape(0);
  Shape g{k * per[0]}, sx(ctx.attrs().get_ints("orig_input_shape"));
  for (int i = 1; i < per.rank(); ++i) g.push_back(per[i]);
  const Shape sx_folded{k * sx[0], sx[1], sx[2], sx[3]};
  const Tensor dx = avg_grad(sx_folded, reshape(in[0], g), ctx.attrs());
  return {reshape(dx, Shape{k, sx[0], sx[1], sx[2], sx[3]})};
}
}  // namespace

Tensor max_pool2d(const Tensor& input, Size2D ksize, Size2D strides, const std::string& padding) {
  static const OpDef& op = op_def("MaxPool");
  return execute1(op, {input}, pool_attrs("max_pool2d", ksize, strides, padding));
}

Tensor max_pool2d_grad(const Tensor& input, const Tensor& grad, Size2D ksize, Size2D strides,
                       const std::string& padding) {
  return max_grad(input, grad, pool_attrs("max_pool2d_grad", ksize, strides, padding));
}

Tensor max_pool2d_grad_with_argmax(const Shape& input_shape, const Tensor& grad, const Tensor& argmax, Size2D ksize,
                                   Size2D strides, const std::string& padding) {
  check_rank4("max_pool2d_grad_with_argmax", "input_shape", input_shape);
  return argmax_grad(grad, argmax,
                     pool_attrs("max_pool2d_grad_with_argmax", ksize, strides, padding)
                         .set("orig_input_shape", input_shape.to_vector()));
}

Tensor avg_pool2d(const Tensor& input, Size2D ksize, Size2D strides, const std::string& padding) {
  return avg_pool(input, pool_attrs("avg_pool2d", ksize, strides, padding));
}

Tensor avg_pool2d_grad(const Shape& input_shape, const Tensor& grad, Size2D ksize, Size2D strides,
                       const std::string& padding) {
  check_rank4("avg_pool2d_grad", "input_shape", input_shape);
  return avg_grad(input_shape, grad, pool_attrs("avg_pool2d_grad", ksize, strides, padding));
}

void register_pool_ops(OpRegistry& r) {
  // Pooling works per example: K folds into N (MaxPoolGrad's unbatched operand tiled K times).
  r.add({.name = "MaxPool", .forward = pool_forward<true>, .gradient = max_pool_gradient, .saves = kSaveInputs,
         .batch = batching::fold_into_axis0({0}), .check_attrs = check_window_attrs_of("MaxPool", true)});
  r.add({.name = "MaxPoolGrad", .forward = max_grad_forward<false>, .gradient = max_grad_gradient,
         .saves = kSaveInputs, .batch = batching::fold_into_axis0({0, 1}),
         .check_attrs = check_window_attrs_of("MaxPoolGrad", true)});
  r.add({.name = "MaxPoolGradGrad", .forward = max_grad_forward<true>, .gradient = max_grad_grad_gradient,
         .saves = kSaveInputs, .batch = batching::fold_into_axis0({0, 1}),
         .check_attrs = check_window_attrs_of("MaxPoolGradGrad", true)});
  r.add({.name = "MaxPoolGradWithArgmax", .forward = argmax_grad_forward<false>, .gradient = argmax_grad_gradient,
         .saves = kSaveInputs, .batch = argmax_grad_batch<false>,
         .check_attrs = check_window_attrs_of("MaxPoolGradWithArgmax", true, "orig_input_shape")});
  r.add({.name = "MaxPoolGradGradWithArgmax", .forward = argmax_grad_forward<true>,
         .gradient = argmax_grad_grad_gradient, .saves = kSaveInputs, .batch = argmax_grad_batch<true>,
         .check_attrs = check_window_attrs_of("MaxPoolGradGradWithArgmax", true, "orig_input_shape")});
  r.add({.name = "AvgPool", .forward = pool_forward<false>, .gradient = avg_pool_gradient, .saves = kSaveNone,
         .batch = batching::fold_into_axis0({0}), .check_attrs = check_window_attrs_of("AvgPool", true)});
  r.add({.name = "AvgPoolGrad", .forward = avg_grad_forward, .gradient = avg_grad_gradient, .saves = kSaveNone,
         .batch = avg_grad_batch, .check_attrs = check_window_attrs_of("AvgPoolGrad", true, "orig_input_shape")});
}

}  // namespace tapeflow
