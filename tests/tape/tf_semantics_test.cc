// TensorFlow's semantics where C++ overloading would otherwise decide: C++ number operands of
// integer tensors, true division and floordiv, and the axis argument of reductions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tape/tapeflow.h"

namespace tf = tapeflow;

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

tf::Tensor i32(std::vector<std::int32_t> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return tf::constant(v, tf::Shape{n});
}
tf::Tensor i64(std::vector<std::int64_t> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return tf::constant(v, tf::Shape{n});
}

// tf.constant(1) + 0.5 and tf.Variable(3) * 2.5 raise (TypeError: Cannot convert 0.5 to EagerTensor
// of dtype int32) instead of truncating the float to 0 / 2.
TEST(IntegerOperands, FloatingPointValueWithIntegerTensorThrows) {
  EXPECT_THAT([] { return tf::Tensor(1) + 0.5; },
              ThrowsMessage<std::invalid_argument>(
                  HasSubstr("add: cannot convert the floating-point value 0.5 to the tensor's dtype int32")));
  tf::Variable v(tf::Tensor(3));
  EXPECT_THAT([&] { return v * 2.5; },
              ThrowsMessage<std::invalid_argument>(HasSubstr("multiply: cannot convert the floating-point value 2.5")));
  EXPECT_THAT([] { return 2.5 / tf::Tensor(3); }, ThrowsMessage<std::invalid_argument>(HasSubstr("divide:")));
  EXPECT_THAT([] { return i64({1, 2}) - 1.0; },
              ThrowsMessage<std::invalid_argument>(HasSubstr("subtract: cannot convert the floating-point value 1 to "
                                                             "the tensor's dtype int64")));
  EXPECT_THROW(tf::pow(i32({2}), 0.5), std::invalid_argument);
}

// Python ints join any tensor: converted to its dtype.
TEST(IntegerOperands, IntegerLiteralsConvertToTheTensorsDtype) {
  tf::Tensor a = tf::Tensor(3) * 2;
  EXPECT_EQ(a.dtype(), tf::DType::kInt32);
  EXPECT_EQ(a.item(), 6);
  tf::Tensor b = tf::Tensor(1.5) * 2;
  EXPECT_EQ(b.dtype(), tf::DType::kFloat32);
  EXPECT_EQ(b.item(), 3.0);
  tf::Tensor c = std::int64_t{10} - i64({1, 2});
  EXPECT_THAT(c.to_vector<std::int64_t>(), ElementsAre(9, 8));
  tf::Tensor d = tf::Tensor(2.0) + 1.5;  // floats are unchanged
  EXPECT_EQ(d.item(), 3.5);
  EXPECT_THAT([] { return tf::Tensor(1) + std::int64_t{3000000000}; },
              ThrowsMessage<std::invalid_argument>(HasSubstr("add: the integer 3000000000 is out of range for an int32")));
}

// tf.Variable(3) / 2 == 1.5 (tf.math.divide / truediv: int32 and int64 -> float64).
TEST(Divide, IntegersAreTrueDivisionToFloat64) {
  tf::Variable v(tf::Tensor(3));
  tf::Tensor q = v / 2;
  EXPECT_EQ(q.dtype(), tf::DType::kFloat64);
  EXPECT_EQ(q.item(), 1.5);
  tf::Tensor r = tf::divide(i64({7, -7, 1}), i64({2, 2, 0}));
  EXPECT_EQ(r.dtype(), tf::DType::kFloat64);
  const auto rv = r.to_vector<double>();
  EXPECT_EQ(rv[0], 3.5);
  EXPECT_EQ(rv[1], -3.5);
  EXPECT_EQ(rv[2], std::numeric_limits<double>::infinity());  // float division by zero, as TF
  EXPECT_EQ(tf::divide(tf::Tensor(1.0), tf::Tensor(4.0)).dtype(), tf::DType::kFloat32);
  EXPECT_THROW(tf::divide(i32({1}), i64({1})), std::invalid_argument);  // dtypes must match
}

