// Transformer ops: fused kernels (tape/kernels/nn.h) and gradients written with ops.
#include "tape/ops/normalization_ops.h"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "tape/kernels/nn.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/ops/array_ops.h"
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
Tensor layer_norm_grad_x_gradient(const Tensor& x, const Tensor& dy, const Tensor& f, const Tensor& h, double eps,
                                  double n) {
  Tensor xc = x - reduce_mean(x, -1, true);
  Tensor r = rsqrt(reduce_mean(square(xc), -1, true) + eps);
  Tensor y = xc * r;
  Tensor a = dy - reduce_mean(dy, -1, true);
  Tensor s = reduce_mean(dy * y, -1, true);
  Tensor hy = reduce_sum(h * y, -1, true);
  Tensor hf = reduce_sum(h * f, -1, true);
  Tensor v = r * (hy * (1.0 / n) * a + s * h);
  return negative(r * hf * (1.0 / n) * y) - layer_norm_grad(x, v, eps);
}

TensorList layer_norm_grad_gradient(const GradContext& c, std::span<const Tensor> g) {
  const double eps = c.attrs().get_float("epsilon");
  const Tensor &x = c.input(0), &dy = c.input(1), &h = g[0];
  Tensor ddy = c.needs_gradient(1) ? layer_norm_grad(x, h, eps) : Tensor();
  Tensor dx;
  if (c.needs_gradient(0))
    dx = layer_norm_grad_x_gradient(x, dy, c.output(0), h, eps, static_cast<double>(c.input_shape(0).dim(-1)));
  return {dx, ddy};
}

// gamma and beta (or dy's gamma) must be [n] with n = x's last dim, of x's dtype.
void check_param(const char* op, const char* name, const Tensor& x, const Tensor& p) {
  check_same_dtype(op, x, p);
  if (p.rank() != 1 || p.shape().dim(0) != x.shape().dim(-1))
    throw std::invalid_argument(std::string(op) + ": " + name + " must have shape [" +
                                std::to_string(x.shape().dim(-1)) + "] (x's last dim), got " + describe(p) +
                                " for x " + describe(x));
}

TensorList layer_norm_affine_forward(std::span<const Tensor> in, const Attrs& at) {
  check_arity("layer_norm_affine", in, 3);
  const Tensor &x = in[0], &gamma = in[1], &beta = in[2];
  check_rank1("layer_norm_affine", x);
  check_param("layer_norm_affine", "gamma", x, gamma);
  check_param("layer_norm_affine", "beta", x, beta);
  const double eps = epsilon_attr("layer_norm_affine", at);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const std::int64_t cols = x.shape().dim(-1), rows = cols ? x.num_elements() / cols : 0;
  dispatch_floating(x.dtype(), "layer_norm_affine", [&](auto tag) {
    using T = decltype(tag);
    kernels::layer_norm_affine(x.data<T>(), gamma.data<T>(), beta.data<T>(), rows, cols, eps, y.mutable_data<T>());
  });
  return {y};
}

TensorList layer_norm_affine_gradient(const GradContext& c, std::span<const Tensor> g) {
  LayerNormAffineGrads d = layer_norm_affine_grad(c.input(0), c.input(1), g[0], c.attrs().get_float("epsilon"));
  return {d.dx, d.dgamma, d.dbeta};
}

// Only x batched: the op on [K, ..., n] as is (gamma and beta apply to every row). gamma or beta
// batched: composed, layer_norm(x) gamma + beta with gamma, beta padded to [K, 1, ..., n].
TensorList layer_norm_affine_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  if (!ctx.batched(1) && !ctx.batched(2)) return batching::run(ctx, in, ctx.attrs());
  const int rank = ctx.shape(0).rank();
  return {layer_norm(in[0], ctx.attrs().get_float("epsilon")) * batching::at_rank(in, ctx, 1, rank) +
          batching::at_rank(in, ctx, 2, rank)};
}

