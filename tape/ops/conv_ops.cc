// Convolution ops: Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter (kernels in tape/kernels/conv.h),
// gradients written with the same three ops (tensorflow/python/ops/nn_grad.py); FusedConv2D
// (Conv2D + BiasAdd (+ Relu) in one pass), whose gradient is ReluGrad, the same three and a sum;
// FusedConv2DMaxPool (Conv2D + BiasAdd + MaxPool with argmax), whose gradient starts with
// MaxPoolGradWithArgmax.
#include "tape/ops/conv_ops.h"

#include <stdexcept>
#include <string>

#include "tape/kernels/conv.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/conv_geometry.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tape/runtime/batching.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

using ops_internal::check_arity;
using ops_internal::check_grad_shape;
using ops_internal::check_rank4;
using ops_internal::describe;
using ops_internal::output_shape;
using ops_internal::window_geometry;

namespace {

Shape shape_attr(const Attrs& at, const char* name) { return Shape(at.get_ints(name)); }

void check_floats(const char* op, const Tensor& a, const Tensor& b) {
  ops_internal::check_same_dtype(op, a, b);
  if (!is_floating(a.dtype()))
    throw std::invalid_argument(std::string(op) + ": expected float32 or float64, got " + describe(a));
}

kernels::Conv2DGeometry conv_geometry(const char* op, const Shape& input, const Shape& filter, const Attrs& at) {
  check_rank4(op, "filters", filter);
  return window_geometry(op, input, filter[0], filter[1], filter[2], filter[3], at);
}

// Inputs {input, filters} -> [N, Ho, Wo, F].
TensorList conv2d_forward(std::span<const Tensor> in, const Attrs& at) {
  check_arity("conv2d", in, 2);
  const Tensor &x = in[0], &f = in[1];
  check_floats("conv2d", x, f);
  const kernels::Conv2DGeometry g = conv_geometry("conv2d", x.shape(), f.shape(), at);
  Tensor y = Tensor::empty(output_shape(g), x.dtype());
  dispatch_floating(x.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    kernels::conv2d(x.data<T>(), f.data<T>(), y.mutable_data<T>(), g);
  });
  return {y};
}

// Inputs {filters, out_backprop}, attr input_sizes -> [N, H, W, C].
TensorList backprop_input_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* op = "conv2d_backprop_input";
  check_arity(op, in, 2);
  const Tensor &f = in[0], &dy = in[1];
  check_floats(op, f, dy);
  const Shape sizes = shape_attr(at, "input_sizes");
  const kernels::Conv2DGeometry g = conv_geometry(op, sizes, f.shape(), at);
  check_grad_shape(op, output_shape(g), dy);
  Tensor dx = Tensor::empty(sizes, f.dtype());
  dispatch_floating(f.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernels::conv2d_backprop_input(f.data<T>(), dy.data<T>(), dx.mutable_data<T>(), g);
  });
  return {dx};
}

// Inputs {input, out_backprop}, attr filter_sizes -> [kh, kw, C, F].
TensorList backprop_filter_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* op = "conv2d_backprop_filter";
  check_arity(op, in, 2);
  const Tensor &x = in[0], &dy = in[1];
  check_floats(op, x, dy);
  const Shape sizes = shape_attr(at, "filter_sizes");
  const kernels::Conv2DGeometry g = conv_geometry(op, x.shape(), sizes, at);
  check_grad_shape(op, output_shape(g), dy);
  Tensor df = Tensor::empty(sizes, x.dtype());
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernels::conv2d_backprop_filter(x.data<T>(), dy.data<T>(), df.mutable_data<T>(), g);
  });
  return {df};
}

// The checks of the fused ops' inputs {input, filters, bias}; the convolution's geometry.
kernels::Conv2DGeometry fused_geometry(const char* op, std::span<const Tensor> in, const Attrs& at) {
  check_arity(op, in, 3);
  const Tensor &x = in[0], &f = in[1], &b = in[2];
  check_floats(op, x, f);
  ops_internal::check_same_dtype(op, x, b);
  const kernels::Conv2DGeometry g = conv_geometry(op, x.shape(), f.shape(), at);
  if (b.shape() != Shape{g.f})
    throw std::invalid_argument(std::string(op) + ": bias must have shape [" + std::to_string(g.f) +
                                "] (the filters' output channels, filters " + f.shape().to_string() + "), got " +
                                b.shape().to_string());
  return g;
}

