// Transformer ops: fused kernels (tape/kernels/nn.h) and gradients written with ops.
#include "tape/ops/normalization_ops.h"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include "tape/kernels/nn.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

using ops_internal::check_arity;
using ops_internal::check_same_dtype;
using ops_internal::describe;

namespace {

double epsilon_attr(const char* op, const Attrs& at) {
  const double eps = at.get_float("epsilon");
  if (!(eps >= 0) || !std::isfinite(eps))
    throw std::invalid_argument(std::string(op) + ": epsilon must be finite and >= 0, got " + std::to_string(eps));
  return eps;
}

void check_epsilon_attr(const char* op, const Attrs& at) {
  check_attr_type<double>(op, at, "epsilon");
  epsilon_attr(op, at);
}

void check_rank1(const char* op, const Tensor& x) {
  if (x.rank() < 1) throw std::invalid_argument(std::string(op) + ": x must have rank >= 1, got []");
}

void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  check_same_dtype(op, a, b);
  if (a.shape() != b.shape())
    throw std::invalid_argument(std::string(op) + ": inputs must have the same shape, got " + describe(a) + " and " +
                                describe(b));
}

TensorList layer_norm_forward(std::span<const Tensor> in, const Attrs& at) {
  check_arity("layer_norm", in, 1);
  const Tensor& x = in[0];
  check_rank1("layer_norm", x);
  const double eps = epsilon_attr("layer_norm", at);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const std::int64_t cols = x.shape().dim(-1), rows = cols ? x.num_elements() / cols : 0;
  dispatch_floating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    kernels::layer_norm(x.data<T>(), rows, cols, eps, y.mutable_data<T>());
  });
  return {y};
}

// dx = layer_norm_grad(x, g).
TensorList layer_norm_gradient(const GradContext& c, std::span<const Tensor> g) {
  return {layer_norm_grad(c.input(0), g[0], c.attrs().get_float("epsilon"))};
}

TensorList layer_norm_grad_forward(std::span<const Tensor> in, const Attrs& at) {
  check_arity("layer_norm_grad", in, 2);
  const Tensor &x = in[0], &dy = in[1];
  check_rank1("layer_norm_grad", x);
  check_same_shape("layer_norm_grad", x, dy);
  const double eps = epsilon_attr("layer_norm_grad", at);
  Tensor dx = Tensor::empty(x.shape(), x.dtype());
  const std::int64_t cols = x.shape().dim(-1), rows = cols ? x.num_elements() / cols : 0;
  dispatch_floating(x.dtype(), "layer_norm_grad", [&](auto tag) {
    using T = decltype(tag);
    kernels::layer_norm_grad(x.data<T>(), dy.data<T>(), rows, cols, eps, dx.mutable_data<T>());
  });
  return {dx};
}

// f = r a - r s y with a = dy - mean(dy), s = mean(dy y), y = (x - mean) r. The Jacobian J of
// layer_norm is symmetric, so d dy = J h = layer_norm_grad(x, h). For x: dr = -(r²/n)(y·dx),
// ds = (a·dy_)/n with dy_ = J dx, hence dx = -(r/n)(h·f) y - J (r((h·y)/n a + s h)) (row sums ·).
TensorList layer_norm_grad_gradient(const GradContext& c, std::span<const Tensor> g) {
  const double eps = c.attrs().get_float("epsilon");
  const Tensor &x = c.input(0), &dy = c.input(1), &h = g[0];
  Tensor ddy = c.needs_gradient(1) ? layer_norm_grad(x, h, eps) : Tensor();
  Tensor dx;
  if (c.needs_gradient(0)) {
    const Tensor& f = c.output(0);
    const double n = static_cast<double>(c.input_shape(0).dim(-1));
    Tensor xc = x - reduce_mean(x, -1, true);
    Tensor r = rsqrt(reduce_mean(square(xc), -1, true) + eps);
    Tensor y = xc * r;
    Tensor a = dy - reduce_mean(dy, -1, true);
    Tensor s = reduce_mean(dy * y, -1, true);
    Tensor hy = reduce_sum(h * y, -1, true);
    Tensor hf = reduce_sum(h * f, -1, true);
    Tensor v = r * (hy * (1.0 / n) * a + s * h);
    dx = negative(r * hf * (1.0 / n) * y) - layer_norm_grad(x, v, eps);
  }
  return {dx, ddy};
}

