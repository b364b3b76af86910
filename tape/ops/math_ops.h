// Element-wise math ops: arithmetic with NumPy broadcasting, unary math, activations, comparisons.
//
// Shapes:   binary ops broadcast their inputs (NumPy rules); unary ops keep the shape.
// DTypes:   binary inputs must have the same dtype. A C++ operand joins a tensor as TF converts a
//           Python number: an integer (int, std::int64_t, ...) becomes a scalar of the tensor's
//           dtype; a double becomes a scalar of a float tensor's dtype, and with an integer or bool
//           tensor it is an error (TF raises rather than truncate: Tensor(1) + 0.5 throws).
//           Transcendental functions need float32 or float64. Comparisons return bool and have no
//           gradient.
// Errors:   std::invalid_argument naming the op and both shapes/dtypes for incompatible broadcast or
//           mismatched dtypes, for integer inputs to float-only functions, for a double operand
//           with an integer tensor (names the value and dtype) and for an integer operand out of
//           an int32 tensor's range.
// Gradient: TensorFlow's conventions: maximum/minimum ties send the whole gradient to the first
//           input; round, sign, comparisons and stop_gradient pass no gradient; every gradient is
//           written with these ops, so it can be differentiated again.
// Ref:      tf.math, tf.nn (activations), tensorflow/python/ops/math_grad.py, nn_grad.py
#pragma once

#include <concepts>
#include <cstdint>

#include "tape/core/tensor.h"