// Inputs {input, filters, bias}, attr activation "linear" / "relu" -> [N, Ho, Wo, F].
TensorList fused_conv2d_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* op = "fused_conv2d";
  const kernels::Conv2DGeometry g = fused_geometry(op, in, at);
  const Tensor &x = in[0], &f = in[1], &b = in[2];
  const bool relu = at.get_string("activation") == "relu";
  Tensor y = Tensor::empty(output_shape(g), x.dtype());
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernels::conv2d(x.data<T>(), f.data<T>(), y.mutable_data<T>(), g, kernels::ConvEpilogue<T>{b.data<T>(), relu});
  });
  return {y};
}

// The pool's attrs of a FusedConv2DMaxPool call, as MaxPool's.
Attrs pool_part(const Attrs& at) {
  return ops_internal::window_attrs(Size2D{at.get_ints("pool_strides")[0], at.get_ints("pool_strides")[1]},
                                    at.get_string("pool_padding"), {1, 1})
      .set("ksize", at.get_ints("ksize"));
}

// Inputs {input, filters, bias}, attr activation "linear" / "relu" -> {act(max_pool2d(conv2d + bias))
// [N, Hp, Wp, F], argmax int32}.
TensorList fused_conv2d_max_pool_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* op = "fused_conv2d_max_pool2d";
  const kernels::Conv2DGeometry g = fused_geometry(op, in, at);
  const Tensor &x = in[0], &f = in[1], &b = in[2];
  const Shape zs = output_shape(g);
  const Attrs pool = pool_part(at);
  const auto& k = pool.get_ints("ksize");
  const kernels::Conv2DGeometry pg = window_geometry(op, zs, k[0], k[1], 0, zs[3], pool);
  ops_internal::check_argmax_image(op, zs);
  Tensor y = Tensor::empty(output_shape(pg), x.dtype()), argmax = Tensor::empty(output_shape(pg), DType::kInt32);
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernels::conv2d_max_pool2d(x.data<T>(), f.data<T>(), b.data<T>(), y.mutable_data<T>(),
                               argmax.mutable_data<std::int32_t>(), g, pg, at.get_string("activation") == "relu");
  });
  return {y, argmax};
}

// Inputs {input, out_backprop (the pooled gradient), argmax} and, with activation "relu", the
// fused op's output (out_backprop is then the gradient at the relu's output); attr filter_sizes and
// FusedConv2DMaxPool's -> {filter gradient [kh, kw, C, F], bias gradient [F]}.
TensorList filter_bias_with_argmax_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* op = "fused_conv2d_max_pool2d_backprop_filter";
  const bool relu = at.get_string("activation") == "relu";
  check_arity(op, in, relu ? 4 : 3);
  const Tensor &x = in[0], &dy = in[1], &am = in[2];
  check_floats(op, x, dy);
  if (am.dtype() != DType::kInt32)
    throw std::invalid_argument(std::string(op) + ": argmax must be int32, got " + describe(am));
  const Shape sizes = shape_attr(at, "filter_sizes");
  const kernels::Conv2DGeometry g = conv_geometry(op, x.shape(), sizes, at);
  const Shape zs = output_shape(g);
  const Attrs pool = pool_part(at);
  const auto& k = pool.get_ints("ksize");
  const kernels::Conv2DGeometry pg = window_geometry(op, zs, k[0], k[1], 0, zs[3], pool);
  ops_internal::check_argmax_image(op, zs);
  check_grad_shape(op, output_shape(pg), dy);
  if (am.shape() != output_shape(pg))
    throw std::invalid_argument(std::string(op) + ": argmax must have the pooled shape " +
                                output_shape(pg).to_string() + ", got " + am.shape().to_string());
  if (relu) {
    ops_internal::check_same_dtype(op, dy, in[3]);
    if (in[3].shape() != output_shape(pg))
      throw std::invalid_argument(std::string(op) + ": output (the relu's) must have the pooled shape " +
                                  output_shape(pg).to_string() + ", got " + in[3].shape().to_string());
  }
  Tensor df = Tensor::empty(sizes, x.dtype()), db = Tensor::empty(Shape{g.f}, x.dtype());
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if (!kernels::conv2d_backprop_filter_bias_with_argmax(x.data<T>(), dy.data<T>(), am.data<std::int32_t>(),
                                                          df.mutable_data<T>(), db.mutable_data<T>(), g, pg,
                                                          relu ? in[3].data<T>() : nullptr))
      throw std::invalid_argument(std::string(op) + ": argmax holds an index outside its pooling window (ksize " +
                                  ints_to_string(k) + ", pool_strides " + ints_to_string(at.get_ints("pool_strides")) +
                                  ", convolution output " + zs.to_string() +
                                  "); it must come from fused_conv2d_max_pool2d with these attributes");
  });
  return {df, db};
}

