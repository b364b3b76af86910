// Element-wise math ops: forward kernels and gradients (written with ops, so they are recorded too).
#include "tape/ops/math_ops.h"

#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tape/kernels/nn.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

using ops_internal::binary_forward;
using ops_internal::Kinds;
using ops_internal::unary_forward;

namespace {

// g summed back to `shape` (the gradient of a broadcast); shapes are per example (batching.h).
Tensor unbroadcast(const Tensor& g, const Shape& shape) { return logical_shape(g) == shape ? g : sum_to_shape(g, shape); }

template <typename T>
T round_half_even(T v) {
  return std::nearbyint(v);  // default rounding mode is to-nearest-even
}

// Python's a // b: integers round toward -inf; floats floor(a / b) (TF's FloorDiv).
template <typename T>
T floor_div(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (b == -1) return static_cast<T>(U(0) - static_cast<U>(a));  // -a, wrapping: INT_MIN / -1 would trap
    const T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  } else {
    return std::floor(a / b);
  }
}

// Integer division by zero would trap: reject it with TF's message.
void check_no_integer_zero(const char* op, std::span<const Tensor> in) {
  if (in.size() != 2 || !is_integer(in[1].dtype()) || in[1].dtype() != in[0].dtype()) return;
  bool zero = false;
  dispatch_dtype(in[1].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* p = in[1].data<T>();
      for (std::int64_t i = 0; i < in[1].num_elements(); ++i) zero = zero || p[i] == 0;
    }
  });
  if (zero) throw std::invalid_argument(std::string(op) + ": integer division by zero");
}

template <typename T>
T int_pow(T base, T exp) {
  if (exp < 0) return base == 1 ? 1 : 0;
  T r = 1;
  while (exp) {
    if (exp & 1) r *= base;
    base *= base;
    exp >>= 1;
  }
  return r;
}

// Forward of an activation kernel y = f(x) (tape/kernels/nn.h) over float32/float64.
template <typename Kernel>
TensorList activation_forward(const char* op, std::span<const Tensor> in, Kernel kernel) {
  ops_internal::check_arity(op, in, 1);
  const Tensor& x = in[0];
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernel(x.data<T>(), y.mutable_data<T>(), x.num_elements());
  });
  return {y};
}

// Forward of an activation-gradient kernel r = f(a, b) with a and b of one shape and dtype.
template <typename Kernel>
TensorList activation_grad_forward(const char* op, std::span<const Tensor> in, Kernel kernel) {
  ops_internal::check_arity(op, in, 2);
  const Tensor &a = in[0], &b = in[1];
  ops_internal::check_same_dtype(op, a, b);
  if (a.shape() != b.shape())
    throw std::invalid_argument(std::string(op) + ": inputs must have the same shape, got " +
                                ops_internal::describe(a) + " and " + ops_internal::describe(b));
  Tensor r = Tensor::empty(a.shape(), a.dtype());
  dispatch_floating(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernel(a.data<T>(), b.data<T>(), r.mutable_data<T>(), a.num_elements());
  });
  return {r};
}

}  // namespace

