// Neural-network ops: fused forward kernels (tape/kernels/nn.h) and gradients written with ops.
#include "tape/ops/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tape/kernels/elementwise.h"
#include "tape/kernels/nn.h"
#include "tape/kernels/reduce.h"
#include "tape/kernels/transform.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/runtime/batching.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

using ops_internal::check_arity;
using ops_internal::describe;

namespace {

// Runs a last-axis row kernel (softmax / log_softmax) along `axis`: directly for the last axis,
// otherwise between two transposes that move `axis` to the end and back.
template <class T, class Kernel>
void along_axis(const Tensor& x, int axis, Tensor& y, Kernel kernel) {
  const int rank = x.rank();
  const std::int64_t cols = x.shape()[axis];
  const std::int64_t rows = cols == 0 ? 0 : x.num_elements() / cols;
  if (axis == rank - 1) {
    kernel(x.data<T>(), rows, cols, y.mutable_data<T>());
    return;
  }
  std::vector<int> perm, inverse(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  Shape moved;
  for (int i = 0; i < rank; ++i) {
    moved.push_back(x.shape()[perm[static_cast<std::size_t>(i)]]);
    inverse[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])] = i;
  }
  std::vector<T> a(static_cast<std::size_t>(x.num_elements())), b(a.size());
  kernels::transpose(x.data<T>(), x.shape(), perm.data(), a.data());
  kernel(a.data(), rows, cols, b.data());
  kernels::transpose(b.data(), moved, inverse.data(), y.mutable_data<T>());
}

template <bool kLog>
TensorList softmax_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* name = kLog ? "log_softmax" : "softmax";
  check_arity(name, in, 1);
  const Tensor& x = in[0];
  if (x.rank() < 1) throw std::invalid_argument(std::string(name) + ": logits must have rank >= 1, got []");
  const int axis = normalize_axis(ops_internal::axis_attr(name, at), x.rank(), name);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    along_axis<T>(x, axis, y, [](const T* px, std::int64_t r, std::int64_t c, T* py) {
      if constexpr (kLog)
        kernels::log_softmax(px, r, c, py);
      else
        kernels::softmax(px, r, c, py);
    });
  });
  return {y};
}

Tensor softmax_op(const OpDef& op, const Tensor& logits, int axis) {
  return execute1(op, {logits}, Attrs().set("axis", std::int64_t{axis}));
}

// softmax: dx = y (g - Σ g y); log_softmax: dx = g - exp(y) Σ g (sums along the op's axis). The
// last axis (every attention and classifier softmax) takes the one-pass SoftmaxGrad op.
TensorList softmax_gradient(const GradContext& c, std::span<const Tensor> g) {
  const int axis = static_cast<int>(c.attrs().get_int("axis"));
  const Tensor& y = c.output(0);
  if (y.rank() >= 1 && normalize_axis(axis, y.rank(), "softmax") == y.rank() - 1) return {softmax_grad(y, g[0], axis)};
  return {y * (g[0] - reduce_sum(g[0] * y, axis, true))};
}

// Inputs {y, g}, output y (g - Σ g y) along the last axis.
TensorList softmax_grad_forward(std::span<const Tensor> in, const Attrs& at) {
  const char* name = "softmax_grad";
  check_arity(name, in, 2);
  const Tensor &y = in[0], &g = in[1];
  if (y.shape() != g.shape() || y.dtype() != g.dtype())
    throw std::invalid_argument(std::string(name) + ": y and g must have the same shape and dtype, got y " +
                                describe(y) + " and g " + describe(g));
  if (y.rank() < 1) throw std::invalid_argument(std::string(name) + ": y must have rank >= 1, got []");
  const int axis = normalize_axis(ops_internal::axis_attr(name, at), y.rank(), name);
  if (axis != y.rank() - 1)
    throw std::invalid_argument(std::string(name) + ": only the last axis is supported, got axis " +
                                std::to_string(axis) + " of " + y.shape().to_string());
  Tensor dx = Tensor::empty(y.shape(), y.dtype());
  dispatch_floating(y.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t cols = y.shape()[axis];
    const std::int64_t rows = cols == 0 ? 0 : y.num_elements() / cols;
    kernels::softmax_grad(y.data<T>(), g.data<T>(), rows, cols, dx.mutable_data<T>());
  });
  return {dx};
}

