// Element-wise math ops (math_ops.h): forward values against hand-computed numbers (arithmetic with
// broadcasting, unary math, activations and their fused gradient ops, selection, comparisons and
// logic), the documented conventions (maximum/minimum ties, clip_by_value at its bounds, round half
// to even, stable sigmoid/softplus), and every error path. The float64 gradient checks of the same
// ops: math_ops_gradcheck_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

#include "tape/tapeflow.h"

namespace tf = tapeflow;

namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using ::testing::ThrowsMessage;

tf::Tensor f64(std::vector<double> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return tf::constant(v, tf::Shape{n});
}
std::vector<double> values(const tf::Tensor& t) { return t.to_vector<double>(); }
std::vector<bool> bools(const tf::Tensor& t) {
  EXPECT_EQ(t.dtype(), tf::DType::kBool);
  std::vector<bool> out;
  for (int v : t.to_vector<int>()) out.push_back(v != 0);
  return out;
}

TEST(MathOps, ArithmeticBroadcasts) {
  const tf::Tensor a = tf::constant(std::vector<double>{1, 2, 3, 4, 5, 6}, tf::Shape{2, 3});
  const tf::Tensor b = f64({10, 20, 40});
  EXPECT_EQ(tf::add(a, b).shape(), (tf::Shape{2, 3}));
  EXPECT_THAT(values(tf::add(a, b)), ElementsAre(11, 22, 43, 14, 25, 46));
  EXPECT_THAT(values(tf::subtract(b, a)), ElementsAre(9, 18, 37, 6, 15, 34));
  EXPECT_THAT(values(tf::multiply(a, tf::scalar(2, tf::DType::kFloat64))), ElementsAre(2, 4, 6, 8, 10, 12));
  EXPECT_THAT(values(tf::divide(a, b)), ElementsAre(0.1, 0.1, 0.075, 0.4, 0.25, 0.15));
  const tf::Tensor col = tf::constant(std::vector<double>{1, 2}, tf::Shape{2, 1});
  EXPECT_EQ(tf::add(col, b).shape(), (tf::Shape{2, 3}));  // [2, 1] + [3] -> [2, 3]
  EXPECT_THAT(values(tf::pow(f64({2, 9, 4}), f64({3, 0.5, -1}))), Pointwise(DoubleNear(1e-15), std::vector<double>{8, 3, 0.25}));
  EXPECT_THAT(values(tf::pow(f64({2, 3}), 2.0)), ElementsAre(4, 9));
  // Integer powers stay integers; a negative exponent gives 0 unless the base is 1.
  const tf::Tensor ip = tf::pow(tf::constant(std::vector<std::int32_t>{2, 1, 3}, tf::Shape{3}),
                                tf::constant(std::vector<std::int32_t>{10, -2, -1}, tf::Shape{3}));
  EXPECT_EQ(ip.dtype(), tf::DType::kInt32);
  EXPECT_THAT(ip.to_vector<int>(), ElementsAre(1024, 1, 0));
  // Float division by zero follows IEEE (inf, nan), as TF's float kernels do.
  const std::vector<double> q = values(tf::divide(f64({1, -1, 0}), f64({0, 0, 0})));
  EXPECT_EQ(q[0], std::numeric_limits<double>::infinity());
  EXPECT_EQ(q[1], -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(q[2]));
}

TEST(MathOps, MaximumMinimumAndClipByValue) {
  EXPECT_THAT(values(tf::maximum(f64({1, 5, -2}), f64({3, 4, -2}))), ElementsAre(3, 5, -2));
  EXPECT_THAT(values(tf::minimum(f64({1, 5, -2}), f64({3, 4, -2}))), ElementsAre(1, 4, -2));
  const tf::Tensor x = f64({-2, -1, 0.5, 1, 3});
  EXPECT_THAT(values(tf::clip_by_value(x, -1.0, 1.0)), ElementsAre(-1, -1, 0.5, 1, 1));
  // The gradient passes inside [lo, hi], the bounds included (TF), and is 0 outside.
  tf::GradientTape tape;
  tape.watch(x);
  const tf::Tensor y = tf::clip_by_value(x, -1.0, 1.0);
  EXPECT_THAT(values(*tape.gradient(y, x)), ElementsAre(0, 1, 1, 1, 0));
}

// maximum / minimum send the whole gradient to the first input on ties (TF's >= / <=).
TEST(MathOps, MaximumMinimumSendTiesToTheFirstInput) {
  tf::Tensor a = tf::constant(std::vector<double>{1.0, 2.0}, tf::Shape{2});
  tf::Tensor b = tf::constant(std::vector<double>{1.0, 3.0}, tf::Shape{2});
  for (bool is_max : {true, false}) {
    tf::GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    tf::Tensor y = is_max ? tf::maximum(a, b) : tf::minimum(a, b);
    auto g = tape.gradient(y, {tf::Source(a), tf::Source(b)});
    EXPECT_EQ(g[0]->to_vector<double>(), (std::vector<double>{1, is_max ? 0.0 : 1.0})) << is_max;
    EXPECT_EQ(g[1]->to_vector<double>(), (std::vector<double>{0, is_max ? 1.0 : 0.0})) << is_max;
  }
}