// tf.math.floordiv / Python's //: rounds toward -inf.
TEST(FloorDiv, IntegersRoundTowardMinusInfinity) {
  tf::Tensor q = tf::floordiv(i32({7, -7, 7, -7, 6}), i32({2, 2, -2, -2, 3}));
  EXPECT_EQ(q.dtype(), tf::DType::kInt32);
  EXPECT_THAT(q.to_vector<std::int32_t>(), ElementsAre(3, -4, -4, 3, 2));
  tf::Tensor b = tf::floordiv(i64({-9, 9}), i64({4}));  // broadcasting
  EXPECT_THAT(b.to_vector<std::int64_t>(), ElementsAre(-3, 2));
  const std::int32_t lo = std::numeric_limits<std::int32_t>::min();
  EXPECT_THAT(tf::floordiv(i32({lo}), i32({-1})).to_vector<std::int32_t>(), ElementsAre(lo));  // wraps, no trap
}

TEST(FloorDiv, FloatsAreFloorOfTheQuotient) {
  tf::Tensor x = tf::constant(std::vector<double>{7.5, -7.5, 1.0}, tf::Shape{3});
  tf::Tensor y = tf::constant(std::vector<double>{2.0, 2.0, 0.0}, tf::Shape{3});
  tf::Tensor q = tf::floordiv(x, y);
  EXPECT_EQ(q.dtype(), tf::DType::kFloat64);
  EXPECT_THAT(q.to_vector<double>(), ElementsAre(3.0, -4.0, std::numeric_limits<double>::infinity()));
}

TEST(FloorDiv, ErrorsAndNoGradient) {
  EXPECT_THAT([] { return tf::floordiv(i32({1, 2}), i32({1, 0})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("floordiv: integer division by zero")));
  EXPECT_THAT([] { return tf::floordiv(i32({1}), i64({1})); }, ThrowsMessage<std::invalid_argument>(HasSubstr("floordiv")));
  EXPECT_THAT([] { return tf::floordiv(tf::cast(i32({1}), tf::DType::kBool), tf::cast(i32({1}), tf::DType::kBool)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("floordiv")));
  // TF registers no gradient for FloorDiv: the result does not depend on x for the tape.
  tf::Variable x(tf::Tensor(5.0));
  tf::GradientTape tape;
  tf::Tensor y = tf::floordiv(x, tf::Tensor(2.0));
  EXPECT_EQ(y.item(), 2.0);
  EXPECT_FALSE(tape.gradient(y, x).has_value());
}

// reduce_*(x, std::nullopt, true) is TF's axis=None, keepdims=True; an empty axis list is axis=[]
// (nothing reduced). Before, {} silently picked the int overload: axis 0.
TEST(ReduceAxes, AllAxesKeepDimsAndEmptyList) {
  tf::Tensor x = tf::constant(std::vector<double>{1, 2, 3, 4, 5, 6}, tf::Shape{2, 3});
  tf::Tensor all = tf::reduce_sum(x, std::nullopt, true);
  EXPECT_EQ(all.shape(), (tf::Shape{1, 1}));
  EXPECT_EQ(all.item(), 21.0);
  EXPECT_EQ(tf::reduce_mean(x, std::nullopt, true).item(), 3.5);
  EXPECT_EQ(tf::reduce_max(x, std::nullopt, true).shape(), (tf::Shape{1, 1}));
  EXPECT_EQ(tf::reduce_min(x, std::nullopt, false).shape(), tf::Shape{});
  tf::Tensor none = tf::reduce_sum(x, {}, true);
  EXPECT_EQ(none.shape(), (tf::Shape{2, 3}));
  EXPECT_THAT(none.to_vector<double>(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(tf::reduce_max(x, {}, false).shape(), (tf::Shape{2, 3}));
  // Integer axes of any type still pick one axis.
  EXPECT_EQ(tf::reduce_sum(x, std::int64_t{-1}).shape(), tf::Shape{2});
  EXPECT_EQ(tf::reduce_sum(x, 0u, true).shape(), (tf::Shape{1, 3}));
  // The all-axes reduction with keepdims is differentiable like the others.
  tf::Variable v(x);
  tf::GradientTape tape;
  tf::Tensor s = tf::reduce_sum(tf::square(v), std::nullopt, true);
  auto g = tape.gradient(s, v);
  ASSERT_TRUE(g.has_value());
  EXPECT_THAT(g->to_vector<double>(), ElementsAre(2, 4, 6, 8, 10, 12));
}

}  // namespace