// ---- public functions: one line each, through the single dispatch point (op looked up once) ----
Tensor add(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("AddV2"); return execute1(op, {a, b}); }
Tensor subtract(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("Sub"); return execute1(op, {a, b}); }
Tensor multiply(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("Mul"); return execute1(op, {a, b}); }
Tensor floordiv(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("FloorDiv"); return execute1(op, {a, b}); }
Tensor pow(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("Pow"); return execute1(op, {a, b}); }
Tensor maximum(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("Maximum"); return execute1(op, {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("Minimum"); return execute1(op, {a, b}); }
Tensor equal(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("Equal"); return execute1(op, {a, b}); }
Tensor not_equal(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("NotEqual"); return execute1(op, {a, b}); }
Tensor less(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("Less"); return execute1(op, {a, b}); }
Tensor less_equal(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("LessEqual"); return execute1(op, {a, b}); }
Tensor greater(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("Greater"); return execute1(op, {a, b}); }
Tensor greater_equal(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("GreaterEqual"); return execute1(op, {a, b}); }
Tensor logical_and(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("LogicalAnd"); return execute1(op, {a, b}); }
Tensor logical_or(const Tensor& a, const Tensor& b) { static const OpDef& op = op_def("LogicalOr"); return execute1(op, {a, b}); }

Tensor negative(const Tensor& x) { static const OpDef& op = op_def("Neg"); return execute1(op, {x}); }
Tensor square(const Tensor& x) { static const OpDef& op = op_def("Square"); return execute1(op, {x}); }
Tensor sqrt(const Tensor& x) { static const OpDef& op = op_def("Sqrt"); return execute1(op, {x}); }
Tensor rsqrt(const Tensor& x) { static const OpDef& op = op_def("Rsqrt"); return execute1(op, {x}); }
Tensor reciprocal(const Tensor& x) { static const OpDef& op = op_def("Reciprocal"); return execute1(op, {x}); }
Tensor exp(const Tensor& x) { static const OpDef& op = op_def("Exp"); return execute1(op, {x}); }
Tensor log(const Tensor& x) { static const OpDef& op = op_def("Log"); return execute1(op, {x}); }
Tensor abs(const Tensor& x) { static const OpDef& op = op_def("Abs"); return execute1(op, {x}); }
Tensor sign(const Tensor& x) { static const OpDef& op = op_def("Sign"); return execute1(op, {x}); }
Tensor sin(const Tensor& x) { static const OpDef& op = op_def("Sin"); return execute1(op, {x}); }
Tensor cos(const Tensor& x) { static const OpDef& op = op_def("Cos"); return execute1(op, {x}); }
Tensor tanh(const Tensor& x) { static const OpDef& op = op_def("Tanh"); return execute1(op, {x}); }
Tensor sigmoid(const Tensor& x) { static const OpDef& op = op_def("Sigmoid"); return execute1(op, {x}); }
Tensor relu(const Tensor& x) { static const OpDef& op = op_def("Relu"); return execute1(op, {x}); }
Tensor elu(const Tensor& x) { static const OpDef& op = op_def("Elu"); return execute1(op, {x}); }
Tensor softplus(const Tensor& x) { static const OpDef& op = op_def("Softplus"); return execute1(op, {x}); }
Tensor round(const Tensor& x) { static const OpDef& op = op_def("Round"); return execute1(op, {x}); }
Tensor identity(const Tensor& x) { static const OpDef& op = op_def("Identity"); return execute1(op, {x}); }
Tensor stop_gradient(const Tensor& x) { static const OpDef& op = op_def("StopGradient"); return execute1(op, {x}); }
Tensor logical_not(const Tensor& x) { static const OpDef& op = op_def("LogicalNot"); return execute1(op, {x}); }

Tensor scalar_like(const Tensor& t, double v) { return scalar(v, t.dtype()); }

namespace {
// A C++ double joining tensor t: converted to t's float dtype; an integer or bool tensor is an
// error, as TF refuses to convert a Python float to an integer tensor (no silent truncation).
Tensor float_operand(const char* op, const Tensor& t, double v) {
  if (t.defined() && !is_floating(t.dtype())) {
    std::ostringstream value;
    value << v;
    throw std::invalid_argument(std::string(op) + ": cannot convert the floating-point value " + value.str() +
                                " to the tensor's dtype " + dtype_name(t.dtype()) +
                                " (TensorFlow refuses too); use an integer operand or cast() the tensor");
  }
  return scalar_like(t, v);
}
}  // namespace
Tensor pow(const Tensor& a, double exponent) { return pow(a, float_operand("pow", a, exponent)); }

Tensor leaky_relu(const Tensor& x, double alpha) {
  static const OpDef& op = op_def("LeakyRelu");
  return execute1(op, {x}, Attrs().set("alpha", alpha));
}

Tensor tanh_grad(const Tensor& y, const Tensor& dy) {
  static const OpDef& op = op_def("TanhGrad");
  return execute1(op, {y, dy});
}
Tensor relu_grad(const Tensor& dy, const Tensor& features) {
  static const OpDef& op = op_def("ReluGrad");
  return execute1(op, {dy, features});
}
Tensor elu_grad(const Tensor& dy, const Tensor& y) {
  static const OpDef& op = op_def("EluGrad");
  return execute1(op, {dy, y});
}
Tensor leaky_relu_grad(const Tensor& dy, const Tensor& features, double alpha) {
  static const OpDef& op = op_def("LeakyReluGrad");
  return execute1(op, {dy, features}, Attrs().set("alpha", alpha));
}

Tensor cast(const Tensor& x, DType dtype) {
  static const OpDef& op = op_def("Cast");
  return execute1(op, {x}, Attrs().set("DstT", dtype));
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  static const OpDef& op = op_def("SelectV2");
  return execute1(op, {cond, a, b});
}

Tensor clip_by_value(const Tensor& x, const Tensor& lo, const Tensor& hi) { return minimum(maximum(x, lo), hi); }
Tensor clip_by_value(const Tensor& x, double lo, double hi) {
  return clip_by_value(x, scalar_like(x, lo), scalar_like(x, hi));
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return subtract(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return multiply(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return divide(a, b); }
Tensor operator-(const Tensor& x) { return negative(x); }
Tensor operator+(const Tensor& a, double b) { return add(a, float_operand("add", a, b)); }
Tensor operator-(const Tensor& a, double b) { return subtract(a, float_operand("subtract", a, b)); }
Tensor operator*(const Tensor& a, double b) { return multiply(a, float_operand("multiply", a, b)); }
Tensor operator/(const Tensor& a, double b) { return divide(a, float_operand("divide", a, b)); }
Tensor operator+(double a, const Tensor& b) { return add(float_operand("add", b, a), b); }
Tensor operator-(double a, const Tensor& b) { return subtract(float_operand("subtract", b, a), b); }
Tensor operator*(double a, const Tensor& b) { return multiply(float_operand("multiply", b, a), b); }
Tensor operator/(double a, const Tensor& b) { return divide(float_operand("divide", b, a), b); }

namespace math_internal {
Tensor integer_operand(const char* op, const Tensor& t, std::int64_t v) {
  if (t.dtype() == DType::kInt32 && (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max()))
    throw std::invalid_argument(std::string(op) + ": the integer " + std::to_string(v) +
                                " is out of range for an int32 tensor");
  if (t.dtype() == DType::kBool)
    throw std::invalid_argument(std::string(op) + ": cannot combine a bool tensor with the integer " + std::to_string(v));
  return scalar(static_cast<double>(v), t.dtype());
}
}  // namespace math_internal

Tensor divide(const Tensor& a, const Tensor& b) {
  static const OpDef& op = op_def("RealDiv");
  // TF's true division: integers divide as float64 (tf.math.divide, Python's /); floordiv is //.
  if (a.defined() && b.defined() && is_integer(a.dtype()) && a.dtype() == b.dtype())
    return execute1(op, {cast(a, DType::kFloat64), cast(b, DType::kFloat64)});
  return execute1(op, {a, b});
}

// ---- forward functions and gradients, one pair per op (gradients are written with ops) ----
namespace {

using In = std::span<const Tensor>;
using G = std::span<const Tensor>;
using C = const GradContext&;

template <class F>
TensorList numeric_binary(const char* name, In in, F f, std::optional<kernels::BinaryOp> loop = std::nullopt) {
  return binary_forward<Kinds::kNumeric, false>(name, in, f, loop);
}
template <class F>
TensorList comparison(const char* name, In in, F f) { return binary_forward<Kinds::kNumeric, true>(name, in, f); }

// Arithmetic with broadcasting.
TensorList add_forward(In in, const Attrs&) { return numeric_binary("add", in, [](auto a, auto b) { return a + b; }, kernels::BinaryOp::kAdd); }
// d(a + b) = (g, g), each summed back to its input's shape.
TensorList add_gradient(C c, G g) {
  return {c.needs_gradient(0) ? unbroadcast(g[0], c.input_shape(0)) : Tensor(),
          c.needs_gradient(1) ? unbroadcast(g[0], c.input_shape(1)) : Tensor()};
}
TensorList sub_forward(In in, const Attrs&) { return numeric_binary("subtract", in, [](auto a, auto b) { return a - b; }, kernels::BinaryOp::kSub); }
// d(a - b) = (g, -g).
TensorList sub_gradient(C c, G g) {
  return {c.needs_gradient(0) ? unbroadcast(g[0], c.input_shape(0)) : Tensor(),
          c.needs_gradient(1) ? unbroadcast(negative(g[0]), c.input_shape(1)) : Tensor()};
}
TensorList mul_forward(In in, const Attrs&) { return numeric_binary("multiply", in, [](auto a, auto b) { return a * b; }, kernels::BinaryOp::kMul); }
// d(a b) = (g b, g a).
TensorList mul_gradient(C c, G g) {
  return {c.needs_gradient(0) ? unbroadcast(g[0] * c.input(1), c.input_shape(0)) : Tensor(),
          c.needs_gradient(1) ? unbroadcast(g[0] * c.input(0), c.input_shape(1)) : Tensor()};
}
TensorList div_forward(In in, const Attrs&) {
  check_no_integer_zero("divide", in);
  return numeric_binary("divide", in, [](auto a, auto b) { return a / b; }, kernels::BinaryOp::kDiv);
}
// d(a / b) = (g / b, -g a / b²).
TensorList div_gradient(C c, G g) {
  const Tensor &a = c.input(0), &b = c.input(1);
  return {c.needs_gradient(0) ? unbroadcast(g[0] / b, c.input_shape(0)) : Tensor(),
          c.needs_gradient(1) ? unbroadcast(negative(g[0]) * a / square(b), c.input_shape(1)) : Tensor()};
}
TensorList pow_forward(In in, const Attrs&) {
  return numeric_binary("pow", in, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>) return int_pow<T>(a, b);
    else return std::pow(a, b);
  });
}
// d(a^b) = (g b a^(b-1), g y log a); TF: log(a) only where a > 0, so db is 0 (not NaN) elsewhere.
TensorList pow_gradient(C c, G g) {
  const Tensor &a = c.input(0), &b = c.input(1), &y = c.output(0);
  Tensor da, db;
  if (c.needs_gradient(0)) da = unbroadcast(g[0] * b * pow(a, b - 1.0), c.input_shape(0));
  if (c.needs_gradient(1)) {
    Tensor zero = zeros_like(a);
    Tensor safe_log = where(greater(a, zero), log(where(greater(a, zero), a, ones_like(a))), zero);
    db = unbroadcast(g[0] * y * safe_log, c.input_shape(1));
  }
  return {da, db};
}
TensorList floordiv_forward(In in, const Attrs&) {
  check_no_integer_zero("floordiv", in);
  return numeric_binary("floordiv", in, [](auto a, auto b) { return floor_div(a, b); });
}
TensorList maximum_forward(In in, const Attrs&) { return numeric_binary("maximum", in, [](auto a, auto b) { return a >= b ? a : b; }, kernels::BinaryOp::kMaximum); }
TensorList minimum_forward(In in, const Attrs&) { return numeric_binary("minimum", in, [](auto a, auto b) { return a <= b ? a : b; }, kernels::BinaryOp::kMinimum); }
// max/min: g to a where a is selected (ties go to the first input: TF's _MaximumMinimumGrad, >= / <=).
TensorList max_min_gradient(C c, G g, bool is_max) {
  const Tensor &a = c.input(0), &b = c.input(1);
  Tensor first = is_max ? greater_equal(a, b) : less_equal(a, b);
  Tensor zero = scalar_like(g[0], 0.0);
  return {c.needs_gradient(0) ? unbroadcast(where(first, g[0], zero), c.input_shape(0)) : Tensor(),
          c.needs_gradient(1) ? unbroadcast(where(first, zero, g[0]), c.input_shape(1)) : Tensor()};
}
TensorList maximum_gradient(C c, G g) { return max_min_gradient(c, g, true); }
TensorList minimum_gradient(C c, G g) { return max_min_gradient(c, g, false); }

// Comparisons and logic (no gradient).
TensorList equal_forward(In in, const Attrs&) { return binary_forward<Kinds::kAll, true>("equal", in, [](auto a, auto b) { return a == b; }); }
TensorList not_equal_forward(In in, const Attrs&) { return binary_forward<Kinds::kAll, true>("not_equal", in, [](auto a, auto b) { return a != b; }); }
TensorList less_forward(In in, const Attrs&) { return comparison("less", in, [](auto a, auto b) { return a < b; }); }
TensorList less_equal_forward(In in, const Attrs&) { return comparison("less_equal", in, [](auto a, auto b) { return a <= b; }); }
TensorList greater_forward(In in, const Attrs&) { return comparison("greater", in, [](auto a, auto b) { return a > b; }); }
TensorList greater_equal_forward(In in, const Attrs&) { return comparison("greater_equal", in, [](auto a, auto b) { return a >= b; }); }
TensorList logical_forward(const char* name, In in, bool is_and) {
  for (const Tensor& t : in)
    if (t.dtype() != DType::kBool)
      throw std::invalid_argument(std::string(name) + ": expected bool inputs, got " + dtype_name(t.dtype()));
  return binary_forward<Kinds::kAll, true>(name, in, [is_and](auto a, auto b) { return is_and ? (a && b) : (a || b); });
}
TensorList logical_and_forward(In in, const Attrs&) { return logical_forward("logical_and", in, true); }
TensorList logical_or_forward(In in, const Attrs&) { return logical_forward("logical_or", in, false); }
TensorList logical_not_forward(In in, const Attrs&) {
  if (in.size() == 1 && in[0].dtype() != DType::kBool)
    throw std::invalid_argument(std::string("logical_not: expected bool input, got ") + dtype_name(in[0].dtype()));
  return unary_forward<Kinds::kAll>("logical_not", in, [](auto v) { return !v; });
}

// Unary math.
TensorList neg_forward(In in, const Attrs&) { return unary_forward<Kinds::kNumeric>("negative", in, [](auto v) { return -v; }, kernels::UnaryOp::kNegative); }
// d(-x) = -g.
TensorList neg_gradient(C, G g) { return {negative(g[0])}; }
TensorList square_forward(In in, const Attrs&) { return unary_forward<Kinds::kNumeric>("square", in, [](auto v) { return v * v; }, kernels::UnaryOp::kSquare); }
// d(x²) = 2 x g.
TensorList square_gradient(C c, G g) { return {g[0] * (c.input(0) * 2.0)}; }
TensorList sqrt_forward(In in, const Attrs&) { return unary_forward<Kinds::kFloat>("sqrt", in, [](auto v) { return std::sqrt(v); }, kernels::UnaryOp::kSqrt); }
// d√x = g / (2 y).
TensorList sqrt_gradient(C c, G g) { return {g[0] * 0.5 / c.output(0)}; }
TensorList rsqrt_forward(In in, const Attrs&) { return unary_forward<Kinds::kFloat>("rsqrt", in, [](auto v) { return 1 / std::sqrt(v); }, kernels::UnaryOp::kRsqrt); }
// d(1/√x) = -g y³ / 2.
TensorList rsqrt_gradient(C c, G g) { const Tensor& y = c.output(0); return {g[0] * (-0.5) * y * y * y}; }
TensorList reciprocal_forward(In in, const Attrs&) { return unary_forward<Kinds::kFloat>("reciprocal", in, [](auto v) { return 1 / v; }, kernels::UnaryOp::kReciprocal); }
// d(1/x) = -g y².
TensorList reciprocal_gradient(C c, G g) { const Tensor& y = c.output(0); return {negative(g[0]) * y * y}; }
TensorList exp_forward(In in, const Attrs&) { return unary_forward<Kinds::kFloat>("exp", in, [](auto v) { return std::exp(v); }); }
// d eˣ = g y.
TensorList exp_gradient(C c, G g) { return {g[0] * c.output(0)}; }
TensorList log_forward(In in, const Attrs&) { return unary_forward<Kinds::kFloat>("log", in, [](auto v) { return std::log(v); }); }
// d ln x = g / x.
TensorList log_gradient(C c, G g) { return {g[0] / c.input(0)}; }
TensorList abs_forward(In in, const Attrs&) { return unary_forward<Kinds::kNumeric>("abs", in, [](auto v) { return v < 0 ? -v : v; }, kernels::UnaryOp::kAbs); }
// d|x| = g sign(x).
TensorList abs_gradient(C c, G g) { return {g[0] * sign(c.input(0))}; }
TensorList sign_forward(In in, const Attrs&) { return unary_forward<Kinds::kNumeric>("sign", in, [](auto v) { return (v > 0) - (v < 0); }); }
// d sign(x) = 0 (TF).
TensorList sign_gradient(C c, G) { return {zeros(c.input_shape(0), c.input_dtype(0))}; }
TensorList sin_forward(In in, const Attrs&) { return unary_forward<Kinds::kFloat>("sin", in, [](auto v) { return std::sin(v); }); }
// d sin x = g cos x.
TensorList sin_gradient(C c, G g) { return {g[0] * cos(c.input(0))}; }
TensorList cos_forward(In in, const Attrs&) { return unary_forward<Kinds::kFloat>("cos", in, [](auto v) { return std::cos(v); }); }
// d cos x = -g sin x.
TensorList cos_gradient(C c, G g) { return {negative(g[0]) * sin(c.input(0))}; }
TensorList softplus_forward(In in, const Attrs&) {
  return unary_forward<Kinds::kFloat>("softplus", in, [](auto v) { return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); });
}
// softplus' = sigmoid(x).
TensorList softplus_gradient(C c, G g) { return {g[0] * sigmoid(c.input(0))}; }
TensorList round_forward(In in, const Attrs&) {
  return unary_forward<Kinds::kNumeric>("round", in, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>) return round_half_even(v);
    else return v;
  });
}