const OpDef& filter_bias_with_argmax_def() {
  static const OpDef& op = op_def("FusedConv2DMaxPoolBackpropFilter");
  return op;
}

const OpDef& fused_conv2d_max_pool_def() {
  static const OpDef& op = op_def("FusedConv2DMaxPool");
  return op;
}

const OpDef& fused_conv2d_def() {
  static const OpDef& op = op_def("FusedConv2D");
  return op;
}

const OpDef& conv2d_def() {
  static const OpDef& op = op_def("Conv2D");
  return op;
}
const OpDef& backprop_input_def() {
  static const OpDef& op = op_def("Conv2DBackpropInput");
  return op;
}
const OpDef& backprop_filter_def() {
  static const OpDef& op = op_def("Conv2DBackpropFilter");
  return op;
}

// The window attrs of a call (without the shape attr of the op that made it).
Attrs window_only(const Attrs& at) {
  Attrs out;
  for (const auto& [k, v] : at.items())
    if (k != "input_sizes" && k != "filter_sizes" && k != "activation" && k != "ksize" && k != "pool_strides" &&
        k != "pool_padding")
      out.set(k, v);
  return out;
}
// The window attrs of a call with one shape attr added.
Attrs with_shape(const Attrs& at, const char* name, const Shape& s) { return window_only(at).set(name, s.to_vector()); }

Tensor conv(const Tensor& x, const Tensor& f, const Attrs& at) { return execute1(conv2d_def(), {x, f}, window_only(at)); }
Tensor backprop_input(const Shape& sizes, const Tensor& f, const Tensor& dy, const Attrs& at) {
  return execute1(backprop_input_def(), {f, dy}, with_shape(at, "input_sizes", sizes));
}
Tensor backprop_filter(const Tensor& x, const Shape& sizes, const Tensor& dy, const Attrs& at) {
  return execute1(backprop_filter_def(), {x, dy}, with_shape(at, "filter_sizes", sizes));
}

// y = conv(x, f): dx = BackpropInput(x.shape, f, g), df = BackpropFilter(x, f.shape, g).
TensorList conv2d_gradient(const GradContext& c, std::span<const Tensor> g) {
  TensorList out{Tensor(), Tensor()};
  if (c.needs_gradient(0)) out[0] = backprop_input(c.input_shape(0), c.input(1), g[0], c.attrs());
  if (c.needs_gradient(1)) out[1] = backprop_filter(c.input(0), c.input_shape(1), g[0], c.attrs());
  return out;
}

// The gradients of the fused ops' {input, filters, bias} from the gradient g' at conv + bias:
// conv's gradients of g' and db = Σ_{n,h,w} g' (BiasAddGrad).
TensorList conv_bias_gradients(const GradContext& c, const Tensor& pre) {
  TensorList out{Tensor(), Tensor(), Tensor()};
  if (c.needs_gradient(0)) out[0] = backprop_input(c.input_shape(0), c.input(1), pre, c.attrs());
  if (c.needs_gradient(1)) out[1] = backprop_filter(c.input(0), c.input_shape(1), pre, c.attrs());
  if (c.needs_gradient(2)) out[2] = reduce_sum(pre, std::vector<int>{0, 1, 2});
  return out;
}

