// Gradient clipping (clipnorm, global_clipnorm, clipvalue), learning-rate schedules evaluated at
// iterations, and apply_gradients never being recorded on tapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "optimizers/optimizers.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using namespace tf::optimizers;
using tf::testing::all_close;

TEST(Clipping, ClipnormPerGradient) {
  SGD opt({.learning_rate = 1.0, .clipnorm = 1.0});
  tf::Variable a(tf::Tensor{0.0, 0.0}), b(tf::Tensor{0.0});
  opt.apply_gradients({tf::Tensor{3.0, 4.0}, tf::Tensor{0.5}}, {a, b});
  EXPECT_TRUE(all_close(a.value(), tf::Tensor{-0.6, -0.8}, 1e-6, 1e-7));  // norm 5 -> 1
  EXPECT_TRUE(all_close(b.value(), tf::Tensor{-0.5}, 1e-6, 1e-7));        // under the limit
}

TEST(Clipping, GlobalClipnorm) {
  SGD opt({.learning_rate = 1.0, .global_clipnorm = 2.0});
  tf::Variable a(tf::Tensor{0.0, 0.0}), b(tf::Tensor{0.0, 0.0});
  opt.apply_gradients({tf::Tensor{3.0, 0.0}, tf::Tensor{0.0, 4.0}}, {a, b});  // global norm 5
  EXPECT_TRUE(all_close(a.value(), tf::Tensor{-1.2, 0.0}, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(b.value(), tf::Tensor{0.0, -1.6}, 1e-6, 1e-7));
  SGD small({.learning_rate = 1.0, .global_clipnorm = 10.0});
  small.apply_gradients({tf::Tensor{3.0, 0.0}}, {a});
  EXPECT_TRUE(all_close(a.value(), tf::Tensor{-4.2, 0.0}, 1e-6, 1e-7));
}

TEST(Clipping, ClipvalueAndAdamTrajectoryWithClipping) {
  SGD opt({.learning_rate = 1.0, .clipvalue = 0.5});
  tf::Variable a(tf::Tensor{0.0, 0.0, 0.0});
  opt.apply_gradients({tf::Tensor{2.0, -3.0, 0.25}}, {a});
  EXPECT_TRUE(all_close(a.value(), tf::Tensor{-0.5, 0.5, -0.25}));
  // Adam with clipnorm: the clipped gradient feeds the moments.
  Adam adam({.learning_rate = 0.1, .clipnorm = 0.5});
  tf::Variable w(tf::convert(tf::Tensor{1.0, 2.0}, tf::DType::kFloat64));
  double m[2] = {0, 0}, v[2] = {0, 0}, ref[2] = {1.0, 2.0};
  for (int t = 1; t <= 4; ++t) {
    double g[2] = {3 * ref[0], -4 * ref[1] + 1};
    double n = std::hypot(g[0], g[1]);
    if (n > 0.5) g[0] *= 0.5 / n, g[1] *= 0.5 / n;
    double alpha = 0.1 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    for (int i = 0; i < 2; ++i) {
      m[i] += (g[i] - m[i]) * 0.1;
      v[i] += (g[i] * g[i] - v[i]) * 0.001;
      ref[i] -= alpha * m[i] / (std::sqrt(v[i]) + 1e-7);
    }
    auto cur = w.value().to_vector<double>();
    adam.apply_gradients({tf::constant(std::vector<double>{3 * cur[0], -4 * cur[1] + 1}, tf::Shape{2})}, {w});
  }
  auto got = w.value().to_vector<double>();
  EXPECT_NEAR(got[0], ref[0], 1e-12);
  EXPECT_NEAR(got[1], ref[1], 1e-12);
}

TEST(Clipping, Errors) {
  EXPECT_THROW(SGD({.clipnorm = 1.0, .global_clipnorm = 1.0}), std::invalid_argument);
  EXPECT_THROW(SGD({.clipnorm = 0.0}), std::invalid_argument);
  EXPECT_THROW(Adam({.clipvalue = -1.0}), std::invalid_argument);
  EXPECT_THROW(RMSprop({.global_clipnorm = -2.0}), std::invalid_argument);
}

TEST(Schedules, KerasFormulasAtGivenSteps) {
  ExponentialDecay e(0.1, 10, 0.5);
  EXPECT_DOUBLE_EQ(e(0), 0.1);
  EXPECT_DOUBLE_EQ(e(5), 0.1 * std::pow(0.5, 0.5));
  EXPECT_DOUBLE_EQ(e(20), 0.025);
  ExponentialDecay s({.initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5, .staircase = true});
  EXPECT_DOUBLE_EQ(s(9), 0.1);
  EXPECT_DOUBLE_EQ(s(10), 0.05);
  EXPECT_DOUBLE_EQ(s(25), 0.025);
  CosineDecay c(1.0, 100, 0.1);
  EXPECT_DOUBLE_EQ(c(0), 1.0);
  EXPECT_NEAR(c(50), 0.9 * 0.5 + 0.1, 1e-15);
  EXPECT_NEAR(c(25), 0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4)) + 0.1, 1e-15);
  EXPECT_NEAR(c(100), 0.1, 1e-15);
  EXPECT_NEAR(c(1000), 0.1, 1e-15);
  PiecewiseConstantDecay p({100, 200}, {1.0, 0.5, 0.1});
  EXPECT_EQ(p(0), 1.0);
  EXPECT_EQ(p(100), 1.0);
  EXPECT_EQ(p(101), 0.5);
  EXPECT_EQ(p(200), 0.5);
  EXPECT_EQ(p(201), 0.1);
  EXPECT_THROW(PiecewiseConstantDecay({1, 2}, {1.0}), std::invalid_argument);
  EXPECT_THROW(PiecewiseConstantDecay({2, 1}, {1.0, 2.0, 3.0}), std::invalid_argument);
  EXPECT_THROW(ExponentialDecay(0.1, 0, 0.5), std::invalid_argument);
  EXPECT_THROW(CosineDecay(0.1, -1), std::invalid_argument);
  EXPECT_THROW(LearningRate(std::shared_ptr<CosineDecay>()), std::invalid_argument);
}

