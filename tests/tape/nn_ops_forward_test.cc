// nn ops: forward values against hand/NumPy-computed numbers, gradients at special points, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using tf::testing::all_close;

namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

tf::Tensor f64(std::vector<double> v, tf::Shape s) { return tf::constant<double>(v, s); }

TEST(Softmax, ForwardValues) {
  // NumPy: np.exp(x) / np.exp(x).sum() for x = [1, 2, 3]
  EXPECT_TRUE(all_close(tf::softmax(f64({1, 2, 3}, {3})),
                        f64({0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, {3}), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(tf::log_softmax(f64({1, 2, 3}, {3})),
                        f64({-2.4076059644443806, -1.4076059644443806, -0.4076059644443806}, {3}), 1e-12, 1e-12));
  // Axis 0 of [[1, 2], [3, 4]]: each column is softmax([a, a + 2]).
  const double lo = 1 / (1 + std::exp(2.0));
  EXPECT_TRUE(
      all_close(tf::softmax(f64({1, 2, 3, 4}, {2, 2}), 0), f64({lo, lo, 1 - lo, 1 - lo}, {2, 2}), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(tf::log_softmax(f64({1, 2, 3, 4}, {2, 2}), 0),
                        f64({std::log(lo), std::log(lo), std::log(1 - lo), std::log(1 - lo)}, {2, 2}), 1e-12, 1e-12));
  // Stable for large logits; float32 keeps its dtype.
  tf::Tensor big = tf::softmax(tf::Tensor{1000.0, 1000.0});
  EXPECT_EQ(big.dtype(), tf::DType::kFloat32);
  EXPECT_EQ(big.to_vector<float>(), (std::vector<float>{0.5f, 0.5f}));
}

TEST(Softmax, Errors) {
  EXPECT_THAT([] { tf::softmax(tf::scalar(1.0)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("softmax: logits must have rank >= 1")));
  EXPECT_THAT(
      [] {
        tf::log_softmax(tf::zeros({2, 3}), 2);
      },
      ThrowsMessage<std::invalid_argument>(HasSubstr("log_softmax")));
  EXPECT_THAT([] { tf::softmax(tf::zeros({2}, tf::DType::kInt32)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("softmax: expected a floating dtype, got int32")));
}

TEST(SparseSoftmaxXent, ForwardValues) {
  tf::Tensor logits = f64({1, 2, 3, 1, 1, 1}, {2, 3});
  tf::Tensor labels = tf::constant<std::int32_t>({2, 0}, {2});
  // logsumexp(1, 2, 3) - 3 and log(3).
  EXPECT_TRUE(all_close(tf::sparse_softmax_cross_entropy_with_logits(labels, logits),
                        f64({0.4076059644443806, 1.0986122886681098}, {2}), 1e-12, 1e-12));
  tf::Tensor l64 = tf::constant<std::int64_t>({2, 0}, {2});
  tf::Tensor loss32 = tf::sparse_softmax_cross_entropy_with_logits(l64, tf::convert(logits, tf::DType::kFloat32));
  EXPECT_EQ(loss32.dtype(), tf::DType::kFloat32);
  EXPECT_NEAR(loss32.to_vector<double>()[1], 1.0986122886681098, 1e-6);
}

TEST(SparseSoftmaxXent, GradientIsSoftmaxMinusOneHotTimesUpstream) {
  tf::Tensor logits = f64({1, 2, 3, 1, 1, 1}, {2, 3});
  tf::Tensor labels = tf::constant<std::int64_t>({2, 0}, {2});
  tf::GradientTape tape;
  tape.watch(logits);
  tf::Tensor loss = tf::sparse_softmax_cross_entropy_with_logits(labels, logits);
  tf::Tensor g = *tape.gradient(loss, logits, {.output_gradients = {f64({1.0, 2.0}, {2})}});
  const double t = 1.0 / 3.0;
  EXPECT_TRUE(all_close(
      g, f64({0.09003057317038046, 0.24472847105479767, 0.6652409557748219 - 1, 2 * (t - 1), 2 * t, 2 * t}, {2, 3}),
      1e-12, 1e-12));
}

TEST(SparseSoftmaxXent, Errors) {
  tf::Tensor logits = tf::zeros({2, 3});
  EXPECT_THAT(
      [&] {
        tf::sparse_softmax_cross_entropy_with_logits(tf::constant<std::int32_t>({0, 3}, {2}), logits);
      },
      ThrowsMessage<std::invalid_argument>(
          HasSubstr("sparse_softmax_cross_entropy_with_logits: label 3 at row 1 is outside the valid range [0, 3)")));
  EXPECT_THAT(
      [&] {
        tf::sparse_softmax_cross_entropy_with_logits(tf::constant<std::int64_t>({-1, 0}, {2}), logits);
      },
      ThrowsMessage<std::invalid_argument>(HasSubstr("label -1")));
  EXPECT_THAT([&] { tf::sparse_softmax_cross_entropy_with_logits(tf::zeros({2}), logits); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("labels must be int32 or int64, got [2] float32")));
  EXPECT_THAT(
      [&] {
        tf::sparse_softmax_cross_entropy_with_logits(tf::constant<std::int32_t>({0, 1, 2}, {3}), logits);
      },
      ThrowsMessage<std::invalid_argument>(HasSubstr("labels [3], logits [2, 3]")));
  EXPECT_THAT(
      [&] {
        tf::sparse_softmax_cross_entropy_with_logits(tf::constant<std::int32_t>({0, 1}, {2}), tf::zeros({2}));
      },
      ThrowsMessage<std::invalid_argument>(HasSubstr("labels [2], logits [2]")));
  EXPECT_THAT(
      [&] {
        tf::sparse_softmax_cross_entropy_with_logits(tf::constant<std::int32_t>({0, 1}, {2}),
                                                     tf::zeros({2, 3}, tf::DType::kInt32));
      },
      ThrowsMessage<std::invalid_argument>(HasSubstr("expected a floating dtype")));
}

TEST(SigmoidXent, ForwardValuesAndGradientAtZero) {
  tf::Tensor x = f64({-2, 0, 3}, {3});
  tf::Tensor z = f64({1, 0.5, 0}, {3});
  // max(x, 0) - x z + log(1 + exp(-|x|))
  EXPECT_TRUE(all_close(tf::sigmoid_cross_entropy_with_logits(z, x),
                        f64({2.1269280110429727, 0.6931471805599453, 3.048587351573742}, {3}), 1e-12, 1e-12));
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = tf::sigmoid_cross_entropy_with_logits(z, x);
  // sigmoid(x) - z, exact at x = 0.
  EXPECT_TRUE(all_close(*tape.gradient(y, x), f64({1 / (1 + std::exp(2.0)) - 1, 0.0, 1 / (1 + std::exp(-3.0))}, {3}),
                        1e-12, 1e-12));
  // Large logits do not overflow.
  EXPECT_NEAR(tf::sigmoid_cross_entropy_with_logits(tf::Tensor{0.0}, tf::Tensor{-1000.0}).to_vector<double>()[0], 0.0,
              1e-30);
}

TEST(SigmoidXent, Errors) {
  EXPECT_THAT([] { tf::sigmoid_cross_entropy_with_logits(tf::zeros({2}), tf::zeros({3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr(
                  "labels and logits must have the same shape and dtype: labels [2] float32, logits [3] float32")));
  EXPECT_THAT([] { tf::sigmoid_cross_entropy_with_logits(tf::zeros({2}, tf::DType::kFloat64), tf::zeros({2})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("sigmoid_cross_entropy_with_logits")));
  EXPECT_THAT(
      [] {
        tf::sigmoid_cross_entropy_with_logits(tf::zeros({2}, tf::DType::kInt32), tf::zeros({2}, tf::DType::kInt32));
      },
      ThrowsMessage<std::invalid_argument>(HasSubstr("expected float32 or float64, got [2] int32")));
}

TEST(Norm, ForwardValues) {
  EXPECT_DOUBLE_EQ(tf::norm(f64({3, 4}, {2})).item(), 5.0);
  tf::Tensor m = f64({3, 4, 6, 8}, {2, 2});
  EXPECT_TRUE(all_close(tf::norm(m, {1}), f64({5, 10}, {2})));
  EXPECT_TRUE(all_close(tf::norm(m, {-1}, true), f64({5, 10}, {2, 1})));
  EXPECT_TRUE(all_close(tf::norm(m, {0}), f64({std::sqrt(45.0), std::sqrt(80.0)}, {2})));
  EXPECT_DOUBLE_EQ(tf::norm(m).item(), std::sqrt(125.0));
  EXPECT_EQ(tf::norm(m, {0, 1}, true).shape(), (tf::Shape{1, 1}));
  EXPECT_FLOAT_EQ(tf::norm(tf::Tensor{{3.0, 4.0}}).item(), 5.0f);
}

TEST(Norm, ZeroInputGivesZeroValueAndZeroGradient) {
  tf::Tensor x = tf::zeros({3}, tf::DType::kFloat64);
  tf::Tensor rows = f64({0, 0, 3, 4}, {2, 2});
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tape.watch(rows);
  tf::Tensor n = tf::norm(x);
  tf::Tensor nr = tf::norm(rows, {1});
  EXPECT_EQ(n.item(), 0.0);
  EXPECT_EQ(tape.gradient(n, x)->to_vector<double>(), (std::vector<double>{0, 0, 0}));
  // The zero row gets 0; the other row x / |x|.
  EXPECT_TRUE(all_close(*tape.gradient(nr, rows), f64({0, 0, 0.6, 0.8}, {2, 2})));
}

TEST(Norm, Errors) {
  EXPECT_THAT([] { tf::norm(tf::zeros({2, 2}), {2}); }, ThrowsMessage<std::invalid_argument>(HasSubstr("norm")));
  EXPECT_THAT(
      [] {
        tf::norm(tf::zeros({2, 2}), {1, -1});
      },
      ThrowsMessage<std::invalid_argument>(HasSubstr("norm: axis -1 repeated for shape [2, 2]")));
  EXPECT_THAT([] { tf::norm(tf::zeros({2}, tf::DType::kInt64)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("norm: expected a floating dtype, got int64")));
}

TEST(ClipByNorm, BothSidesOfTheThresholdAndZero) {
  EXPECT_TRUE(all_close(tf::clip_by_norm(f64({3, 4}, {2}), 1.0), f64({0.6, 0.8}, {2})));
  EXPECT_TRUE(all_close(tf::clip_by_norm(f64({3, 4}, {2}), 10.0), f64({3, 4}, {2})));
  EXPECT_TRUE(all_close(tf::clip_by_norm(f64({3, 4, 0.3, 0.4}, {2, 2}), 1.0, {1}), f64({0.6, 0.8, 0.3, 0.4}, {2, 2})));
  EXPECT_FLOAT_EQ(tf::clip_by_norm(tf::Tensor(4.0), 0.5).item(), 0.5f);
  // The zero vector stays zero and its gradient is finite (TF: clip / clip = 1 per element).
  tf::Tensor z = tf::zeros({2}, tf::DType::kFloat64);
  tf::GradientTape tape;
  tape.watch(z);
  tf::Tensor c = tf::clip_by_norm(z, 1.0);
  EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{0, 0}));
  EXPECT_EQ(tape.gradient(c, z)->to_vector<double>(), (std::vector<double>{1, 1}));
}

TEST(ClipByNorm, Errors) {
  EXPECT_THAT([] { tf::clip_by_norm(tf::zeros({2}), 0.0); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("clip_by_norm: clip_norm must be > 0")));
  EXPECT_THAT([] { tf::clip_by_norm(tf::zeros({2}), -1.0); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("clip_by_norm: clip_norm must be > 0")));
  EXPECT_THAT([] { tf::clip_by_norm(tf::zeros({2}, tf::DType::kInt32), 1.0); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("clip_by_norm: expected float32 or float64")));
  EXPECT_THAT([] { tf::clip_by_norm(tf::zeros({2}), 1.0, {3}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("clip_by_norm")));
}

}  // namespace