// y = act(conv(x, f) + b): g' = ReluGrad(g, y) (or g).
TensorList fused_conv2d_gradient(const GradContext& c, std::span<const Tensor> g) {
  return conv_bias_gradients(c, c.attrs().get_string("activation") == "relu" ? relu_grad(g[0], c.output(0)) : g[0]);
}

// The gradient at the convolution's output of FusedConv2DMaxPool (attrs `at`, input and filter
// shapes) from the pooled gradient dy: max_pool2d_grad_with_argmax(dy, argmax).
Tensor pooled_to_conv_gradient(const Shape& input, const Shape& filter, const Tensor& dy, const Tensor& argmax,
                               const Attrs& at) {
  const Attrs pool = pool_part(at);
  const kernels::Conv2DGeometry cg = conv_geometry("fused_conv2d_max_pool2d", input, filter, at);
  const auto& k = pool.get_ints("ksize");
  const auto& s = pool.get_ints("strides");
  return max_pool2d_grad_with_argmax(output_shape(cg), dy, argmax, {k[0], k[1]}, {s[0], s[1]},
                                     pool.get_string("padding"));
}

// y, argmax = act(max_pool(conv(x, f) + b)): g' = MaxPoolGradWithArgmax(relu_grad(g, y) (relu) or
// g, argmax) (the gradient at the convolution's output), then conv's gradients of g' and
// db = Σ_{n,h,w} g'; for a first layer, FusedConv2DMaxPoolBackpropFilter. argmax: none.
TensorList fused_conv2d_max_pool_gradient(const GradContext& c, std::span<const Tensor> g) {
  const bool relu = c.attrs().get_string("activation") == "relu";
  if (!c.needs_gradient(0) && (c.needs_gradient(1) || c.needs_gradient(2))) {
    // The input needs none (a model's first layer): filter and bias gradients straight from the
    // argmax (and the relu's output), without the gradient at the convolution's output.
    TensorList in{c.input(0), g[0], c.output(1)};
    if (relu) in.push_back(c.output(0));
    const TensorList fb = execute(filter_bias_with_argmax_def(), in,
                                  Attrs(c.attrs()).set("filter_sizes", c.input_shape(1).to_vector()));
    return {Tensor(), c.needs_gradient(1) ? fb[0] : Tensor(), c.needs_gradient(2) ? fb[1] : Tensor()};
  }
  return conv_bias_gradients(c, pooled_to_conv_gradient(c.input_shape(0), c.input_shape(1),
                                                         relu ? relu_grad(g[0], c.output(0)) : g[0], c.output(1),
                                                         c.attrs()));
}

// df = BackpropFilter(x, dz), db = Σ dz with dz = S(dy) (S: the argmax scatter, linear): bilinear
// in (x, dy). <Gf, df> + <Gb, db> gives dx = BackpropInput(x.shape, Gf, dz) and
// d(dy) = Sᵀ(conv(x, Gf) + Gb) = MaxPoolGradGradWithArgmax(FusedConv2D(x, Gf, Gb)); argmax none.
// With relu (M: the mask y > 0 of its output y), dy is first M ⊙ dy: dz and d(dy) go through
// relu_grad with y; y gets none (as ReluGrad's features input: zero almost everywhere).
TensorList filter_bias_with_argmax_gradient(const GradContext& c, std::span<const Tensor> g) {
  const bool relu = c.attrs().get_string("activation") == "relu";
  TensorList out(relu ? 4 : 3);
  const Shape fs = shape_attr(c.attrs(), "filter_sizes");
  if (c.needs_gradient(0))
    out[0] = backprop_input(c.input_shape(0), g[0],
                            pooled_to_conv_gradient(c.input_shape(0), fs,
                                                    relu ? relu_grad(c.input(1), c.input(3)) : c.input(1),
                                                    c.input(2), c.attrs()),
                            c.attrs());
  if (c.needs_gradient(1)) {
    const Tensor z =
        execute1(fused_conv2d_def(), {c.input(0), g[0], g[1]}, window_only(c.attrs()).set("activation", "linear"));
    static const OpDef& gather = op_def("MaxPoolGradGradWithArgmax");
    const Shape zs = output_shape(conv_geometry("fused_conv2d_max_pool2d", c.input_shape(0), fs, c.attrs()));
    out[1] = execute1(gather, {z, c.input(2)}, pool_part(c.attrs()).set("orig_input_shape", zs.to_vector()));
    if (relu) out[1] = relu_grad(out[1], c.input(3));
  }
  return out;
}