TensorList gelu_forward(std::span<const Tensor> in, const Attrs&) {
  check_arity("gelu", in, 1);
  const Tensor& x = in[0];
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), "gelu", [&](auto tag) {
    using T = decltype(tag);
    kernels::gelu(x.data<T>(), y.mutable_data<T>(), x.num_elements());
  });
  return {y};
}

// gelu' = Φ(x) + x φ(x).
TensorList gelu_gradient(const GradContext& c, std::span<const Tensor> g) { return {gelu_grad(g[0], c.input(0))}; }

TensorList gelu_grad_forward(std::span<const Tensor> in, const Attrs&) {
  check_arity("gelu_grad", in, 2);
  const Tensor &dy = in[0], &x = in[1];
  check_same_shape("gelu_grad", dy, x);
  Tensor dx = Tensor::empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), "gelu_grad", [&](auto tag) {
    using T = decltype(tag);
    kernels::gelu_grad(dy.data<T>(), x.data<T>(), dx.mutable_data<T>(), x.num_elements());
  });
  return {dx};
}

// Inputs {dy, x}: d/ddy = gelu_grad(h, x); d/dx = h dy gelu''(x), gelu'' = φ(x) (2 - x²).
TensorList gelu_grad_gradient(const GradContext& c, std::span<const Tensor> g) {
  const Tensor &dy = c.input(0), &x = c.input(1), &h = g[0];
  Tensor ddy = c.needs_gradient(0) ? gelu_grad(h, x) : Tensor();
  Tensor dx;
  if (c.needs_gradient(1)) {
    const double inv_sqrt_2pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;
    Tensor x2 = square(x);
    Tensor pdf = exp(x2 * -0.5) * inv_sqrt_2pi;
    dx = h * dy * pdf * (2.0 - x2);
  }
  return {ddy, dx};
}

}  // namespace

Tensor layer_norm(const Tensor& x, double epsilon) {
  static const OpDef& op = op_def("LayerNorm");
  return execute1(op, {x}, Attrs().set("epsilon", epsilon));
}

Tensor layer_norm_grad(const Tensor& x, const Tensor& dy, double epsilon) {
  static const OpDef& op = op_def("LayerNormGrad");
  return execute1(op, {x, dy}, Attrs().set("epsilon", epsilon));
}

Tensor gelu(const Tensor& x, bool approximate) {
  if (!approximate) {
    static const OpDef& op = op_def("Gelu");
    return execute1(op, {x});
  }
  if (!is_floating(x.dtype())) throw std::invalid_argument("gelu: expected float32 or float64, got " + describe(x));
  // Keras 3 / JAX: 0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³))).
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return x * 0.5 * (1.0 + tanh((x + x * square(x) * 0.044715) * k));
}

Tensor gelu_grad(const Tensor& dy, const Tensor& x) {
  static const OpDef& op = op_def("GeluGrad");
  return execute1(op, {dy, x});
}

void register_normalization_ops(OpRegistry& r) {
  r.add({"LayerNorm", layer_norm_forward, layer_norm_gradient, kSaveInputs, batching::unary(), false,
         [](const Attrs& a) { check_epsilon_attr("LayerNorm", a); }});
  r.add({"LayerNormGrad", layer_norm_grad_forward, layer_norm_grad_gradient, kSaveAll, batching::same_shape(), false,
         [](const Attrs& a) { check_epsilon_attr("LayerNormGrad", a); }});
  r.add({"Gelu", gelu_forward, gelu_gradient, kSaveInputs, batching::unary()});
  r.add({"GeluGrad", gelu_grad_forward, gelu_grad_gradient, kSaveInputs, batching::same_shape(0)});
}

}  // namespace tapeflow