// dx = y (g - s), s = Σ g y: d/dg = softmax_grad(y, u); d/dy = u (g - s) - g Σ u y.
TensorList softmax_grad_gradient(const GradContext& c, std::span<const Tensor> u) {
  const int axis = static_cast<int>(c.attrs().get_int("axis"));
  const Tensor &y = c.input(0), &g = c.input(1);
  Tensor dy, dg;
  if (c.needs_gradient(0))
    dy = u[0] * (g - reduce_sum(g * y, axis, true)) - g * reduce_sum(u[0] * y, axis, true);
  if (c.needs_gradient(1)) dg = softmax_grad(y, u[0], axis);
  return {dy, dg};
}
TensorList log_softmax_gradient(const GradContext& c, std::span<const Tensor> g) {
  const int axis = static_cast<int>(c.attrs().get_int("axis"));
  return {g[0] - exp(c.output(0)) * reduce_sum(g[0], axis, true)};
}

void check_xent_shapes(const Tensor& logits, const Tensor& labels) {
  const char* name = "sparse_softmax_cross_entropy_with_logits";
  if (!is_integer(labels.dtype()))
    throw std::invalid_argument(std::string(name) + ": labels must be int32 or int64, got " + describe(labels));
  bool ok = logits.rank() >= 1 && labels.rank() == logits.rank() - 1;
  for (int i = 0; ok && i < labels.rank(); ++i) ok = labels.shape()[i] == logits.shape()[i];
  if (!ok)
    throw std::invalid_argument(std::string(name) +
                                ": labels shape must equal logits shape without the last dim: labels " +
                                labels.shape().to_string() + ", logits " + logits.shape().to_string());
}

// Inputs {logits, labels} (TF's SparseSoftmaxCrossEntropyWithLogits order); output the loss.
TensorList xent_forward(std::span<const Tensor> in, const Attrs&) {
  check_arity("sparse_softmax_cross_entropy_with_logits", in, 2);
  const Tensor &logits = in[0], &labels = in[1];
  check_xent_shapes(logits, labels);
  const std::int64_t rows = labels.num_elements(), cols = logits.shape().dim(-1);
  Tensor loss = Tensor::empty(labels.shape(), logits.dtype());
  dispatch_floating(logits.dtype(), "sparse_softmax_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](const auto* pl) {
      kernels::sparse_softmax_xent(logits.data<T>(), pl, rows, cols, loss.mutable_data<T>(), static_cast<T*>(nullptr));
    };
    if (labels.dtype() == DType::kInt32)
      run(labels.data<std::int32_t>());
    else
      run(labels.data<std::int64_t>());
  });
  return {loss};
}

// The one-hot matrix of the labels in the logits' dtype (a constant: labels have no gradient).
Tensor one_hot_like(const Tensor& labels, const Tensor& logits) {
  const std::int64_t n = labels.num_elements(), depth = logits.shape().dim(-1);
  Tensor y = Tensor::empty(logits.shape(), logits.dtype());
  dispatch_floating(logits.dtype(), "sparse_softmax_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    if (labels.dtype() == DType::kInt32)
      kernels::one_hot(labels.data<std::int32_t>(), n, depth, T(1), T(0), y.mutable_data<T>());
    else
      kernels::one_hot(labels.data<std::int64_t>(), n, depth, T(1), T(0), y.mutable_data<T>());
  });
  return y;
}

// dlogits = (softmax(logits) - onehot) * g[..., None]; softmax recomputed with the op, so the
// outer tapes see a differentiable expression of logits (second order works).
TensorList xent_gradient(const GradContext& c, std::span<const Tensor> g) {
  const Tensor &logits = c.input(0), &labels = c.input(1);
  Shape keep = labels.shape();
  keep.push_back(1);
  Tensor d = (softmax(logits, -1) - one_hot_like(labels, logits)) * reshape(g[0], keep);
  return {d, Tensor()};
}

// Batched logits [K, B..., C]: the labels (integers, never batched) are broadcast to [K, B...].
TensorList xent_batch(std::span<const Tensor> in, const BatchContext& c) {
  if (c.batched(1)) return batching::sequential(in, c);
  Shape labels_shape{c.size()};
  for (std::int64_t d : in[1].shape()) labels_shape.push_back(d);
  const Tensor args[2] = {in[0], broadcast_to(in[1], labels_shape)};
  return batching::run(c, args, c.attrs());
}

Attrs norm_attrs(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  std::vector<std::int64_t> norm_axes;
  const Shape xs = logical_shape(x);
  if (axes.empty())
    for (int i = 0; i < xs.rank(); ++i) norm_axes.push_back(i);
  for (int a : axes) {
    const std::int64_t n = normalize_axis(a, xs.rank(), "norm");
    if (std::find(norm_axes.begin(), norm_axes.end(), n) != norm_axes.end())
      throw std::invalid_argument("norm: axis " + std::to_string(a) + " repeated for shape " + xs.to_string());
    norm_axes.push_back(n);
  }
  std::sort(norm_axes.begin(), norm_axes.end());
  return Attrs().set("axes", norm_axes).set("keepdims", keepdims);
}