namespace tapeflow {

// Element-wise a + b.
// Shapes:   a, b broadcast (NumPy rules) -> the broadcast shape.
// DTypes:   any numeric dtype; a and b must match.
// Errors:   std::invalid_argument "add: ..." naming both shapes/dtypes when they do not broadcast/match.
// Gradient: (g, g), each summed back to its input's shape.
// Ref:      tf.math.add
Tensor add(const Tensor& a, const Tensor& b);
// Element-wise a - b. As add. Gradient: (g, -g). Ref: tf.math.subtract
Tensor subtract(const Tensor& a, const Tensor& b);
// Element-wise a * b. As add. Gradient: (g·b, g·a). Ref: tf.math.multiply
Tensor multiply(const Tensor& a, const Tensor& b);
// Element-wise true division a / b. As add. Integer inputs are divided as float64 and give float64
// (TF's truediv of int32/int64: Variable(3) / 2 == 1.5); floats keep their dtype (x / 0 is ±inf or nan).
// Gradient: da = g / b, db = -g a / b². Ref: tf.math.divide, tf.math.truediv
Tensor divide(const Tensor& a, const Tensor& b);
// Element-wise floor(a / b), Python's //: integers round toward -inf (-7 // 2 == -4) and keep their
// dtype; floats give floor(a / b). As add. No gradient (as TF).
// Errors:   std::invalid_argument for an integer division by zero (TF: "Integer division by zero").
// Ref:      tf.math.floordiv
Tensor floordiv(const Tensor& a, const Tensor& b);
// a ** b element-wise. As add (integer powers with a negative exponent give 0 unless a is 1).
// Gradient: da = g·b·a^(b-1); db = g·a^b·log(a) where a > 0, else 0 (TF). Ref: tf.math.pow
Tensor pow(const Tensor& a, const Tensor& b);
// a ** exponent element-wise, the exponent a scalar of a's dtype. As pow(a, b).
// Errors:   std::invalid_argument for an integer or bool a (a double operand needs a float tensor).
Tensor pow(const Tensor& a, double exponent);
// Element-wise max(a, b). As add. Gradient: g to a where a >= b (ties go to the first input, TF's
// _MaximumMinimumGrad), else to b. Ref: tf.math.maximum
Tensor maximum(const Tensor& a, const Tensor& b);
// Element-wise min(a, b). As add. Gradient: g to a where a <= b (ties: first input), else to b.
// Ref: tf.math.minimum
Tensor minimum(const Tensor& a, const Tensor& b);
// Element-wise max(min(x, hi), lo). Gradient passes where lo <= x <= hi (at the bounds too), as TF.
Tensor clip_by_value(const Tensor& x, const Tensor& lo, const Tensor& hi);
// clip_by_value with scalar bounds of x's dtype. Ref: tf.clip_by_value
Tensor clip_by_value(const Tensor& x, double lo, double hi);

// Unary functions. Shapes: x's. DTypes: numeric for negative, square, abs, sign; float32/float64 for
// the rest. Errors: std::invalid_argument naming the function for an unsupported dtype.
// -x. Gradient: -g. Ref: tf.math.negative
Tensor negative(const Tensor& x);
// x². Gradient: 2·x·g. Ref: tf.math.square
Tensor square(const Tensor& x);
// √x. Gradient: g / (2·y). Ref: tf.math.sqrt
Tensor sqrt(const Tensor& x);
// 1/√x. Gradient: -g·y³ / 2. Ref: tf.math.rsqrt
Tensor rsqrt(const Tensor& x);
// 1/x. Gradient: -g·y². Ref: tf.math.reciprocal
Tensor reciprocal(const Tensor& x);
// eˣ. Gradient: g·y. Ref: tf.math.exp
Tensor exp(const Tensor& x);
// ln x. Gradient: g / x. Ref: tf.math.log
Tensor log(const Tensor& x);
// |x|. Gradient: g·sign(x) (0 at 0). Ref: tf.math.abs
Tensor abs(const Tensor& x);
// -1, 0 or 1. Gradient: zero (TF). Ref: tf.math.sign
Tensor sign(const Tensor& x);
// sin x. Gradient: g·cos x. Ref: tf.math.sin
Tensor sin(const Tensor& x);
// cos x. Gradient: -g·sin x. Ref: tf.math.cos
Tensor cos(const Tensor& x);
// Facts: float32 uses TF's CPU kernel's rational approximation (< 5 ulp with FMA, < 7 without: see
//        kernels::tanh; exactly ±1 for |x| >= 8); float64 is std::tanh. Gradient: tanh_grad(y, g).
Tensor tanh(const Tensor& x);
// 1 / (1 + e⁻ˣ), computed without overflow. Gradient: g·y·(1 - y). Ref: tf.math.sigmoid
Tensor sigmoid(const Tensor& x);
// Gradient: relu_grad(g, y).
Tensor relu(const Tensor& x);
// x if x > 0 else alpha·(exp(x) - 1), alpha = 1 (tf.nn.elu). Gradient: elu_grad(g, y).
Tensor elu(const Tensor& x);
// x if x > 0 else alpha·x (tf.nn.leaky_relu, default alpha 0.2). alpha is applied in x's dtype,
// as TF's kernel does. Gradient: leaky_relu_grad(g, x, alpha).
Tensor leaky_relu(const Tensor& x, double alpha = 0.2);

// The activation-gradient ops (TF's raw TanhGrad, ReluGrad, EluGrad, LeakyReluGrad): one fused pass
// each instead of a chain of selects and products. Differentiable again (second order):
//   tanh_grad:       d/dy = -2·g·dy·y, d/ddy = tanh_grad(y, g)  (TF's _TanhGradGrad)
//   relu_grad:       d/ddy = relu_grad(g, features); features get no gradient (a constant mask)
//   elu_grad:        d/ddy = elu_grad(g, y), d/dy = g·dy where y < 0, else 0  (TF's _EluGradGrad)
//   leaky_relu_grad: d/ddy = leaky_relu_grad(g, features, alpha); features get none
// Shapes:   both inputs have the same shape (no broadcasting); the result has it too.
// DTypes:   float32, float64; both inputs the same.
// Errors:   std::invalid_argument naming the op and both inputs when shapes or dtypes differ.
// Ref:      tf.raw_ops.TanhGrad, tf.raw_ops.ReluGrad, tf.raw_ops.EluGrad, tf.raw_ops.LeakyReluGrad
// dy·(1 - y²) from the tanh output y.
Tensor tanh_grad(const Tensor& y, const Tensor& dy);
// dy where features > 0, else 0 (features: the relu input or output).
Tensor relu_grad(const Tensor& dy, const Tensor& features);
// dy·(y + 1) where y < 0, else dy (y: the elu output).
Tensor elu_grad(const Tensor& dy, const Tensor& y);
// dy where features > 0, else alpha·dy (features: the leaky_relu input).
Tensor leaky_relu_grad(const Tensor& dy, const Tensor& features, double alpha = 0.2);
// log(1 + exp(x)), computed stably. Gradient: g·sigmoid(x). Ref: tf.math.softplus
Tensor softplus(const Tensor& x);
// Round half to even (tf.math.round). No gradient.
Tensor round(const Tensor& x);
// Returns x; gradient passes through. Ref: tf.identity
Tensor identity(const Tensor& x);
// Returns x; no gradient flows through it. Ref: tf.stop_gradient
Tensor stop_gradient(const Tensor& x);
// Converts to dtype. Gradient flows between float dtypes only. Ref: tf.cast
Tensor cast(const Tensor& x, DType dtype);
// Element-wise cond ? a : b with broadcasting. cond must be bool. Ref: tf.where
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Comparisons: element-wise a == b, a != b, a < b, a <= b, a > b, a >= b.
// Shapes:   broadcast. DTypes: inputs of one dtype (numeric; equal/not_equal also bool) -> bool.
// Errors:   as add. Gradient: none. Ref: tf.math.equal, not_equal, less, less_equal, greater, greater_equal
Tensor equal(const Tensor& a, const Tensor& b);
// Element-wise a != b -> bool (see above). Ref: tf.math.not_equal
Tensor not_equal(const Tensor& a, const Tensor& b);
// Element-wise a < b -> bool (see above). Ref: tf.math.less
Tensor less(const Tensor& a, const Tensor& b);
// Element-wise a <= b -> bool (see above). Ref: tf.math.less_equal
Tensor less_equal(const Tensor& a, const Tensor& b);
// Element-wise a > b -> bool (see above). Ref: tf.math.greater
Tensor greater(const Tensor& a, const Tensor& b);
// Element-wise a >= b -> bool (see above). Ref: tf.math.greater_equal
Tensor greater_equal(const Tensor& a, const Tensor& b);
// Logic on bool tensors: a && b, a || b (broadcast), !x.
// Errors:   std::invalid_argument "logical_and: expected bool inputs, got D". Gradient: none.
// Ref:      tf.math.logical_and, logical_or, logical_not
Tensor logical_and(const Tensor& a, const Tensor& b);
// Element-wise a || b of bool tensors (broadcast). Ref: tf.math.logical_or
Tensor logical_or(const Tensor& a, const Tensor& b);
// Element-wise !x of a bool tensor. Ref: tf.math.logical_not
Tensor logical_not(const Tensor& x);

// A scalar of t's dtype holding v (how double operands join tensors).
Tensor scalar_like(const Tensor& t, double v);

// Operators: add, subtract, multiply, divide, negative; a double operand becomes scalar_like.
Tensor operator+(const Tensor& a, const Tensor& b);
// subtract(a, b).
Tensor operator-(const Tensor& a, const Tensor& b);
// multiply(a, b).
Tensor operator*(const Tensor& a, const Tensor& b);
// divide(a, b) (true division: integers give float64).
Tensor operator/(const Tensor& a, const Tensor& b);
// negative(x).
Tensor operator-(const Tensor& x);
// a + b with b a scalar of a's dtype. Errors: std::invalid_argument for an integer or bool a.
Tensor operator+(const Tensor& a, double b);
// a - b with b a scalar of a's dtype. Errors: std::invalid_argument for an integer or bool a.
Tensor operator-(const Tensor& a, double b);
// a * b with b a scalar of a's dtype. Errors: std::invalid_argument for an integer or bool a.
Tensor operator*(const Tensor& a, double b);
// a / b with b a scalar of a's dtype. Errors: std::invalid_argument for an integer or bool a.
Tensor operator/(const Tensor& a, double b);
// a + b with a a scalar of b's dtype. Errors: std::invalid_argument for an integer or bool b.
Tensor operator+(double a, const Tensor& b);
// a - b with a a scalar of b's dtype. Errors: std::invalid_argument for an integer or bool b.
Tensor operator-(double a, const Tensor& b);
// a * b with a a scalar of b's dtype. Errors: std::invalid_argument for an integer or bool b.
Tensor operator*(double a, const Tensor& b);
// a / b with a a scalar of b's dtype. Errors: std::invalid_argument for an integer or bool b.
Tensor operator/(double a, const Tensor& b);

namespace math_internal {
// An integer C++ operand as a scalar of t's dtype. Errors: out of int32 range, bool tensor.
Tensor integer_operand(const char* op, const Tensor& t, std::int64_t v);
}  // namespace math_internal

// Integer C++ operands (exact matches, so they do not go through the double overloads): converted
// to the tensor's dtype, whatever it is (TF converts a Python int to a float tensor's dtype too).
template <class I>
concept IntegerOperand = std::integral<I> && !std::same_as<I, bool>;
// a + b with the integer b a scalar of a's dtype (add).
// Errors: std::invalid_argument for a bool a, or b outside an int32 a's range.
template <IntegerOperand I>
Tensor operator+(const Tensor& a, I b) { return a + math_internal::integer_operand("add", a, b); }
// a - b with the integer b a scalar of a's dtype (subtract).
// Errors: std::invalid_argument for a bool a, or b outside an int32 a's range.
template <IntegerOperand I>
Tensor operator-(const Tensor& a, I b) { return a - math_internal::integer_operand("subtract", a, b); }
// a * b with the integer b a scalar of a's dtype (multiply).
// Errors: std::invalid_argument for a bool a, or b outside an int32 a's range.
template <IntegerOperand I>
Tensor operator*(const Tensor& a, I b) { return a * math_internal::integer_operand("multiply", a, b); }
// a / b with the integer b a scalar of a's dtype (divide).
// Errors: std::invalid_argument for a bool a, or b outside an int32 a's range.
template <IntegerOperand I>
Tensor operator/(const Tensor& a, I b) { return a / math_internal::integer_operand("divide", a, b); }
// a + b with the integer a a scalar of b's dtype (add).
// Errors: std::invalid_argument for a bool b, or a outside an int32 b's range.
template <IntegerOperand I>
Tensor operator+(I a, const Tensor& b) { return math_internal::integer_operand("add", b, a) + b; }
// a - b with the integer a a scalar of b's dtype (subtract).
// Errors: std::invalid_argument for a bool b, or a outside an int32 b's range.
template <IntegerOperand I>
Tensor operator-(I a, const Tensor& b) { return math_internal::integer_operand("subtract", b, a) - b; }
// a * b with the integer a a scalar of b's dtype (multiply).
// Errors: std::invalid_argument for a bool b, or a outside an int32 b's range.
template <IntegerOperand I>
Tensor operator*(I a, const Tensor& b) { return math_internal::integer_operand("multiply", b, a) * b; }
// a / b with the integer a a scalar of b's dtype (divide).
// Errors: std::invalid_argument for a bool b, or a outside an int32 b's range.
template <IntegerOperand I>
Tensor operator/(I a, const Tensor& b) { return math_internal::integer_operand("divide", b, a) / b; }

}  // namespace tapeflow