TensorList layer_norm_affine_grad_forward(std::span<const Tensor> in, const Attrs& at) {
  check_arity("layer_norm_affine_grad", in, 3);
  const Tensor &x = in[0], &gamma = in[1], &dy = in[2];
  check_rank1("layer_norm_affine_grad", x);
  check_param("layer_norm_affine_grad", "gamma", x, gamma);
  check_same_shape("layer_norm_affine_grad", x, dy);
  const double eps = epsilon_attr("layer_norm_affine_grad", at);
  Tensor dx = Tensor::empty(x.shape(), x.dtype());
  Tensor dgamma = Tensor::empty(gamma.shape(), x.dtype()), dbeta = Tensor::empty(gamma.shape(), x.dtype());
  const std::int64_t cols = x.shape().dim(-1), rows = cols ? x.num_elements() / cols : 0;
  dispatch_floating(x.dtype(), "layer_norm_affine_grad", [&](auto tag) {
    using T = decltype(tag);
    kernels::layer_norm_affine_grad(x.data<T>(), gamma.data<T>(), dy.data<T>(), rows, cols, eps,
                                    dx.mutable_data<T>(), dgamma.mutable_data<T>(), dbeta.mutable_data<T>());
  });
  return {dx, dgamma, dbeta};
}

// Outputs f = J (gamma dy), Σ dy y, Σ dy (J = layer_norm_grad(x, ·), symmetric; y = layer_norm(x)).
// Upstream hx, hg, hb: d dy = gamma J hx + hg y + hb, d gamma = Σ dy J hx, and for x the
// LayerNormGrad x-gradient at (x, gamma dy, hx) plus J (dy hg) from <hg, Σ dy y>.
TensorList layer_norm_affine_grad_gradient(const GradContext& c, std::span<const Tensor> g) {
  const double eps = c.attrs().get_float("epsilon");
  const Tensor &x = c.input(0), &gamma = c.input(1), &dy = c.input(2);
  const Tensor &hx = g[0], &hg = g[1], &hb = g[2];
  const Tensor jh = layer_norm_grad(x, hx, eps);
  Tensor dx, dgamma, ddy;
  if (c.needs_gradient(0))
    dx = layer_norm_grad_x_gradient(x, dy * gamma, c.output(0), hx, eps,
                                    static_cast<double>(c.input_shape(0).dim(-1))) +
         layer_norm_grad(x, dy * hg, eps);
  if (c.needs_gradient(1)) dgamma = sum_to_shape(dy * jh, c.input_shape(1));
  if (c.needs_gradient(2)) ddy = gamma * jh + hg * layer_norm(x, eps) + hb;
  return {dx, dgamma, ddy};
}

// Composed on the dense [K, ..., n] x and dy (dgamma and dbeta are sums over rows, which must stay
// apart per k): dx = layer_norm_grad(x, dy gamma), dgamma = Σ dy y, dbeta = Σ dy over axes 1..rank-1.
TensorList layer_norm_affine_grad_batch(std::span<const Tensor> in, const BatchContext& ctx) {
  const double eps = ctx.attrs().get_float("epsilon");
  const int rank = ctx.shape(0).rank();
  const Tensor x = ctx.dense(0), dy = ctx.dense(2);
  const Tensor gamma = batching::at_rank(in, ctx, 1, rank);
  std::vector<int> rows;
  for (int a = 1; a < rank; ++a) rows.push_back(a);
  const auto sum_rows = [&](const Tensor& t) { return rows.empty() ? t : reduce_sum(t, rows); };
  return {layer_norm_grad(x, dy * gamma, eps), sum_rows(dy * layer_norm(x, eps)), sum_rows(dy)};
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

Tensor layer_norm_affine(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon) {
  static const OpDef& op = op_def("LayerNormAffine");
  return execute1(op, {x, gamma, beta}, Attrs().set("epsilon", epsilon));
}

LayerNormAffineGrads layer_norm_affine_grad(const Tensor& x, const Tensor& gamma, const Tensor& dy, double epsilon) {
  static const OpDef& op = op_def("LayerNormAffineGrad");
  const Tensor in[] = {x, gamma, dy};
  TensorList out = execute(op, in, Attrs().set("epsilon", epsilon));
  return {out[0], out[1], out[2]};
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
  r.add({"LayerNormAffine", layer_norm_affine_forward, layer_norm_affine_gradient, kSaveInputs,
         layer_norm_affine_batch, false, [](const Attrs& a) { check_epsilon_attr("LayerNormAffine", a); }});
  r.add({"LayerNormAffineGrad", layer_norm_affine_grad_forward, layer_norm_affine_grad_gradient, kSaveAll,
         layer_norm_affine_grad_batch, false, [](const Attrs& a) { check_epsilon_attr("LayerNormAffineGrad", a); }});
  r.add({"Gelu", gelu_forward, gelu_gradient, kSaveInputs, batching::unary()});
  r.add({"GeluGrad", gelu_grad_forward, gelu_grad_gradient, kSaveInputs, batching::same_shape(0)});
}

}  // namespace tapeflow