// Activations and the fused activation-gradient ops.
TensorList tanh_forward(In in, const Attrs&) { return activation_forward("tanh", in, [](auto x, auto y, auto n) { kernels::tanh(x, y, n); }); }
// tanh' = 1 - y², from the saved output: tanh_grad(y, g).
TensorList tanh_gradient(C c, G g) { return {tanh_grad(c.output(0), g[0])}; }
TensorList tanh_grad_forward(In in, const Attrs&) {
  return activation_grad_forward("tanh_grad", in, [](auto y, auto dy, auto dx, auto n) { kernels::tanh_grad(y, dy, dx, n); });
}
// Inputs {y, dy}: d/dy = -2 g dy y; d/ddy = tanh_grad(y, g) (TF's _TanhGradGrad).
TensorList tanh_grad_gradient(C c, G g) {
  const Tensor &y = c.input(0), &dy = c.input(1);
  return {c.needs_gradient(0) ? g[0] * dy * y * (-2.0) : Tensor(), c.needs_gradient(1) ? tanh_grad(y, g[0]) : Tensor()};
}
TensorList sigmoid_forward(In in, const Attrs&) {
  return activation_forward("sigmoid", in, [](auto x, auto y, auto n) { kernels::sigmoid(x, y, n); });
}
// sigmoid' = y (1 - y), from the saved output.
TensorList sigmoid_gradient(C c, G g) { const Tensor& y = c.output(0); return {g[0] * y * (1.0 - y)}; }
TensorList relu_forward(In in, const Attrs&) {
  return unary_forward<Kinds::kNumeric>("relu", in, [](auto v) { return v > 0 ? v : decltype(v)(0); }, kernels::UnaryOp::kRelu);
}
// relu' = 1 where y > 0 (TF's ReluGrad); the mask is constant, so relu'' = 0.
TensorList relu_gradient(C c, G g) { return {relu_grad(g[0], c.output(0))}; }
TensorList relu_grad_forward(In in, const Attrs&) {
  return activation_grad_forward("relu_grad", in, [](auto dy, auto f, auto dx, auto n) { kernels::relu_grad(dy, f, dx, n); });
}
// Inputs {dy, features}: d/ddy = relu_grad(g, features); the mask is constant (TF's _ReluGradGrad).
TensorList relu_grad_gradient(C c, G g) { return {relu_grad(g[0], c.input(1)), Tensor()}; }
TensorList elu_forward(In in, const Attrs&) { return activation_forward("elu", in, [](auto x, auto y, auto n) { kernels::elu(x, y, n); }); }
// elu' = 1 where x > 0, else y + 1 (TF's EluGrad, from the saved output).
TensorList elu_gradient(C c, G g) { return {elu_grad(g[0], c.output(0))}; }
TensorList elu_grad_forward(In in, const Attrs&) {
  return activation_grad_forward("elu_grad", in, [](auto dy, auto y, auto dx, auto n) { kernels::elu_grad(dy, y, dx, n); });
}
// Inputs {dy, y}: linear in dy, so d/ddy = elu_grad(g, y); dy·(y + 1) gives d/dy = g·dy where y < 0
// (TF's _EluGradGrad).
TensorList elu_grad_gradient(C c, G g) {
  const Tensor &dy = c.input(0), &y = c.input(1);
  return {c.needs_gradient(0) ? elu_grad(g[0], y) : Tensor(),
          c.needs_gradient(1) ? where(less(y, zeros_like(y)), g[0] * dy, zeros_like(y)) : Tensor()};
}
// alpha is cast to the dtype first, as TF's LeakyRelu kernel does.
TensorList leaky_relu_forward(In in, const Attrs& at) {
  const double alpha = at.get_float("alpha");
  return activation_forward("leaky_relu", in, [alpha](auto x, auto y, auto n) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(x)>>;
    kernels::leaky_relu(x, static_cast<T>(alpha), y, n);
  });
}
// leaky_relu' = 1 where x > 0, else alpha: leaky_relu_grad(g, x, alpha).
TensorList leaky_relu_gradient(C c, G g) { return {leaky_relu_grad(g[0], c.input(0), c.attrs().get_float("alpha"))}; }
TensorList leaky_relu_grad_forward(In in, const Attrs& at) {
  const double alpha = at.get_float("alpha");
  return activation_grad_forward("leaky_relu_grad", in, [alpha](auto dy, auto f, auto dx, auto n) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(dy)>>;
    kernels::leaky_relu_grad(dy, f, static_cast<T>(alpha), dx, n);
  });
}
// Inputs {dy, features}: d/ddy = leaky_relu_grad(g, features, alpha); features get none (TF's _LeakyReluGradGrad).
TensorList leaky_relu_grad_gradient(C c, G g) {
  return {leaky_relu_grad(g[0], c.input(1), c.attrs().get_float("alpha")), Tensor()};
}

