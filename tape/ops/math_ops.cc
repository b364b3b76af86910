// Element-wise math ops: forward kernels and gradients (written with ops, so they are recorded too).
#include "tape/ops/math_ops.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tape/kernels/nn.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

using ops_internal::binary_forward;
using ops_internal::Kinds;
using ops_internal::unary_forward;

namespace {

Tensor unbroadcast(const Tensor& g, const Shape& shape) { return g.shape() == shape ? g : sum_to_shape(g, shape); }

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

// ---- public functions: one line each, through the single dispatch point ----
#define TF_BINARY(fn, opname)                                  \
  Tensor fn(const Tensor& a, const Tensor& b) {                \
    static const OpDef& op = op_def(opname);                   \
    return execute1(op, {a, b});                               \
  }
TF_BINARY(add, "AddV2")
TF_BINARY(subtract, "Sub")
TF_BINARY(multiply, "Mul")
TF_BINARY(floordiv, "FloorDiv")
TF_BINARY(pow, "Pow")
TF_BINARY(maximum, "Maximum")
TF_BINARY(minimum, "Minimum")
TF_BINARY(equal, "Equal")
TF_BINARY(not_equal, "NotEqual")
TF_BINARY(less, "Less")
TF_BINARY(less_equal, "LessEqual")
TF_BINARY(greater, "Greater")
TF_BINARY(greater_equal, "GreaterEqual")
TF_BINARY(logical_and, "LogicalAnd")
TF_BINARY(logical_or, "LogicalOr")
#undef TF_BINARY

#define TF_UNARY(fn, opname)                   \
  Tensor fn(const Tensor& x) {                 \
    static const OpDef& op = op_def(opname);   \
    return execute1(op, {x});                  \
  }
TF_UNARY(negative, "Neg")
TF_UNARY(square, "Square")
TF_UNARY(sqrt, "Sqrt")
TF_UNARY(rsqrt, "Rsqrt")
TF_UNARY(reciprocal, "Reciprocal")
TF_UNARY(exp, "Exp")
TF_UNARY(log, "Log")
TF_UNARY(abs, "Abs")
TF_UNARY(sign, "Sign")
TF_UNARY(sin, "Sin")
TF_UNARY(cos, "Cos")
TF_UNARY(tanh, "Tanh")
TF_UNARY(sigmoid, "Sigmoid")
TF_UNARY(relu, "Relu")
TF_UNARY(elu, "Elu")
TF_UNARY(softplus, "Softplus")
TF_UNARY(round, "Round")
TF_UNARY(identity, "Identity")
TF_UNARY(stop_gradient, "StopGradient")
TF_UNARY(logical_not, "LogicalNot")
#undef TF_UNARY

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

// ---- registration: forward kernel + gradient, in one place per op ----
void register_math_ops(OpRegistry& r) {
  using In = std::span<const Tensor>;
  using G = std::span<const Tensor>;
  using C = const GradContext&;

  // Binary arithmetic. d(a+b) = (g, g); d(a-b) = (g, -g); d(ab) = (g b, g a); d(a/b) = (g/b, -g a/b²).
  r.add({"AddV2", [](In in, const Attrs&) { return binary_forward<Kinds::kNumeric, false>("add", in, [](auto a, auto b) { return a + b; }); },
         [](C c, G g) { return TensorList{unbroadcast(g[0], c.input_shape(0)), unbroadcast(g[0], c.input_shape(1))}; },
         kSaveNone});
  r.add({"Sub", [](In in, const Attrs&) { return binary_forward<Kinds::kNumeric, false>("subtract", in, [](auto a, auto b) { return a - b; }); },
         [](C c, G g) { return TensorList{unbroadcast(g[0], c.input_shape(0)), unbroadcast(negative(g[0]), c.input_shape(1))}; },
         kSaveNone});
  r.add({"Mul", [](In in, const Attrs&) { return binary_forward<Kinds::kNumeric, false>("multiply", in, [](auto a, auto b) { return a * b; }); },
         [](C c, G g) {
           return TensorList{unbroadcast(g[0] * c.input(1), c.input_shape(0)), unbroadcast(g[0] * c.input(0), c.input_shape(1))};
         }});
  r.add({"RealDiv",
         [](In in, const Attrs&) {
           check_no_integer_zero("divide", in);
           return binary_forward<Kinds::kNumeric, false>("divide", in, [](auto a, auto b) { return a / b; });
         },
         [](C c, G g) {
           const Tensor &a = c.input(0), &b = c.input(1);
           return TensorList{unbroadcast(g[0] / b, c.input_shape(0)), unbroadcast(negative(g[0]) * a / square(b), c.input_shape(1))};
         }});
  r.add({"Pow",
         [](In in, const Attrs&) {
           return binary_forward<Kinds::kNumeric, false>("pow", in, [](auto a, auto b) {
             using T = decltype(a);
             if constexpr (std::is_integral_v<T>) return int_pow<T>(a, b);
             else return std::pow(a, b);
           });
         },
         [](C c, G g) {
           const Tensor &a = c.input(0), &b = c.input(1), &y = c.output(0);
           Tensor da = g[0] * b * pow(a, b - 1.0);
           // TF: log(a) only where a > 0, so the exponent's gradient is 0 (not NaN) elsewhere.
           Tensor zero = zeros_like(a);
           Tensor safe_log = where(greater(a, zero), log(where(greater(a, zero), a, ones_like(a))), zero);
           Tensor db = g[0] * y * safe_log;
           return TensorList{unbroadcast(da, c.input_shape(0)), unbroadcast(db, c.input_shape(1))};
         },
         kSaveAll});
  // floordiv (Python's //): no gradient, as TF's FloorDiv.
  r.add({"FloorDiv", [](In in, const Attrs&) {
           check_no_integer_zero("floordiv", in);
           return binary_forward<Kinds::kNumeric, false>("floordiv", in, [](auto a, auto b) { return floor_div(a, b); });
         },
         {}});
  // maximum/minimum: ties go to the first input (TF's _MaximumMinimumGrad uses >= / <=).
  auto select_grad = [](C c, G g, bool is_max) {
    const Tensor &a = c.input(0), &b = c.input(1);
    Tensor first = is_max ? greater_equal(a, b) : less_equal(a, b);
    Tensor zero = zeros_like(g[0]);
    return TensorList{unbroadcast(where(first, g[0], zero), c.input_shape(0)),
                      unbroadcast(where(first, zero, g[0]), c.input_shape(1))};
  };
  r.add({"Maximum", [](In in, const Attrs&) { return binary_forward<Kinds::kNumeric, false>("maximum", in, [](auto a, auto b) { return a >= b ? a : b; }); },
         [select_grad](C c, G g) { return select_grad(c, g, true); }});
  r.add({"Minimum", [](In in, const Attrs&) { return binary_forward<Kinds::kNumeric, false>("minimum", in, [](auto a, auto b) { return a <= b ? a : b; }); },
         [select_grad](C c, G g) { return select_grad(c, g, false); }});

  // Comparisons and logic: no gradient.
  r.add({"Equal", [](In in, const Attrs&) { return binary_forward<Kinds::kAll, true>("equal", in, [](auto a, auto b) { return a == b; }); }, {}});
  r.add({"NotEqual", [](In in, const Attrs&) { return binary_forward<Kinds::kAll, true>("not_equal", in, [](auto a, auto b) { return a != b; }); }, {}});
  r.add({"Less", [](In in, const Attrs&) { return binary_forward<Kinds::kNumeric, true>("less", in, [](auto a, auto b) { return a < b; }); }, {}});
  r.add({"LessEqual", [](In in, const Attrs&) { return binary_forward<Kinds::kNumeric, true>("less_equal", in, [](auto a, auto b) { return a <= b; }); }, {}});
  r.add({"Greater", [](In in, const Attrs&) { return binary_forward<Kinds::kNumeric, true>("greater", in, [](auto a, auto b) { return a > b; }); }, {}});
  r.add({"GreaterEqual", [](In in, const Attrs&) { return binary_forward<Kinds::kNumeric, true>("greater_equal", in, [](auto a, auto b) { return a >= b; }); }, {}});
  auto logical = [](const char* name, In in, bool is_and) {
    for (const Tensor& t : in)
      if (t.dtype() != DType::kBool) throw std::invalid_argument(std::string(name) + ": expected bool inputs, got " + dtype_name(t.dtype()));
    return binary_forward<Kinds::kAll, true>(name, in, [is_and](auto a, auto b) { return is_and ? (a && b) : (a || b); });
  };
  r.add({"LogicalAnd", [logical](In in, const Attrs&) { return logical("logical_and", in, true); }, {}});
  r.add({"LogicalOr", [logical](In in, const Attrs&) { return logical("logical_or", in, false); }, {}});
  r.add({"LogicalNot", [](In in, const Attrs&) {
           if (in.size() == 1 && in[0].dtype() != DType::kBool) throw std::invalid_argument(std::string("logical_not: expected bool input, got ") + dtype_name(in[0].dtype()));
           return unary_forward<Kinds::kAll>("logical_not", in, [](auto v) { return !v; }); }, {}});

  // Unary math.
  r.add({"Neg", [](In in, const Attrs&) { return unary_forward<Kinds::kNumeric>("negative", in, [](auto v) { return -v; }); },
         [](C, G g) { return TensorList{negative(g[0])}; }, kSaveNone});
  r.add({"Square", [](In in, const Attrs&) { return unary_forward<Kinds::kNumeric>("square", in, [](auto v) { return v * v; }); },
         [](C c, G g) { return TensorList{g[0] * (c.input(0) * 2.0)}; }});
  r.add({"Sqrt", [](In in, const Attrs&) { return unary_forward<Kinds::kFloat>("sqrt", in, [](auto v) { return std::sqrt(v); }); },
         [](C c, G g) { return TensorList{g[0] * 0.5 / c.output(0)}; }, kSaveOutputs});
  r.add({"Rsqrt", [](In in, const Attrs&) { return unary_forward<Kinds::kFloat>("rsqrt", in, [](auto v) { return 1 / std::sqrt(v); }); },
         [](C c, G g) { const Tensor& y = c.output(0); return TensorList{g[0] * (-0.5) * y * y * y}; }, kSaveOutputs});
  r.add({"Reciprocal", [](In in, const Attrs&) { return unary_forward<Kinds::kFloat>("reciprocal", in, [](auto v) { return 1 / v; }); },
         [](C c, G g) { const Tensor& y = c.output(0); return TensorList{negative(g[0]) * y * y}; }, kSaveOutputs});
  r.add({"Exp", [](In in, const Attrs&) { return unary_forward<Kinds::kFloat>("exp", in, [](auto v) { return std::exp(v); }); },
         [](C c, G g) { return TensorList{g[0] * c.output(0)}; }, kSaveOutputs});
  r.add({"Log", [](In in, const Attrs&) { return unary_forward<Kinds::kFloat>("log", in, [](auto v) { return std::log(v); }); },
         [](C c, G g) { return TensorList{g[0] / c.input(0)}; }});
  r.add({"Abs", [](In in, const Attrs&) { return unary_forward<Kinds::kNumeric>("abs", in, [](auto v) { return v < 0 ? -v : v; }); },
         [](C c, G g) { return TensorList{g[0] * sign(c.input(0))}; }});
  r.add({"Sign", [](In in, const Attrs&) { return unary_forward<Kinds::kNumeric>("sign", in, [](auto v) { return (v > 0) - (v < 0); }); },
         [](C c, G g) { return TensorList{zeros_like(g[0])}; }, kSaveNone});  // TF: zero gradient
  r.add({"Sin", [](In in, const Attrs&) { return unary_forward<Kinds::kFloat>("sin", in, [](auto v) { return std::sin(v); }); },
         [](C c, G g) { return TensorList{g[0] * cos(c.input(0))}; }});
  r.add({"Cos", [](In in, const Attrs&) { return unary_forward<Kinds::kFloat>("cos", in, [](auto v) { return std::cos(v); }); },
         [](C c, G g) { return TensorList{negative(g[0]) * sin(c.input(0))}; }});
  // tanh' = 1 - y²; sigmoid' = y (1 - y): both from the saved output.
  r.add({"Tanh", [](In in, const Attrs&) { return activation_forward("tanh", in, [](auto x, auto y, auto n) { kernels::tanh(x, y, n); }); },
         [](C c, G g) { return TensorList{tanh_grad(c.output(0), g[0])}; }, kSaveOutputs});
  // Inputs {y, dy}. d/dy = -2 g dy y; d/ddy = tanh_grad(y, g) (TF's _TanhGradGrad).
  r.add({"TanhGrad",
         [](In in, const Attrs&) {
           return activation_grad_forward("tanh_grad", in, [](auto y, auto dy, auto dx, auto n) { kernels::tanh_grad(y, dy, dx, n); });
         },
         [](C c, G g) {
           const Tensor &y = c.input(0), &dy = c.input(1);
           return TensorList{g[0] * dy * y * (-2.0), tanh_grad(y, g[0])};
         }});
  r.add({"Sigmoid",
         [](In in, const Attrs&) {
           return unary_forward<Kinds::kFloat>("sigmoid", in, [](auto v) {
             using T = decltype(v);
             return v >= 0 ? T(1) / (T(1) + std::exp(-v)) : std::exp(v) / (T(1) + std::exp(v));
           });
         },
         [](C c, G g) { const Tensor& y = c.output(0); return TensorList{g[0] * y * (1.0 - y)}; }, kSaveOutputs});
  // relu' = 1 where y > 0 (TF's ReluGrad); the mask is constant, so relu'' = 0.
  r.add({"Relu", [](In in, const Attrs&) { return unary_forward<Kinds::kNumeric>("relu", in, [](auto v) { return v > 0 ? v : decltype(v)(0); }); },
         [](C c, G g) { return TensorList{relu_grad(g[0], c.output(0))}; }, kSaveOutputs});
  // Inputs {dy, features}: the mask is constant, so features get no gradient (TF's _ReluGradGrad).
  r.add({"ReluGrad",
         [](In in, const Attrs&) {
           return activation_grad_forward("relu_grad", in, [](auto dy, auto f, auto dx, auto n) { kernels::relu_grad(dy, f, dx, n); });
         },
         [](C c, G g) { return TensorList{relu_grad(g[0], c.input(1)), Tensor()}; }});
  // elu' = 1 where x > 0, else y + 1.
  r.add({"Elu", [](In in, const Attrs&) { return activation_forward("elu", in, [](auto x, auto y, auto n) { kernels::elu(x, y, n); }); },
         [](C c, G g) {
           const Tensor &x = c.input(0), &y = c.output(0);
           return TensorList{where(greater(x, zeros_like(x)), g[0], g[0] * (y + 1.0))};
         },
         kSaveAll});
  // alpha is cast to the dtype first, as TF's LeakyRelu kernel does.
  r.add({"LeakyRelu",
         [](In in, const Attrs& at) {
           const double alpha = at.get_float("alpha");
           return activation_forward("leaky_relu", in, [alpha](auto x, auto y, auto n) {
             using T = std::remove_cv_t<std::remove_pointer_t<decltype(x)>>;
             kernels::leaky_relu(x, static_cast<T>(alpha), y, n);
           });
         },
         [](C c, G g) { return TensorList{leaky_relu_grad(g[0], c.input(0), c.attrs().get_float("alpha"))}; }});
  // Inputs {dy, features}; features get no gradient (TF's _LeakyReluGradGrad).
  r.add({"LeakyReluGrad",
         [](In in, const Attrs& at) {
           const double alpha = at.get_float("alpha");
           return activation_grad_forward("leaky_relu_grad", in, [alpha](auto dy, auto f, auto dx, auto n) {
             using T = std::remove_cv_t<std::remove_pointer_t<decltype(dy)>>;
             kernels::leaky_relu_grad(dy, f, static_cast<T>(alpha), dx, n);
           });
         },
         [](C c, G g) { return TensorList{leaky_relu_grad(g[0], c.input(1), c.attrs().get_float("alpha")), Tensor()}; }});
  // softplus' = sigmoid(x).
  r.add({"Softplus",
         [](In in, const Attrs&) {
           return unary_forward<Kinds::kFloat>("softplus", in, [](auto v) {
             return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
           });
         },
         [](C c, G g) { return TensorList{g[0] * sigmoid(c.input(0))}; }});
  r.add({"Round", [](In in, const Attrs&) { return unary_forward<Kinds::kNumeric>("round", in, [](auto v) {
           using T = decltype(v);
           if constexpr (std::is_floating_point_v<T>) return round_half_even(v); else return v; }); },
         {}});
  r.add({"Identity", [](In in, const Attrs&) { ops_internal::check_arity("identity", in, 1); return TensorList{in[0].alias()}; },
         [](C, G g) { return TensorList{g[0]}; }, kSaveNone});
  r.add({"StopGradient", [](In in, const Attrs&) { ops_internal::check_arity("stop_gradient", in, 1); return TensorList{in[0].alias()}; },
         {}});
  // The op a custom_gradient call is recorded as; its gradient comes with each call.
  r.add({"CustomGradient", [](In in, const Attrs&) {
           TensorList out;
           for (const Tensor& t : in) out.push_back(t.alias());
           return out; },
         {}, kSaveNone});
  r.add({"ReadVariableOp", [](In in, const Attrs&) { return TensorList{in[0].alias()}; },
         [](C, G g) { return TensorList{g[0]}; }, kSaveNone});
  r.add({"Cast",
         [](In in, const Attrs& at) {
           ops_internal::check_arity("cast", in, 1);
           return TensorList{convert(in[0], at.get_dtype("DstT")).alias()};
         },
         [](C c, G g) {
           if (!is_floating(c.input_dtype(0)) || !is_floating(g[0].dtype())) return TensorList{Tensor()};
           return TensorList{cast(g[0], c.input_dtype(0))};
         },
         kSaveNone});
  // where: the gradient goes to the branch that was selected.
  r.add({"SelectV2",
         [](In in, const Attrs&) {
           ops_internal::check_arity("where", in, 3);
           const Tensor &c = in[0], &a = in[1], &b = in[2];
           if (c.dtype() != DType::kBool)
             throw std::invalid_argument("where: condition must be bool, got " + ops_internal::describe(c));
           ops_internal::check_same_dtype("where", a, b);
           Shape sy = broadcast_shapes(broadcast_shapes(c.shape(), a.shape(), "where"), b.shape(), "where");
           Tensor y = Tensor::empty(sy, a.dtype());
           dispatch_dtype(a.dtype(), [&](auto tag) {
             using T = decltype(tag);
             kernels::where(c.data<bool>(), c.shape(), a.data<T>(), a.shape(), b.data<T>(), b.shape(), y.mutable_data<T>(), sy);
           });
           return TensorList{y};
         },
         [](C c, G g) {
           const Tensor& cond = c.input(0);
           Tensor zero = zeros_like(g[0]);
           return TensorList{Tensor(), unbroadcast(where(cond, g[0], zero), c.input_shape(1)),
                             unbroadcast(where(cond, zero, g[0]), c.input_shape(2))};
         }});
}

}  // namespace tapeflow