// x's shape with the reduced axes set to 1 (or removed).
Shape reduced(const Shape& s, const std::vector<std::int64_t>& axes, bool keepdims) {
  Shape out;
  for (int i = 0; i < s.rank(); ++i) {
    const bool r = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!r)
      out.push_back(s[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

TensorList norm_forward(std::span<const Tensor> in, const Attrs& at) {
  check_arity("norm", in, 1);
  const Tensor& x = in[0];
  const auto& axes = at.get_ints("axes");
  const std::uint32_t mask = ops_internal::axes_mask("norm", axes, x.shape());
  Tensor y = Tensor::empty(reduced(x.shape(), axes, at.get_bool("keepdims")), x.dtype());
  dispatch_floating(x.dtype(), "norm", [&](auto tag) {
    using T = decltype(tag);
    // Scratch from the tensor allocator: no zero-fill, and no fresh pages for big inputs.
    const Tensor sq = Tensor::empty(x.shape(), x.dtype());
    kernels::map(x.data<T>(), sq.mutable_data<T>(), x.num_elements(), [](T v) { return v * v; });
    T* py = y.mutable_data<T>();
    kernels::reduce_sum(sq.data<T>(), x.shape(), mask, py);
    kernels::map(py, py, y.num_elements(), [](T v) { return std::sqrt(v); });
  });
  return {y};
}

// dx = x · (g / n) where n > 0, else 0 (the subgradient at the origin). The factor g / n (or 0) is
// formed on the reduced shape, so the full-size work is one broadcast product (and its gradient
// one more); where n = 0 every x is 0 too (a NaN in x gives NaN there).
TensorList norm_gradient(const GradContext& c, std::span<const Tensor> g) {
  const Tensor &x = c.input(0), &n = c.output(0);
  const Shape keep = reduced(c.input_shape(0), c.attrs().get_ints("axes"), true);
  Tensor nk = reshape(n, keep), gk = reshape(g[0], keep);
  Tensor zero = zeros_like(nk);
  Tensor positive = greater(nk, zero);
  Tensor safe = where(positive, nk, ones_like(nk));
  return {x * where(positive, gk / safe, zero)};
}

// Inputs {x, keep_bits}; attrs scale and, from the batching rule, elements (the per-example
// element count n; default x.num_elements()): x holds x.num_elements() / n blocks of n elements,
// each under the same mask.
TensorList dropout_mask_forward(std::span<const Tensor> in, const Attrs& at) {
  check_arity("apply_dropout_mask", in, 2);
  const Tensor &x = in[0], &bits = in[1];
  const std::int64_t n = at.has("elements") ? at.get_int("elements") : x.num_elements();
  if (bits.dtype() != DType::kInt32 || bits.rank() != 1 || bits.shape()[0] != (n + 31) / 32 || n < 0 ||
      (n == 0 ? x.num_elements() != 0 : x.num_elements() % n != 0))
    throw std::invalid_argument("apply_dropout_mask: expected keep_bits int32 [" + std::to_string((n + 31) / 32) +
                                "] for " + std::to_string(n) + " elements of x " + describe(x) + ", got " +
                                describe(bits));
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), "apply_dropout_mask", [&](auto tag) {
    using T = decltype(tag);
    kernels::apply_keep_bits(x.data<T>(), reinterpret_cast<const std::uint32_t*>(bits.data<std::int32_t>()),
                             static_cast<T>(at.get_float("scale")), n, n ? x.num_elements() / n : 0,
                             y.mutable_data<T>());
  });
  return {y};
}

// Linear in x: dx = the same mask on g (no gradient for the bits).
TensorList dropout_mask_gradient(const GradContext& c, std::span<const Tensor> g) {
  static const OpDef& op = op_def("ApplyDropoutMask");
  return {execute1(op, {g[0], c.input(1)}, c.attrs()), Tensor()};
}

// x batched, the bits not: the op runs once on [K, ...] (K blocks of n elements). Batched bits
// (never made so by the library): once per k.
TensorList dropout_mask_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  if (ctx.batched(1)) return batching::sequential(in, ctx);
  Attrs at = ctx.attrs();
  if (!at.has("elements")) at.set("elements", ctx.shape(0).num_elements());
  return batching::run(ctx, in, at);
}

}  // namespace

Tensor apply_dropout_mask(const Tensor& x, const Tensor& keep_bits, double scale) {
  static const OpDef& op = op_def("ApplyDropoutMask");
  return execute1(op, {x, keep_bits}, Attrs().set("scale", scale));
}

Tensor softmax(const Tensor& logits, int axis) {
  static const OpDef& op = op_def("Softmax");
  return softmax_op(op, logits, axis);
}
Tensor softmax_grad(const Tensor& y, const Tensor& g, int axis) {
  static const OpDef& op = op_def("SoftmaxGrad");
  return execute1(op, {y, g}, Attrs().set("axis", std::int64_t{axis}));
}
Tensor log_softmax(const Tensor& logits, int axis) {
  static const OpDef& op = op_def("LogSoftmax");
  return softmax_op(op, logits, axis);
}