TEST(Schedules, OptimizerEvaluatesScheduleAtIterations) {
  SGD opt({.learning_rate = PiecewiseConstantDecay({1}, {1.0, 0.1})});
  EXPECT_TRUE(opt.learning_rate().is_schedule());
  tf::Variable w(tf::Tensor{0.0});
  std::vector<double> lrs;
  for (int i = 0; i < 4; ++i) {
    lrs.push_back(opt.current_learning_rate());
    opt.apply_gradients({tf::Tensor{1.0}}, {w});
  }
  EXPECT_EQ(lrs, (std::vector<double>{1.0, 1.0, 0.1, 0.1}));  // steps 0, 1 <= boundary 1
  EXPECT_NEAR(w.value().item(), -2.2, 1e-6);
  Adam ad({.learning_rate = std::make_shared<ExponentialDecay>(0.01, 1, 0.5)});
  ad.apply_gradients({tf::Tensor{1.0}}, {w});
  EXPECT_DOUBLE_EQ(ad.current_learning_rate(), 0.005);
  ad.set_learning_rate(0.3);
  EXPECT_EQ(ad.current_learning_rate(), 0.3);
}

TEST(Optimizer, UpdatesAreNotRecordedAndDoNotDisturbSavedValues) {
  tf::Variable w(tf::convert(tf::Tensor{1.0, 2.0}, tf::DType::kFloat64));
  SGD opt({.learning_rate = 0.5});
  tf::GradientTape tape({.persistent = true});
  tf::Tensor y = tf::reduce_sum(tf::square(w.read()));
  auto g = tape.gradient(y, w);
  ASSERT_TRUE(g);
  opt.apply_gradients({g}, {w});  // while the persistent tape is still recording
  EXPECT_TRUE(all_close(w.value(), tf::convert(tf::Tensor{0.0, 0.0}, tf::DType::kFloat64)));
  // The tape's saved read of w is untouched (copy-on-write), so its gradient is unchanged.
  auto g2 = tape.gradient(y, w);
  EXPECT_TRUE(all_close(*g2, *g));
  tf::Variable a(tf::Tensor{0.0});
  EXPECT_TRUE(tape.watched_variables().size() == 1u);
}

namespace {
// An optimizer that (wrongly) creates a slot outside build_slots.
class SlotOutsideBuild : public SGD {
 public:
  using SGD::SGD;

 protected:
  void update_step(const tf::Tensor& g, const tf::Variable& v, double lr) override {
    add_slot(tf::Variable(1.0), "late");
  }
};
}  // namespace

TEST(Optimizer, AddSlotOutsideBuildSlotsIsMisuse) {
  SlotOutsideBuild opt;
  tf::Variable w(tf::Tensor{1.0});
  EXPECT_THROW(opt.apply_gradients({tf::Tensor{1.0}}, {w}), std::logic_error);
  EXPECT_THROW(opt.slot_names(tf::Variable(2.0)), std::invalid_argument);
}
