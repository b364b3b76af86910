// BatchNormalization: hand-computed training output and moving statistics, inference mode, the
// frozen-layer rule, weights, float64 gradient checks (fused and composed paths), errors.
#include "layers/batch_normalization.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using tf::layers::BatchNormalization;
using tf::layers::BatchNormalizationOptions;
using tf::testing::all_close;

TEST(BatchNormalization, WeightsNamesShapesOrder) {
  BatchNormalization bn;
  bn(tf::ones({4, 3}));
  auto v = bn.variables();
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].name(), bn.name() + "/gamma:0");
  EXPECT_EQ(v[1].name(), bn.name() + "/beta:0");
  EXPECT_EQ(v[2].name(), bn.name() + "/moving_mean:0");
  EXPECT_EQ(v[3].name(), bn.name() + "/moving_variance:0");
  EXPECT_EQ(bn.trainable_variables().size(), 2u);
  EXPECT_EQ(bn.non_trainable_variables().size(), 2u);
  EXPECT_EQ(bn.count_params(), 12);
  EXPECT_EQ(bn.name().rfind("batch_normalization", 0), 0u);
  BatchNormalization plain({.center = false, .scale = false});
  plain(tf::ones({2, 5}));
  EXPECT_EQ(plain.variables().size(), 2u);
  EXPECT_THROW(plain.gamma(), std::logic_error);
}

