// Forward values and error messages of the index ops: gather, unsorted_segment_sum, one_hot,
// argmax/argmin (hand-computed expectations), and gradient values of gather / segment sums.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tape/tapeflow.h"
#include "tests/tape/array_ops_test_util.h"

namespace tf = tapeflow;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

using tf::testing::invalid;
using tf::testing::vals;
tf::Tensor i32(std::vector<std::int32_t> v, const tf::Shape& s) { return tf::constant(v, s); }
tf::Tensor i64(std::vector<std::int64_t> v, const tf::Shape& s) { return tf::constant(v, s); }
// [[0, 1, 2], [3, 4, 5], [6, 7, 8]] as float32.
tf::Tensor m33() { return tf::reshape(tf::range(0, 9, 1, tf::DType::kFloat32), tf::Shape{3, 3}); }

TEST(IndexOpsGather, RowsWithDuplicates) {
  tf::Tensor y = tf::gather(m33(), i32({2, 0, 2}, {3}));
  EXPECT_EQ(y.shape(), (tf::Shape{3, 3}));
  EXPECT_THAT(vals(y), ElementsAre(6, 7, 8, 0, 1, 2, 6, 7, 8));
}

TEST(IndexOpsGather, AxisOneAndNegativeAxisInt64Indices) {
  tf::Tensor y = tf::gather(m33(), i64({1, 1, 0, 2}, {2, 2}), 1);
  EXPECT_EQ(y.shape(), (tf::Shape{3, 2, 2}));
  EXPECT_THAT(vals(y), ElementsAre(1, 1, 0, 2, 4, 4, 3, 5, 7, 7, 6, 8));
  EXPECT_THAT(vals(tf::gather(m33(), i64({2}, {1}), -1)), ElementsAre(2, 5, 8));
  // A scalar index drops the axis.
  tf::Tensor s = tf::gather(m33(), i32({1}, {}), 0);
  EXPECT_EQ(s.shape(), (tf::Shape{3}));
  EXPECT_THAT(vals(s), ElementsAre(3, 4, 5));
}

TEST(IndexOpsGather, IntAndBoolParams) {
  tf::Tensor p = tf::constant<std::int64_t>({10, 20, 30}, {3});
  EXPECT_THAT(tf::gather(p, i32({2, 1}, {2})).to_vector<std::int64_t>(), ElementsAre(30, 20));
  tf::Tensor b = tf::constant<bool>({true, false}, {2});
  EXPECT_THAT(tf::gather(b, i32({1, 0, 1}, {3})).to_vector<int>(), ElementsAre(0, 1, 0));
}

TEST(IndexOpsGather, Errors) {
  EXPECT_THAT(
      [] {
        tf::gather(m33(), i32({0, 7}, {2}));
      },
      invalid(AllOf(HasSubstr("gather"), HasSubstr("index 7"), HasSubstr("[0, 3)"), HasSubstr("[3, 3]"))));
  EXPECT_THAT([] { tf::gather(m33(), i64({-1}, {1}), 1); },
              invalid(AllOf(HasSubstr("gather: index -1 out of range [0, 3)"), HasSubstr("axis 1"))));
  EXPECT_THAT([] { tf::gather(m33(), tf::Tensor({0.0})); },
              invalid(AllOf(HasSubstr("gather"), HasSubstr("int32 or int64"), HasSubstr("[1] float32"))));
  EXPECT_THAT([] { tf::gather(tf::scalar(1.0), i32({0}, {1})); },
              invalid(AllOf(HasSubstr("gather"), HasSubstr("rank >= 1"))));
  EXPECT_THAT([] { tf::gather(m33(), i32({0}, {1}), 2); },
              invalid(AllOf(HasSubstr("gather"), HasSubstr("axis 2"), HasSubstr("[3, 3] float32"))));
}