TEST(MathOps, UnaryMath) {
  const tf::Tensor x = f64({-2, 0, 4});
  EXPECT_THAT(values(tf::negative(x)), ElementsAre(2, 0, -4));
  EXPECT_THAT(values(tf::square(x)), ElementsAre(4, 0, 16));
  EXPECT_THAT(values(tf::abs(x)), ElementsAre(2, 0, 4));
  EXPECT_THAT(values(tf::sign(x)), ElementsAre(-1, 0, 1));
  const tf::Tensor p = f64({0.25, 1, 4});
  EXPECT_THAT(values(tf::sqrt(p)), ElementsAre(0.5, 1, 2));
  EXPECT_THAT(values(tf::rsqrt(p)), ElementsAre(2, 1, 0.5));
  EXPECT_THAT(values(tf::reciprocal(p)), ElementsAre(4, 1, 0.25));
  EXPECT_THAT(values(tf::exp(f64({0, 1}))), Pointwise(DoubleNear(1e-15), std::vector<double>{1, std::exp(1.0)}));
  EXPECT_THAT(values(tf::log(f64({1, std::exp(2.0)}))), Pointwise(DoubleNear(1e-15), std::vector<double>{0, 2}));
  EXPECT_THAT(values(tf::sin(f64({0, std::numbers::pi / 2}))), Pointwise(DoubleNear(1e-15), std::vector<double>{0, 1}));
  EXPECT_THAT(values(tf::cos(f64({0, std::numbers::pi}))), Pointwise(DoubleNear(1e-15), std::vector<double>{1, -1}));
  // Integers: negative, square, abs and sign keep the dtype.
  const tf::Tensor n = tf::constant(std::vector<std::int64_t>{-3, 0, 5}, tf::Shape{3});
  EXPECT_EQ(tf::abs(n).dtype(), tf::DType::kInt64);
  EXPECT_THAT(tf::abs(n).to_vector<std::int64_t>(), ElementsAre(3, 0, 5));
  EXPECT_THAT(tf::sign(n).to_vector<std::int64_t>(), ElementsAre(-1, 0, 1));
  // round: half to even, as tf.math.round.
  EXPECT_THAT(values(tf::round(f64({0.5, 1.5, 2.5, -0.5, -1.5, 2.4}))), ElementsAre(0, 2, 2, 0, -2, 2));
}

TEST(MathOps, ActivationsAndStableForms) {
  EXPECT_THAT(values(tf::relu(f64({-1, 0, 2}))), ElementsAre(0, 0, 2));
  EXPECT_THAT(values(tf::elu(f64({-1, 0, 2}))), Pointwise(DoubleNear(1e-15), std::vector<double>{std::expm1(-1.0), 0, 2}));
  EXPECT_THAT(values(tf::leaky_relu(f64({-1, 0, 2}), 0.3)), ElementsAre(-0.3, 0, 2));
  EXPECT_EQ(tf::leaky_relu(tf::Tensor{-1.0}).item(), -0.2f);  // alpha applied in float32, as TF's kernel
  EXPECT_THAT(values(tf::tanh(f64({0, 0.5}))), Pointwise(DoubleNear(1e-15), std::vector<double>{0, std::tanh(0.5)}));
  EXPECT_EQ(tf::tanh(tf::Tensor{-9.0f, 8.0f, 20.0f}).to_vector<float>(), (std::vector<float>{-1, 1, 1}));  // |x| >= 8: ±1
  // sigmoid and softplus do not overflow at large |x|.
  EXPECT_THAT(values(tf::sigmoid(f64({0, -1000, 1000}))), ElementsAre(0.5, 0, 1));
  EXPECT_THAT(values(tf::softplus(f64({0, 1000, -1000}))), Pointwise(DoubleNear(1e-15), std::vector<double>{std::log(2.0), 1000, 0}));
  // The fused gradient ops: tanh_grad(y, dy) = dy (1 - y²); relu_grad / leaky_relu_grad mask dy.
  EXPECT_THAT(values(tf::tanh_grad(f64({0.5, -1}), f64({2, 3}))), ElementsAre(1.5, 0));
  EXPECT_THAT(values(tf::relu_grad(f64({2, 3, 4}), f64({-1, 0, 1}))), ElementsAre(0, 0, 4));
  // elu_grad(dy, y) = dy (y + 1) where y < 0 (the elu output), else dy; y = 0 takes dy, as TF's kernel.
  EXPECT_THAT(values(tf::elu_grad(f64({2, 3, 4}), f64({-0.5, 0, 1}))), ElementsAre(1, 3, 4));
  EXPECT_THAT(values(tf::leaky_relu_grad(f64({2, 3, 4}), f64({-1, 0, 1}), 0.5)), ElementsAre(1, 1.5, 4));
}