// Identity-like ops, casts and selection.
TensorList identity_forward(In in, const Attrs&) { ops_internal::check_arity("identity", in, 1); return {in[0].alias()}; }
TensorList stop_gradient_forward(In in, const Attrs&) { ops_internal::check_arity("stop_gradient", in, 1); return {in[0].alias()}; }
TensorList read_variable_forward(In in, const Attrs&) { return {in[0].alias()}; }
TensorList custom_gradient_forward(In in, const Attrs&) {
  TensorList out;
  for (const Tensor& t : in) out.push_back(t.alias());
  return out;
}
// d identity(x) = g.
TensorList pass_through_gradient(C, G g) { return {g[0]}; }
TensorList cast_forward(In in, const Attrs& at) {
  ops_internal::check_arity("cast", in, 1);
  return {convert(in[0], at.get_dtype("DstT")).alias()};
}
// d cast(x) = cast(g) back to x's dtype, between float dtypes only.
TensorList cast_gradient(C c, G g) {
  if (!is_floating(c.input_dtype(0)) || !is_floating(g[0].dtype())) return {Tensor()};
  return {cast(g[0], c.input_dtype(0))};
}
TensorList select_forward(In in, const Attrs&) {
  ops_internal::check_arity("where", in, 3);
  const Tensor &c = in[0], &a = in[1], &b = in[2];
  if (c.dtype() != DType::kBool) throw std::invalid_argument("where: condition must be bool, got " + ops_internal::describe(c));
  ops_internal::check_same_dtype("where", a, b);
  Shape sy = broadcast_shapes(broadcast_shapes(c.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor y = Tensor::empty(sy, a.dtype());
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::where(c.data<bool>(), c.shape(), a.data<T>(), a.shape(), b.data<T>(), b.shape(), y.mutable_data<T>(), sy);
  });
  return {y};
}
// where(c, a, b): g to the branch that was selected; the condition gets none.
TensorList select_gradient(C c, G g) {
  const Tensor& cond = c.input(0);
  Tensor zero = scalar_like(g[0], 0.0);
  return {Tensor(), c.needs_gradient(1) ? unbroadcast(where(cond, g[0], zero), c.input_shape(1)) : Tensor(),
          c.needs_gradient(2) ? unbroadcast(where(cond, zero, g[0]), c.input_shape(2)) : Tensor()};
}

}  // namespace