// dx = BackpropInput(f, dy) is bilinear in (f, dy): <G, dx> = <G, conv^T(dy; f)> gives
// df = BackpropFilter(G, f.shape, dy), d(dy) = conv(G, f).
TensorList backprop_input_gradient(const GradContext& c, std::span<const Tensor> g) {
  TensorList out{Tensor(), Tensor()};
  if (c.needs_gradient(0)) out[0] = backprop_filter(g[0], c.input_shape(0), c.input(1), c.attrs());
  if (c.needs_gradient(1)) out[1] = conv(g[0], c.input(0), c.attrs());
  return out;
}

// df = BackpropFilter(x, dy) is bilinear in (x, dy): dx = BackpropInput(x.shape, G, dy),
// d(dy) = conv(x, G).
TensorList backprop_filter_gradient(const GradContext& c, std::span<const Tensor> g) {
  TensorList out{Tensor(), Tensor()};
  if (c.needs_gradient(0)) out[0] = backprop_input(c.input_shape(0), g[0], c.input(1), c.attrs());
  if (c.needs_gradient(1)) out[1] = conv(c.input(0), g[0], c.attrs());
  return out;
}


// Batching rules (OpDef::batch). A batched data input or output gradient folds K into its example
// axis (N -> K·N, the shape attr scaled to match); a batched filter, or the data input of the filter
// gradient, stacks K along a channel axis ([K, kh, kw, C, F] -> [kh, kw, C, K·F]), so the op still
// runs once; both operands batched: one call per k (batching::sequential).
// [K, N, ...] -> [K·N, ...] and back.
Tensor fold(const Tensor& t) {
  Shape s{t.shape()[0] * t.shape()[1]};
  for (int i = 2; i < t.rank(); ++i) s.push_back(t.shape()[i]);
  return reshape(t, s);
}
Tensor unfold(const Tensor& t, std::int64_t k) {
  Shape s{k, t.shape()[0] / k};
  for (int i = 1; i < t.rank(); ++i) s.push_back(t.shape()[i]);
  return reshape(t, s);
}
// [K, a, b, c, d] -> [a, b, c, K·d], and back from [a, b, c, K·d] to [K, a, b, c, d].
Tensor stack_last(const Tensor& t) {
  const Shape& s = t.shape();
  return reshape(transpose(t, {1, 2, 3, 0, 4}), Shape{s[1], s[2], s[3], s[0] * s[4]});
}
Tensor unstack_last(const Tensor& t, std::int64_t k) {
  const Shape& s = t.shape();
  return transpose(reshape(t, Shape{s[0], s[1], s[2], k, s[3] / k}), {3, 0, 1, 2, 4});
}
// [K, kh, kw, C, F] -> [kh, kw, K·C, F], and [kh, kw, K·C, F] -> [K, kh, kw, C, F].
Tensor stack_third(const Tensor& t) {
  const Shape& s = t.shape();
  return reshape(transpose(t, {1, 2, 0, 3, 4}), Shape{s[1], s[2], s[0] * s[3], s[4]});
}
Tensor unstack_third(const Tensor& t, std::int64_t k) {
  const Shape& s = t.shape();
  return transpose(reshape(t, Shape{s[0], s[1], k, s[2] / k, s[3]}), {2, 0, 1, 3, 4});
}
Shape scaled(Shape s, int axis, std::int64_t k) {
  s[axis] *= k;
  return s;
}