TEST(MathOps, SelectionCastsComparisonsAndLogic) {
  const tf::Tensor cond = tf::constant(std::vector<bool>{true, false, true}, tf::Shape{3});
  const tf::Tensor a = tf::constant(std::vector<double>{1, 2, 3, 4, 5, 6}, tf::Shape{2, 3});
  EXPECT_THAT(values(tf::where(cond, a, tf::scalar(0, tf::DType::kFloat64))), ElementsAre(1, 0, 3, 4, 0, 6));
  const tf::Tensor c = tf::cast(f64({2.7, -2.7, 0}), tf::DType::kInt32);
  EXPECT_EQ(c.dtype(), tf::DType::kInt32);
  EXPECT_THAT(c.to_vector<int>(), ElementsAre(2, -2, 0));  // truncation toward 0, as tf.cast
  EXPECT_THAT(bools(tf::cast(f64({2, 0}), tf::DType::kBool)), ElementsAre(true, false));
  EXPECT_THAT(values(tf::identity(a)), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(values(tf::stop_gradient(a)), ElementsAre(1, 2, 3, 4, 5, 6));
  const tf::Tensor u = f64({1, 2, 3}), v = f64({2, 2, 2});
  EXPECT_THAT(bools(tf::equal(u, v)), ElementsAre(false, true, false));
  EXPECT_THAT(bools(tf::not_equal(u, v)), ElementsAre(true, false, true));
  EXPECT_THAT(bools(tf::less(u, v)), ElementsAre(true, false, false));
  EXPECT_THAT(bools(tf::less_equal(u, v)), ElementsAre(true, true, false));
  EXPECT_THAT(bools(tf::greater(u, v)), ElementsAre(false, false, true));
  EXPECT_THAT(bools(tf::greater_equal(u, tf::scalar(2, tf::DType::kFloat64))), ElementsAre(false, true, true));
  const tf::Tensor p = tf::constant(std::vector<bool>{true, true, false, false}, tf::Shape{4});
  const tf::Tensor q = tf::constant(std::vector<bool>{true, false, true, false}, tf::Shape{4});
  EXPECT_THAT(bools(tf::logical_and(p, q)), ElementsAre(true, false, false, false));
  EXPECT_THAT(bools(tf::logical_or(p, q)), ElementsAre(true, true, true, false));
  EXPECT_THAT(bools(tf::logical_not(p)), ElementsAre(false, false, true, true));
  EXPECT_THAT(bools(tf::equal(p, q)), ElementsAre(true, false, false, true));  // equal also takes bool
}

TEST(MathOps, Errors) {
  const tf::Tensor x = tf::zeros({2, 3}), b = tf::constant(std::vector<bool>{true}, tf::Shape{1});
  EXPECT_THAT([&] { tf::subtract(x, tf::zeros({2})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("subtract: incompatible shapes for broadcasting: [2, 3] and [2]")));
  EXPECT_THAT([&] { tf::maximum(x, tf::zeros({2, 3}, tf::DType::kFloat64)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("maximum: dtypes differ: [2, 3] float32 and [2, 3] float64")));
  EXPECT_THAT([&] { tf::sqrt(tf::Tensor(4)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("sqrt: expected a floating dtype, got int32")));
  EXPECT_THAT([&] { tf::tanh(tf::Tensor(1)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("tanh: expected a floating dtype, got int32")));
  EXPECT_THAT([&] { tf::abs(b); }, ThrowsMessage<std::invalid_argument>(HasSubstr("abs: bool tensors are not supported")));
  EXPECT_THAT([&] { tf::less(b, b); }, ThrowsMessage<std::invalid_argument>(HasSubstr("less: bool tensors are not supported")));
  EXPECT_THAT([&] { tf::tanh_grad(x, tf::zeros({3, 2})); },
              ThrowsMessage<std::invalid_argument>(
                  HasSubstr("tanh_grad: inputs must have the same shape, got [2, 3] float32 and [3, 2] float32")));
  EXPECT_THAT([&] { tf::relu_grad(x, tf::zeros({2, 3}, tf::DType::kFloat64)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("relu_grad: dtypes differ")));
  EXPECT_THAT([&] { tf::elu_grad(x, tf::zeros({3, 2})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("elu_grad: inputs must have the same shape, got [2, 3] float32 and [3, 2] float32")));
  EXPECT_THAT([&] { tf::where(tf::ones({3}), x, x); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("where: condition must be bool, got [3] float32")));
  EXPECT_THAT([&] { tf::where(b, x, tf::zeros({4})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("where: incompatible shapes for broadcasting")));
  EXPECT_THAT([&] { tf::logical_and(b, tf::Tensor(1)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("logical_and: expected bool inputs, got int32")));
  EXPECT_THAT([&] { tf::logical_not(x); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("logical_not: expected bool input, got float32")));
  EXPECT_THAT([&] { (void)(b + 1); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("add: cannot combine a bool tensor with the integer 1")));
}

}  // namespace