Tensor masked_softmax(const Tensor& logits, const Tensor& mask, int axis) {
  const Tensor keep = mask.dtype() == DType::kBool ? mask : greater(mask, scalar_like(mask, 0.5));
  bool fits = true;
  try {
    fits = broadcast_shapes(keep.shape(), logits.shape(), "masked_softmax") == logits.shape();
  } catch (const std::invalid_argument&) {
    fits = false;
  }
  if (!fits)
    throw std::invalid_argument("masked_softmax: the mask " + keep.shape().to_string() +
                                " does not broadcast to the logits " + logits.shape().to_string());
  const Tensor y = softmax(where(keep, logits, scalar_like(logits, -1e9)), axis);
  return where(keep, y, scalar_like(y, 0.0));
}

Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  static const OpDef& op = op_def("SparseSoftmaxCrossEntropyWithLogits");
  return execute1(op, {logits, labels});
}

Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  if (labels.shape() != logits.shape() || labels.dtype() != logits.dtype())
    throw std::invalid_argument(
        "sigmoid_cross_entropy_with_logits: labels and logits must have the same shape and "
        "dtype: labels " +
        describe(labels) + ", logits " + describe(logits));
  if (!is_floating(logits.dtype()))
    throw std::invalid_argument("sigmoid_cross_entropy_with_logits: expected float32 or float64, got " +
                                describe(logits));
  // TF's composition: the >= selects make the gradient at x = 0 exactly sigmoid(0) - z.
  Tensor zero = scalar_like(logits, 0.0);
  Tensor nonneg = greater_equal(logits, zero);
  Tensor relu_logits = where(nonneg, logits, zero);
  Tensor neg_abs_logits = where(nonneg, negative(logits), logits);
  return relu_logits - logits * labels + softplus(neg_abs_logits);
}

Tensor norm(const Tensor& x) { return norm(x, {}, false); }
Tensor norm(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  static const OpDef& op = op_def("EuclideanNorm");
  return execute1(op, {x}, norm_attrs(x, axes, keepdims));
}

Tensor clip_by_norm(const Tensor& t, double clip_norm) { return clip_by_norm(t, clip_norm, {}); }
Tensor clip_by_norm(const Tensor& t, double clip_norm, const std::vector<int>& axes) {
  if (!(clip_norm > 0))
    throw std::invalid_argument("clip_by_norm: clip_norm must be > 0, got " + std::to_string(clip_norm));
  if (!is_floating(t.dtype()))
    throw std::invalid_argument("clip_by_norm: expected float32 or float64, got " + describe(t));
  std::vector<int> all;
  const int rank = logical_rank(t);
  for (int a : axes) all.push_back(normalize_axis(a, rank, "clip_by_norm"));
  if (all.empty())
    for (int i = 0; i < rank; ++i) all.push_back(i);
  // TF: l2norm = sqrt(l2sum) with a safe sqrt at 0, then t * clip / max(l2norm, clip).
  Tensor l2sum = reduce_sum(t * t, all, true);
  Tensor pred = greater(l2sum, scalar_like(l2sum, 0.0));
  Tensor l2sum_safe = where(pred, l2sum, scalar_like(l2sum, 1.0));
  Tensor l2norm = where(pred, sqrt(l2sum_safe), l2sum);
  Tensor clip = scalar_like(t, clip_norm);
  return t * clip / maximum(l2norm, clip);
}

void register_nn_ops(OpRegistry& r) {
  r.add({"Softmax", softmax_forward<false>, softmax_gradient, kSaveOutputs, batching::axis_attr("axis"), false,
         ops_internal::check_axis_attr_of("Softmax")});
  r.add({"SoftmaxGrad", softmax_grad_forward, softmax_grad_gradient, kSaveInputs, batching::axis_attr("axis"), false,
         ops_internal::check_axis_attr_of("SoftmaxGrad")});
  r.add({"LogSoftmax", softmax_forward<true>, log_softmax_gradient, kSaveOutputs, batching::axis_attr("axis"), false,
         ops_internal::check_axis_attr_of("LogSoftmax")});
  r.add({"SparseSoftmaxCrossEntropyWithLogits", xent_forward, xent_gradient, kSaveInputs, xent_batch});
  r.add({"ApplyDropoutMask", dropout_mask_forward, dropout_mask_gradient, kSaveInputs, dropout_mask_batch});
  r.add({"EuclideanNorm", norm_forward, norm_gradient, kSaveAll, batching::reduction(), false,
         ops_internal::check_axes_attrs_of("EuclideanNorm")});
}

}  // namespace tapeflow