TEST(IndexOpsSegmentSum, ValuesEmptyAndNegativeSegments) {
  tf::Tensor data = m33();
  tf::Tensor y = tf::unsorted_segment_sum(data, i32({2, 0, 2}, {3}), 4);
  EXPECT_EQ(y.shape(), (tf::Shape{4, 3}));
  EXPECT_THAT(vals(y), ElementsAre(3, 4, 5, 0, 0, 0, 6, 8, 10, 0, 0, 0));
  tf::Tensor yn = tf::unsorted_segment_sum(tf::Tensor({1, 2, 3}), i64({-1, 0, 0}, {3}), 2);
  EXPECT_THAT(vals(yn), ElementsAre(5, 0));
  tf::Tensor y2 = tf::unsorted_segment_sum(m33(), i32({1, 0, 0, 1, 1, 1, 0, 0, 0}, {3, 3}), 2);
  EXPECT_EQ(y2.shape(), (tf::Shape{2}));
  EXPECT_THAT(vals(y2), ElementsAre(1 + 2 + 6 + 7 + 8, 0 + 3 + 4 + 5));
  tf::Tensor yi = tf::unsorted_segment_sum(tf::constant<std::int32_t>({4, 5}, {2}), i32({0, 0}, {2}), 1);
  EXPECT_THAT(yi.to_vector<int>(), ElementsAre(9));
}

TEST(IndexOpsSegmentSum, Errors) {
  EXPECT_THAT(
      [] {
        tf::unsorted_segment_sum(m33(), i32({0, 1}, {2}), 2);
      },
      invalid(AllOf(HasSubstr("unsorted_segment_sum"), HasSubstr("[2] int32"), HasSubstr("[3, 3] float32"))));
  EXPECT_THAT(
      [] {
        tf::unsorted_segment_sum(m33(), i32({0, 1, 5}, {3}), 2);
      },
      invalid(AllOf(HasSubstr("unsorted_segment_sum"), HasSubstr("segment id 5"), HasSubstr("[0, 2)"))));
  EXPECT_THAT(
      [] {
        tf::unsorted_segment_sum(m33(), i32({0, 1, 0}, {3}), -1);
      },
      invalid(AllOf(HasSubstr("unsorted_segment_sum"), HasSubstr("(-1)"))));
  EXPECT_THAT(
      [] {
        tf::unsorted_segment_sum(m33(), tf::Tensor({0, 1, 0}), 2);
      },
      invalid(AllOf(HasSubstr("unsorted_segment_sum"), HasSubstr("int32 or int64"))));
  EXPECT_THAT([] { tf::unsorted_segment_sum(tf::constant<bool>({true}, {1}), i32({0}, {1}), 1); },
              invalid(AllOf(HasSubstr("unsorted_segment_sum"), HasSubstr("bool"))));
}

TEST(IndexOpsOneHot, ValuesAndDtypes) {
  tf::Tensor y = tf::one_hot(i32({0, 2, -1, 5}, {4}), 3);
  EXPECT_EQ(y.shape(), (tf::Shape{4, 3}));
  EXPECT_EQ(y.dtype(), tf::DType::kFloat32);
  EXPECT_THAT(vals(y), ElementsAre(1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0));
  tf::Tensor yi = tf::one_hot(i64({1, 0}, {2, 1}), 2, 5, -1, tf::DType::kInt32);
  EXPECT_EQ(yi.shape(), (tf::Shape{2, 1, 2}));
  EXPECT_THAT(yi.to_vector<int>(), ElementsAre(-1, 5, 5, -1));
  tf::Tensor yb = tf::one_hot(i32({1}, {1}), 3, 1, 0, tf::DType::kBool);
  EXPECT_THAT(yb.to_vector<int>(), ElementsAre(0, 1, 0));
  tf::Tensor yd = tf::one_hot(i32({0}, {}), 2, 0.5, 0.25, tf::DType::kFloat64);
  EXPECT_THAT(vals(yd), ElementsAre(0.5, 0.25));
}

TEST(IndexOpsOneHot, ErrorsAndNoGradient) {
  EXPECT_THAT([] { tf::one_hot(i32({0}, {1}), -2); }, invalid(AllOf(HasSubstr("one_hot"), HasSubstr("-2"))));
  EXPECT_THAT([] { tf::one_hot(tf::Tensor({1.0}), 2); },
              invalid(AllOf(HasSubstr("one_hot"), HasSubstr("[1] float32"))));
  EXPECT_FALSE(tf::OpRegistry::global().get("OneHot").gradient);
}