TensorList conv2d_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  const std::int64_t k = ctx.size();
  if (ctx.batched(0) && ctx.batched(1)) return batching::sequential(in, ctx);
  if (ctx.batched(0)) return {unfold(conv(fold(in[0]), in[1], ctx.attrs()), k)};
  return {unstack_last(conv(in[0], stack_last(in[1]), ctx.attrs()), k)};
}

// Only the input batched: K folds into N. Otherwise one call per k.
TensorList fused_conv2d_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  if (ctx.batched(0) && !ctx.batched(1) && !ctx.batched(2))
    return {unfold(execute1(fused_conv2d_def(), {fold(in[0]), in[1], in[2]}, ctx.attrs()), ctx.size())};
  return batching::sequential(in, ctx);
}

// Only the input batched: K folds into N (the argmax indices are per image). Otherwise one call per k.
TensorList fused_conv2d_max_pool_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  if (ctx.batched(0) && !ctx.batched(1) && !ctx.batched(2)) {
    TensorList out = execute(fused_conv2d_max_pool_def(), TensorList{fold(in[0]), in[1], in[2]}, ctx.attrs());
    return {unfold(out[0], ctx.size()), unfold(out[1], ctx.size())};
  }
  return batching::sequential(in, ctx);
}

// The input unbatched: dz = the argmax scatter for all K at once (K folds into N), then the filter
// gradient with K stacked along the output channels (as Conv2DBackpropFilter's rule) and the bias
// sums per k. Otherwise one call per k.
TensorList filter_bias_with_argmax_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  if (ctx.batched(0)) return batching::sequential(in, ctx);
  const std::int64_t k = ctx.size();
  const auto fold_dense = [&](int i) {
    Shape s = ctx.shape(i);
    s[0] *= k;
    return reshape(ctx.dense(i), s);
  };
  const Shape sizes(ctx.attrs().get_ints("filter_sizes"));
  const Tensor dy =
      ctx.attrs().get_string("activation") == "relu" ? relu_grad(fold_dense(1), fold_dense(3)) : fold_dense(1);
  const Tensor dz =
      unfold(pooled_to_conv_gradient(scaled(in[0].shape(), 0, k), sizes, dy, fold_dense(2), ctx.attrs()), k);
  return {unstack_last(backprop_filter(in[0], scaled(sizes, 3, k), stack_last(dz), ctx.attrs()), k),
          reduce_sum(dz, std::vector<int>{1, 2, 3})};
}

TensorList backprop_input_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  const std::int64_t k = ctx.size();
  const Shape sizes(ctx.attrs().get_ints("input_sizes"));
  if (ctx.batched(0) && ctx.batched(1)) return batching::sequential(in, ctx);
  if (ctx.batched(1)) return {unfold(backprop_input(scaled(sizes, 0, k), in[0], fold(in[1]), ctx.attrs()), k)};
  return {unstack_last(backprop_input(scaled(sizes, 3, k), stack_third(in[0]), in[1], ctx.attrs()), k)};
}

TensorList backprop_filter_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  const std::int64_t k = ctx.size();
  const Shape sizes(ctx.attrs().get_ints("filter_sizes"));
  if (ctx.batched(0) && ctx.batched(1)) return batching::sequential(in, ctx);
  if (ctx.batched(1)) return {unstack_last(backprop_filter(in[0], scaled(sizes, 3, k), stack_last(in[1]), ctx.attrs()), k)};
  return {unstack_third(backprop_filter(stack_last(in[0]), scaled(sizes, 2, k), in[1], ctx.attrs()), k)};
}
}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& filters, Size2D strides, const Padding2D& padding, Size2D dilations) {
  return execute1(conv2d_def(), {input, filters}, ops_internal::window_attrs(strides, padding, dilations));
}

Tensor fused_conv2d(const Tensor& input, const Tensor& filters, const Tensor& bias, Size2D strides,
                    const Padding2D& padding, Size2D dilations, const std::string& activation) {
  const std::string act = activation.empty() ? "linear" : activation;
  if (act != "linear" && act != "relu")
    throw std::invalid_argument("fused_conv2d: activation must be \"linear\" (or empty) or \"relu\", got \"" +
                                activation + "\"");
  return execute1(fused_conv2d_def(), {input, filters, bias},
                  ops_internal::window_attrs(strides, padding, dilations).set("activation", act));
}

