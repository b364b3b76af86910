// Reductions (reduce_sum / mean / max / min): forward values, keepdims and axis conventions, every
// error path, the tie convention of the max/min gradient, and the float64 gradient-check rows
// (first and second order; they also drive the vectorized-vs-loop batching test).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tape/tapeflow.h"
#include "tests/testing/gradcheck_table.h"

namespace tf = tapeflow;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using tf::testing::random_f64;

namespace {

std::function<std::vector<tf::Tensor>()> input(tf::Shape shape) {
  return [shape] { return std::vector<tf::Tensor>{random_f64(shape, 1)}; };
}

const tf::Shape k23{2, 3};

tf::testing::RegisterGradChecks rows({
    {"Sum", "axis 1 keepdims", [](const std::vector<tf::Tensor>& in) { return tf::reduce_sum(in[0] * in[0], 1, true); }, input(k23)},
    {"Sum", "all axes of [2, 3, 2]", [](const std::vector<tf::Tensor>& in) { return tf::reduce_sum(tf::exp(in[0])); }, input({2, 3, 2})},
    {"Mean", "all", [](const std::vector<tf::Tensor>& in) { return tf::reduce_mean(in[0] * in[0]); }, input(k23)},
    {"Mean", "axes {0, 2}", [](const std::vector<tf::Tensor>& in) { return tf::reduce_mean(tf::sin(in[0]), {0, 2}); }, input({2, 3, 2})},
    {"Max", "axis 0", [](const std::vector<tf::Tensor>& in) { return tf::reduce_max(in[0] * in[0], 0); }, input(k23)},
    {"Min", "axis -1", [](const std::vector<tf::Tensor>& in) { return tf::reduce_min(in[0] * in[0], -1); }, input(k23)},
});

TEST(ReductionOpsGradCheck, FirstAndSecondOrder) { tf::testing::run_gradcheck_cases({"Sum", "Mean", "Max", "Min"}); }

TEST(ReductionOps, ForwardValuesAndKeepdims) {
  tf::Tensor x{{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
  EXPECT_EQ(tf::reduce_sum(x).to_vector<float>(), (std::vector<float>{21}));
  EXPECT_EQ(tf::reduce_sum(x).shape(), tf::Shape{});
  EXPECT_EQ(tf::reduce_sum(x, 0).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(tf::reduce_sum(x, 1, true).shape(), (tf::Shape{2, 1}));
  EXPECT_EQ(tf::reduce_mean(x, -1).to_vector<float>(), (std::vector<float>{2, 5}));
  EXPECT_EQ(tf::reduce_max(x, 0).to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(tf::reduce_min(x, {0, 1}, true).shape(), (tf::Shape{1, 1}));
  EXPECT_EQ(tf::reduce_min(x).item(), 1.0);
  // Axes in any order and negative: the same reduction.
  EXPECT_EQ(tf::reduce_sum(x, {1, 0}).item(), tf::reduce_sum(x, {-1, -2}).item());
  // Integers reduce in their own dtype; the mean of an integer tensor truncates, as in TF.
  tf::Tensor n = tf::constant(std::vector<std::int32_t>{1, 2, 4}, tf::Shape{3});
  EXPECT_EQ(tf::reduce_sum(n).dtype(), tf::DType::kInt32);
  EXPECT_EQ(tf::reduce_mean(n).item(), 2.0);
  // The sum over an empty axis is 0, as in TF.
  EXPECT_EQ(tf::reduce_sum(tf::zeros(tf::Shape{0, 3}), 0).to_vector<float>(), (std::vector<float>{0, 0, 0}));
}

TEST(ReductionOps, Errors) {
  tf::Tensor x{{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
  EXPECT_THAT([&] { tf::reduce_sum(x, 2); }, ThrowsMessage<std::invalid_argument>(HasSubstr("Sum: axis 2 out of range for rank 2")));
  EXPECT_THAT([&] { tf::reduce_mean(x, {0, -2}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Mean: axis -2 repeated for shape [2, 3]")));
  EXPECT_THAT([&] { tf::reduce_max(tf::zeros(tf::Shape{0, 3}), 0); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("reduce_max: empty reduction of shape [0, 3]")));
  EXPECT_THAT([&] { tf::reduce_sum(tf::constant(std::vector<bool>{true}, tf::Shape{1})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("reduce_sum")));
}

// reduce_max / reduce_min split the gradient equally among tied extremes (TF's _MaxGrad).
TEST(ReductionOps, MaxGradientIsSplitAmongTies) {
  tf::Tensor x = tf::constant(std::vector<double>{1.0, 3.0, 3.0, 2.0, 0.5, 0.5}, tf::Shape{2, 3});
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor mx = tf::reduce_max(x, 1), mn = tf::reduce_min(x, 1);
  EXPECT_EQ(tape.gradient(mx, x)->to_vector<double>(), (std::vector<double>{0, 0.5, 0.5, 1, 0, 0}));
  EXPECT_EQ(tape.gradient(mn, x)->to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 0.5, 0.5}));
}

}  // namespace