TEST(BatchNormalization, TrainingOutputAndMovingStatsHandComputed) {
  BatchNormalization bn;
  tf::Tensor x = {{1.0, 2.0}, {3.0, 6.0}};
  tf::Tensor y = bn(x, /*training=*/true);
  // mean [2, 4], biased var [1, 4], eps 1e-3.
  const double a = 1 / std::sqrt(1.001), b = 2 / std::sqrt(4.001);
  EXPECT_TRUE(all_close(y, tf::Tensor{{-a, -b}, {a, b}}, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(bn.moving_mean().value(), tf::Tensor{0.02, 0.04}, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(bn.moving_variance().value(), tf::Tensor{1.0, 1.03}, 1e-6, 1e-7));
  // A second call keeps averaging: mm = 0.02·0.99 + 2·0.01.
  bn(x, true);
  EXPECT_NEAR(bn.moving_mean().value().at({0}), 0.02 * 0.99 + 0.02, 1e-7);
  EXPECT_NEAR(bn.moving_variance().value().at({1}), 1.03 * 0.99 + 0.04, 1e-6);
}

TEST(BatchNormalization, GammaBetaAndRank3Training) {
  BatchNormalization bn({.momentum = 0.5});
  tf::Tensor x = tf::reshape(tf::range(0, 12, 1, tf::DType::kFloat32), std::vector<std::int64_t>{2, 3, 2});
  bn(x, false);
  bn.gamma().assign(tf::Tensor{2.0, 3.0});
  bn.beta().assign(tf::Tensor{0.5, -1.0});
  tf::Tensor y = bn(x, true);
  // Column 0 holds 0,2,4,6,8,10: mean 5, var 35/3; column 1 = column 0 + 1.
  const double inv = 1 / std::sqrt(35.0 / 3 + 1e-3);
  auto yv = y.to_vector<double>();
  auto xv = x.to_vector<double>();
  for (int i = 0; i < 12; ++i) {
    int c = i % 2;
    double want = (xv[i] - (5.0 + c)) * inv * (c ? 3.0 : 2.0) + (c ? -1.0 : 0.5);
    EXPECT_NEAR(yv[i], want, 1e-5) << i;
  }
  EXPECT_NEAR(bn.moving_mean().value().at({1}), 3.0, 1e-6);
  EXPECT_NEAR(bn.moving_variance().value().at({0}), 0.5 + 35.0 / 6, 1e-5);
}

TEST(BatchNormalization, InferenceUsesMovingStatistics) {
  BatchNormalization bn({.epsilon = 0.01});
  tf::Tensor x = {{1.0, -2.0}, {4.0, 0.5}};
  bn(x, false);
  bn.moving_mean().assign(tf::Tensor{1.0, 2.0});
  bn.moving_variance().assign(tf::Tensor{4.0, 0.25});
  bn.gamma().assign(tf::Tensor{2.0, 1.0});
  bn.beta().assign(tf::Tensor{0.0, 1.0});
  tf::Tensor y = bn(x);
  const double s0 = 2 / std::sqrt(4.01), s1 = 1 / std::sqrt(0.26);
  EXPECT_TRUE(all_close(y, tf::Tensor{{0.0, -4 * s1 + 1}, {3 * s0, -1.5 * s1 + 1}}, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(bn.moving_mean().value(), tf::Tensor{1.0, 2.0}));  // unchanged
  // Gradients still reach gamma and beta in inference mode.
  tf::GradientTape tape;
  tf::Tensor l = tf::reduce_sum(bn(x));
  auto g = tape.gradient(l, bn.trainable_variables());
  ASSERT_TRUE(g[0] && g[1]);
  EXPECT_TRUE(all_close(*g[1], tf::Tensor{2.0, 2.0}));
}

TEST(BatchNormalization, FrozenLayerRunsInInferenceModeEvenWhenTraining) {
  BatchNormalization bn;
  tf::Tensor x = {{1.0, 2.0}, {3.0, 6.0}};
  bn(x, false);
  bn.set_trainable(false);
  tf::Tensor y = bn(x, /*training=*/true);
  EXPECT_TRUE(all_close(y, x / std::sqrt(1.001), 1e-6, 1e-6));  // moving stats 0 / 1
  EXPECT_TRUE(all_close(bn.moving_mean().value(), tf::Tensor{0.0, 0.0}));
  EXPECT_TRUE(all_close(bn.moving_variance().value(), tf::Tensor{1.0, 1.0}));
  EXPECT_TRUE(bn.trainable_variables().empty());
  EXPECT_EQ(bn.non_trainable_variables().size(), 4u);
}

namespace {
// BatchNormalization in training mode written with plain ops: the reference for the fused kernel.
tf::Tensor reference_bn(const tf::Tensor& x, const tf::Tensor& gamma, const tf::Tensor& beta, double eps) {
  tf::Tensor mean = tf::reduce_mean(x, 0, true);
  tf::Tensor d = x - mean;
  tf::Tensor var = tf::reduce_mean(tf::square(d), 0, true);
  return d / tf::sqrt(var + eps) * gamma + beta;
}
}  // namespace

TEST(BatchNormalization, Float64GradcheckFusedPathFirstAndSecondOrder) {
  BatchNormalization bn({.dtype = tf::DType::kFloat64});
  tf::Tensor x = tf::testing::random_f64({5, 3}, 11, -2, 2);
  bn(x, false);
  bn.gamma().assign(tf::testing::random_f64({3}, 12, 0.5, 1.5));
  bn.beta().assign(tf::testing::random_f64({3}, 13));
  auto f = [&](const std::vector<tf::Tensor>& in) { return bn(in[0], true); };
  EXPECT_TRUE(tf::testing::gradcheck(f, {x}));
  EXPECT_TRUE(tf::testing::gradgradcheck(f, {x}));
  // Gradients w.r.t. x, gamma, beta equal those of the op-by-op reference.
  tf::Tensor w = tf::testing::random_f64({5, 3}, 14);
  std::vector<std::optional<tf::Tensor>> fused, ref;
  {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor l = tf::reduce_sum(bn(x, true) * w);
    fused = tape.gradient(l, std::vector<tf::Source>{x, bn.gamma(), bn.beta()});
  }
  {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor l = tf::reduce_sum(reference_bn(x, bn.gamma(), bn.beta(), 1e-3) * w);
    ref = tape.gradient(l, std::vector<tf::Source>{x, bn.gamma(), bn.beta()});
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(fused[i] && ref[i]);
    EXPECT_TRUE(all_close(*fused[i], *ref[i], 1e-9, 1e-10)) << i;
  }
  EXPECT_TRUE(all_close(bn(x, true), reference_bn(x, bn.gamma().value(), bn.beta().value(), 1e-3), 1e-12, 1e-12));
}

TEST(BatchNormalization, Float64GradcheckComposedPathOtherAxis) {
  BatchNormalization bn({.axis = 1, .dtype = tf::DType::kFloat64});
  tf::Tensor x = tf::testing::random_f64({3, 2, 4}, 21, -2, 2);
  bn(x, false);
  EXPECT_EQ(bn.gamma().shape(), tf::Shape({2}));
  bn.gamma().assign(tf::convert(tf::Tensor{0.7, 1.3}, tf::DType::kFloat64));
  auto f = [&](const std::vector<tf::Tensor>& in) { return bn(in[0], true); };
  EXPECT_TRUE(tf::testing::gradcheck(f, {x}));
  // Axis 1 equals the fused last-axis path on the transposed input.
  BatchNormalization last({.dtype = tf::DType::kFloat64});
  tf::Tensor xt = tf::transpose(x, {0, 2, 1});
  last(xt, false);
  last.gamma().assign(tf::convert(tf::Tensor{0.7, 1.3}, tf::DType::kFloat64));
  EXPECT_TRUE(all_close(tf::transpose(bn(x, true), {0, 2, 1}), last(xt, true), 1e-12, 1e-12));
  BatchNormalization fresh({.axis = 1, .dtype = tf::DType::kFloat64});
  fresh(x, true);
  EXPECT_TRUE(all_close(fresh.moving_variance().value(), last.moving_variance().value(), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(fresh.moving_mean().value(), last.moving_mean().value(), 1e-12, 1e-12));
}

TEST(BatchNormalization, Float32LargeBatchMatchesReference) {
  BatchNormalization bn;
  tf::Tensor x = tf::convert(tf::testing::random_f64({300, 200}, 5, -3, 5), tf::DType::kFloat32);
  tf::Tensor y = bn(x, true);
  EXPECT_TRUE(all_close(y, reference_bn(x, tf::ones({200}), tf::zeros({200}), 1e-3), 1e-4, 1e-5));
}

TEST(BatchNormalization, Errors) {
  EXPECT_THROW(BatchNormalization({.momentum = 1.5}), std::invalid_argument);
  EXPECT_THROW(BatchNormalization({.epsilon = 0}), std::invalid_argument);
  BatchNormalization bad_axis({.axis = 2});
  EXPECT_THROW(bad_axis(tf::ones({2, 3})), std::invalid_argument);
  BatchNormalization bn;
  bn(tf::ones({2, 3}));
  try {
    bn(tf::ones({2, 3, 1}), true);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr(bn.name()));
    EXPECT_THAT(e.what(), testing::HasSubstr("[2, 3, 1]"));
  }
  EXPECT_THROW(bn(tf::ones({2, 4})), std::invalid_argument);
  BatchNormalization unbuilt;
  EXPECT_THROW(unbuilt.moving_mean(), std::logic_error);
}