// ---- registration: one entry per op (forward, gradient, what backward saves, how it batches) ----
void register_math_ops(OpRegistry& r) {
  using batching::elementwise;
  using batching::linear_elementwise;
  using batching::same_shape;
  using batching::unary;
  const BatchRule additive = linear_elementwise(0b11, /*additive=*/true);
  const BatchRule linear = linear_elementwise(0b1, false);
  r.add({"AddV2", add_forward, add_gradient, kSaveNone, additive});
  r.add({"Sub", sub_forward, sub_gradient, kSaveNone, additive});
  r.add({"Mul", mul_forward, mul_gradient, kSaveInputs, linear_elementwise(0b11, false)});
  r.add({"RealDiv", div_forward, div_gradient, kSaveInputs, linear_elementwise(0b01, false)});
  r.add({"FloorDiv", floordiv_forward, {}, kSaveNone, elementwise()});  // Python's //: no gradient (TF)
  r.add({"Pow", pow_forward, pow_gradient, kSaveAll, elementwise()});
  r.add({"Maximum", maximum_forward, maximum_gradient, kSaveInputs, elementwise()});
  r.add({"Minimum", minimum_forward, minimum_gradient, kSaveInputs, elementwise()});

  r.add({"Equal", equal_forward, {}, kSaveNone, elementwise()});
  r.add({"NotEqual", not_equal_forward, {}, kSaveNone, elementwise()});
  r.add({"Less", less_forward, {}, kSaveNone, elementwise()});
  r.add({"LessEqual", less_equal_forward, {}, kSaveNone, elementwise()});
  r.add({"Greater", greater_forward, {}, kSaveNone, elementwise()});
  r.add({"GreaterEqual", greater_equal_forward, {}, kSaveNone, elementwise()});
  r.add({"LogicalAnd", logical_and_forward, {}, kSaveNone, elementwise()});
  r.add({"LogicalOr", logical_or_forward, {}, kSaveNone, elementwise()});
  r.add({"LogicalNot", logical_not_forward, {}, kSaveNone, unary()});

  r.add({"Neg", neg_forward, neg_gradient, kSaveNone, linear});
  r.add({"Square", square_forward, square_gradient, kSaveInputs, unary()});
  r.add({"Sqrt", sqrt_forward, sqrt_gradient, kSaveOutputs, unary()});
  r.add({"Rsqrt", rsqrt_forward, rsqrt_gradient, kSaveOutputs, unary()});
  r.add({"Reciprocal", reciprocal_forward, reciprocal_gradient, kSaveOutputs, unary()});
  r.add({"Exp", exp_forward, exp_gradient, kSaveOutputs, unary()});
  r.add({"Log", log_forward, log_gradient, kSaveInputs, unary()});
  r.add({"Abs", abs_forward, abs_gradient, kSaveInputs, unary()});
  r.add({"Sign", sign_forward, sign_gradient, kSaveNone, unary()});
  r.add({"Sin", sin_forward, sin_gradient, kSaveInputs, unary()});
  r.add({"Cos", cos_forward, cos_gradient, kSaveInputs, unary()});
  r.add({"Softplus", softplus_forward, softplus_gradient, kSaveInputs, unary()});
  r.add({"Round", round_forward, {}, kSaveNone, unary()});

  r.add({"Tanh", tanh_forward, tanh_gradient, kSaveOutputs, unary()});
  r.add({"TanhGrad", tanh_grad_forward, tanh_grad_gradient, kSaveInputs, same_shape(/*linear in dy=*/1)});
  r.add({"Sigmoid", sigmoid_forward, sigmoid_gradient, kSaveOutputs, unary()});
  r.add({"Relu", relu_forward, relu_gradient, kSaveOutputs, unary()});
  r.add({"ReluGrad", relu_grad_forward, relu_grad_gradient, kSaveInputs, same_shape(/*linear in dy=*/0)});
  r.add({"Elu", elu_forward, elu_gradient, kSaveOutputs, unary()});
  r.add({"EluGrad", elu_grad_forward, elu_grad_gradient, kSaveInputs, same_shape(/*linear in dy=*/0)});
  r.add({"LeakyRelu", leaky_relu_forward, leaky_relu_gradient, kSaveInputs, unary()});
  r.add({"LeakyReluGrad", leaky_relu_grad_forward, leaky_relu_grad_gradient, kSaveInputs, same_shape(0)});

  r.add({"Identity", identity_forward, pass_through_gradient, kSaveNone, linear});
  r.add({"StopGradient", stop_gradient_forward, {}, kSaveNone, unary()});
  // The op a custom_gradient call is recorded as: its gradient comes with each call, and batches
  // through the ops that gradient function uses.
  r.add({"CustomGradient", custom_gradient_forward, {}, kSaveNone});
  r.add({"ReadVariableOp", read_variable_forward, pass_through_gradient, kSaveNone, linear});
  r.add({"Cast", cast_forward, cast_gradient, kSaveNone, linear});
  r.add({"SelectV2", select_forward, select_gradient, kSaveInputs, linear_elementwise(0b110, /*additive=*/true)});
}

}  // namespace tapeflow