TEST(IndexOpsArg, MaxMinWithTiesAndAxes) {
  tf::Tensor x = tf::Tensor({{1, 5, 5}, {7, 0, 7}});
  tf::Tensor a0 = tf::argmax(x);
  EXPECT_EQ(a0.dtype(), tf::DType::kInt64);
  EXPECT_THAT(a0.to_vector<std::int64_t>(), ElementsAre(1, 0, 1));
  EXPECT_THAT(tf::argmax(x, 1).to_vector<std::int64_t>(), ElementsAre(1, 0));  // first of the tie
  EXPECT_THAT(tf::argmin(x, -1).to_vector<std::int64_t>(), ElementsAre(0, 1));
  tf::Tensor xi = tf::constant<std::int32_t>({3, -2, 9, -2}, {4});
  EXPECT_EQ(tf::argmin(xi).item(), 1.0);
  EXPECT_EQ(tf::argmax(xi).item(), 2.0);
  EXPECT_EQ(tf::argmax(xi).shape(), tf::Shape{});
  tf::Tensor x3 = tf::reshape(tf::range(0, 24, 1, tf::DType::kFloat64), tf::Shape{2, 3, 4});
  tf::Tensor a1 = tf::argmax(-x3, 1);
  EXPECT_EQ(a1.shape(), (tf::Shape{2, 4}));
  EXPECT_THAT(a1.to_vector<std::int64_t>(), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_THAT(tf::argmax(x3, 1).to_vector<std::int64_t>(), ElementsAre(2, 2, 2, 2, 2, 2, 2, 2));
}

TEST(IndexOpsArg, NanIsTheExtreme) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  tf::Tensor x = tf::constant<double>({1, nan, 3, nan}, {4});
  EXPECT_EQ(tf::argmax(x).item(), 1.0);
  EXPECT_EQ(tf::argmin(x).item(), 1.0);
}

TEST(IndexOpsArg, Errors) {
  EXPECT_THAT([] { tf::argmax(tf::scalar(1.0)); }, invalid(AllOf(HasSubstr("argmax"), HasSubstr("[] float32"))));
  EXPECT_THAT([] { tf::argmin(m33(), 2); },
              invalid(AllOf(HasSubstr("argmin"), HasSubstr("axis 2"), HasSubstr("[3, 3]"))));
  EXPECT_THAT([] { tf::argmax(tf::zeros({2, 0}), 1); }, invalid(AllOf(HasSubstr("argmax"), HasSubstr("[2, 0]"))));
  EXPECT_THAT([] { tf::argmax(tf::constant<bool>({true}, {1})); },
              invalid(AllOf(HasSubstr("argmax"), HasSubstr("bool"))));
  EXPECT_FALSE(tf::OpRegistry::global().get("ArgMax").gradient);
  EXPECT_FALSE(tf::OpRegistry::global().get("ArgMin").gradient);
}

TEST(IndexOpsGradient, GatherDuplicatesAddUpAndIndicesGetNone) {
  tf::Tensor params = m33();
  tf::Tensor idx = i32({2, 0, 2}, {3});
  tf::GradientTape tape({.persistent = true});
  tape.watch(params);
  tf::Tensor y = tf::gather(params, idx) * tf::Tensor({1, 2, 3});
  auto g = tape.gradient(y, params);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->shape(), (tf::Shape{3, 3}));
  EXPECT_THAT(vals(*g), ElementsAre(1, 2, 3, 0, 0, 0, 2, 4, 6));
  EXPECT_FALSE(tape.gradient(y, idx));
}

TEST(IndexOpsGradient, GatherAxisOne) {
  tf::Tensor params = m33();
  tf::GradientTape tape;
  tape.watch(params);
  tf::Tensor y = tf::gather(params, i64({2, 2, 1}, {3}), 1);
  auto g = tape.gradient(y, params);
  ASSERT_TRUE(g);
  EXPECT_THAT(vals(*g), ElementsAre(0, 1, 2, 0, 1, 2, 0, 1, 2));
}

TEST(IndexOpsGradient, SegmentSumNegativeIdsGetZero) {
  tf::Tensor data = tf::Tensor({{1, 2}, {3, 4}, {5, 6}});
  tf::GradientTape tape;
  tape.watch(data);
  tf::Tensor y = tf::unsorted_segment_sum(data, i32({1, -1, 0}, {3}), 2) * tf::Tensor({{10, 20}, {30, 40}});
  auto g = tape.gradient(y, data);
  ASSERT_TRUE(g);
  EXPECT_THAT(vals(*g), ElementsAre(30, 40, 0, 0, 10, 20));
}

}  // namespace