namespace {
// The attrs of FusedConv2DMaxPool (and of its filter gradient op, before filter_sizes).
Attrs conv_pool_attrs(const char* op, Size2D strides, const Padding2D& padding, Size2D dilations, Size2D ksize,
                      Size2D pool_strides, const std::string& pool_padding) {
  if (pool_padding != "VALID" && pool_padding != "SAME")
    throw std::invalid_argument(std::string(op) + ": pool_padding must be \"VALID\" or \"SAME\", got \"" +
                                pool_padding + "\"");
  return ops_internal::window_attrs(strides, padding, dilations)
      .set("ksize", std::vector<std::int64_t>{ksize[0], ksize[1]})
      .set("pool_strides", std::vector<std::int64_t>{pool_strides[0], pool_strides[1]})
      .set("pool_padding", pool_padding);
}
}  // namespace

std::pair<Tensor, Tensor> fused_conv2d_max_pool2d(const Tensor& input, const Tensor& filters, const Tensor& bias,
                                                  Size2D strides, const Padding2D& padding, Size2D dilations,
                                                  Size2D ksize, Size2D pool_strides, const std::string& pool_padding,
                                                  const std::string& activation) {
  const char* op = "fused_conv2d_max_pool2d";
  const std::string act = activation.empty() ? "linear" : activation;
  if (act != "linear" && act != "relu")
    throw std::invalid_argument(std::string(op) + ": activation must be \"linear\" (or empty) or \"relu\", got \"" +
                                activation + "\"");
  const TensorList out =
      execute(fused_conv2d_max_pool_def(), TensorList{input, filters, bias},
              conv_pool_attrs(op, strides, padding, dilations, ksize, pool_strides, pool_padding).set("activation", act));
  return {out[0], out[1]};
}

std::pair<Tensor, Tensor> fused_conv2d_max_pool2d_backprop_filter(const Tensor& input, const Shape& filter_sizes,
                                                                  const Tensor& out_backprop, const Tensor& argmax,
                                                                  Size2D strides, const Padding2D& padding,
                                                                  Size2D dilations, Size2D ksize, Size2D pool_strides,
                                                                  const std::string& pool_padding,
                                                                  const Tensor& relu_output) {
  const char* op = "fused_conv2d_max_pool2d_backprop_filter";
  check_rank4(op, "filter_sizes", filter_sizes);
  TensorList in{input, out_backprop, argmax};
  if (relu_output.defined()) in.push_back(relu_output);
  const TensorList out = execute(filter_bias_with_argmax_def(), in,
                                 conv_pool_attrs(op, strides, padding, dilations, ksize, pool_strides, pool_padding)
                                     .set("filter_sizes", filter_sizes.to_vector())
                                     .set("activation", relu_output.defined() ? "relu" : "linear"));
  return {out[0], out[1]};
}

Tensor conv2d_backprop_input(const Shape& input_sizes, const Tensor& filters, const Tensor& out_backprop,
                             Size2D strides, const Padding2D& padding, Size2D dilations) {
  check_rank4("conv2d_backprop_input", "input_sizes", input_sizes);
  return backprop_input(input_sizes, filters, out_backprop, ops_internal::window_attrs(strides, padding, dilations));
}

Tensor conv2d_backprop_filter(const Tensor& input, const Shape& filter_sizes, const Tensor& out_backprop,
                              Size2D strides, const Padding2D& padding, Size2D dilations) {
  check_rank4("conv2d_backprop_filter", "filter_sizes", filter_sizes);
  return backprop_filter(input, filter_sizes, out_backprop, ops_internal::window_attrs(strides, padding, dilations));
}

Tensor conv2d_transpose(const Tensor& input, const Tensor& filters, const Shape& output_shape, Size2D strides,
                        const Padding2D& padding, Size2D dilations) {
  const char* op = "conv2d_transpose";
  // Per-example shapes, so that the checks mean the same inside a vectorized pass (batching.h).
  const Shape xs = logical_shape(input), fs = logical_shape(filters);
  check_rank4(op, "output_shape", output_shape);
  check_rank4(op, "input", xs);
  check_rank4(op, "filters", fs);
  if (fs[3] != xs[3])
    throw std::invalid_argument(std::string(op) + ": input channels " + std::to_string(xs[3]) +
                                " differ from filters' last dim (filters [kh, kw, out, in] " + fs.to_string() +
                                ", input " + xs.to_string() + ")");
  if (fs[2] != output_shape[3] || output_shape[0] != xs[0])
    throw std::invalid_argument(std::string(op) + ": output_shape " + output_shape.to_string() +
                                " must be [N, H, W, filters[2]] for input " + xs.to_string() + " and filters " +
                                fs.to_string());
  return conv2d_backprop_input(output_shape, filters, input, strides, padding, dilations);
}

void register_conv_ops(OpRegistry& r) {
  r.add({.name = "Conv2D", .forward = conv2d_forward, .gradient = conv2d_gradient, .saves = kSaveInputs,
         .batch = conv2d_batch, .check_attrs = ops_internal::check_window_attrs_of("Conv2D", false)});
  r.add({.name = "FusedConv2D", .forward = fused_conv2d_forward, .gradient = fused_conv2d_gradient, .saves = kSaveAll,
         .batch = fused_conv2d_batch, .check_attrs = [](const Attrs& a) {
           ops_internal::check_window_attrs_of("FusedConv2D", false)(a);
           check_string_attr("FusedConv2D", a, "activation", {"linear", "relu"});
         }});
  r.add({.name = "FusedConv2DMaxPool", .forward = fused_conv2d_max_pool_forward,
         .gradient = fused_conv2d_max_pool_gradient, .saves = kSaveAll, .batch = fused_conv2d_max_pool_batch,
         .check_attrs = [](const Attrs& a) {
           const char* op = "FusedConv2DMaxPool";
           ops_internal::check_window_attrs_of(op, false)(a);
           check_string_attr(op, a, "activation", {"linear", "relu"});
           constexpr std::int64_t kMax = (std::int64_t{1} << 31) - 1;
           check_ints_attr(op, a, "ksize", 2, 2, 1, kMax);
           check_ints_attr(op, a, "pool_strides", 2, 2, 1, kMax);
           check_string_attr(op, a, "pool_padding", {"VALID", "SAME"});
         }});
  r.add({.name = "FusedConv2DMaxPoolBackpropFilter", .forward = filter_bias_with_argmax_forward,
         .gradient = filter_bias_with_argmax_gradient, .saves = kSaveInputs, .batch = filter_bias_with_argmax_batch,
         .check_attrs = [](const Attrs& a) {
           const char* op = "FusedConv2DMaxPoolBackpropFilter";
           ops_internal::check_window_attrs_of(op, false, "filter_sizes")(a);
           check_string_attr(op, a, "activation", {"linear", "relu"});
           constexpr std::int64_t kMax = (std::int64_t{1} << 31) - 1;
           check_ints_attr(op, a, "ksize", 2, 2, 1, kMax);
           check_ints_attr(op, a, "pool_strides", 2, 2, 1, kMax);
           check_string_attr(op, a, "pool_padding", {"VALID", "SAME"});
         }});
  r.add({.name = "Conv2DBackpropInput", .forward = backprop_input_forward, .gradient = backprop_input_gradient,
         .saves = kSaveInputs, .batch = backprop_input_batch,
         .check_attrs = ops_internal::check_window_attrs_of("Conv2DBackpropInput", false, "input_sizes")});
  r.add({.name = "Conv2DBackpropFilter", .forward = backprop_filter_forward, .gradient = backprop_filter_gradient,
         .saves = kSaveInputs, .batch = backprop_filter_batch,
         .check_attrs = ops_internal::check_window_attrs_of("Conv2DBackpropFilter", false, "filter_sizes")});
}

}  // namespace tapeflow
