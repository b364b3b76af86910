// SGD, Adam, AdamW: Keras's examples and multi-step trajectories against the formulas in double.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "optimizers/optimizers.h"
#include "tests/optimizers/optimizer_test_util.h"

namespace tf = tapeflow;
using namespace tf::optimizers;
using tf::testing::Vec;

namespace {
void expect_trajectories_near(const std::vector<Vec>& got, const std::vector<Vec>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t s = 0; s < got.size(); ++s)
    for (std::size_t i = 0; i < got[s].size(); ++i)
      EXPECT_NEAR(got[s][i], want[s][i], tol * (1 + std::abs(want[s][i]))) << "step " << s << " element " << i;
}
const Vec kW0 = {1.0, -2.0, 0.5, 3.0, -0.25};
}  // namespace

TEST(Adam, KerasSingleStepExample) {
  // keras/src/optimizers/adam_test.py: lr 0.5, vars [1,2,3,4], grads [1,6,7,2] -> [0.5,1.5,2.5,3.5].
  Adam opt({.learning_rate = 0.5});
  tf::Variable x(tf::Tensor{1.0, 2.0, 3.0, 4.0});
  opt.apply_gradients({tf::Tensor{1.0, 6.0, 7.0, 2.0}}, {x});
  auto v = x.value().to_vector<float>();
  std::vector<float> want = {0.5f, 1.5f, 2.5f, 3.5f};
  std::vector<double> g = {1, 6, 7, 2}, w = {1, 2, 3, 4};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(v[i], want[i], 1e-4);  // Keras's test tolerance (epsilon shifts it by ~1.6e-6)
    double exact = w[i] - 0.5 * std::sqrt(0.001) / 0.1 * 0.1 * g[i] / (std::sqrt(0.001) * g[i] + 1e-7);
    EXPECT_NEAR(v[i], exact, 1e-6);
  }
  EXPECT_EQ(opt.iterations(), 1);
}

void adam_reference(double lr, double b1, double b2, double eps, bool amsgrad, double wd, std::vector<Vec>* out,
                    int steps, const Vec& w0 = kW0) {
  Vec m(w0.size()), v(w0.size()), vh(w0.size());
  *out = tf::testing::run_reference(w0, steps, [&](Vec& w, const Vec& g, int t) {
    double a = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] -= w[i] * wd * lr;
      m[i] += (g[i] - m[i]) * (1 - b1);
      v[i] += (g[i] * g[i] - v[i]) * (1 - b2);
      vh[i] = std::max(vh[i], v[i]);
      w[i] -= a * m[i] / (std::sqrt(amsgrad ? vh[i] : v[i]) + eps);
    }
  });
}

TEST(Adam, TrajectoryMatchesFormulaFloat64AndFloat32) {
  std::vector<Vec> want;
  adam_reference(0.1, 0.9, 0.999, 1e-7, false, 0.0, &want, 6);
  Adam a64({.learning_rate = 0.1});
  expect_trajectories_near(tf::testing::run_optimizer(a64, kW0, 6), want, 1e-12);
  Adam a32({.learning_rate = 0.1});
  expect_trajectories_near(tf::testing::run_optimizer(a32, kW0, 6, tf::DType::kFloat32), want, 2e-5);
}

TEST(Adam, AmsgradTrajectory) {
  std::vector<Vec> want;
  adam_reference(0.05, 0.8, 0.99, 1e-3, true, 0.0, &want, 8);
  Adam opt({.learning_rate = 0.05, .beta_1 = 0.8, .beta_2 = 0.99, .epsilon = 1e-3, .amsgrad = true});
  expect_trajectories_near(tf::testing::run_optimizer(opt, kW0, 8), want, 1e-12);
}

TEST(Adam, VectorLanesAndTailMatchFormula) {
  // 37 elements: whole SIMD packets (8 floats / 4 doubles) plus a scalar tail, with and without AMSGrad.
  Vec w0(37);
  for (std::size_t i = 0; i < w0.size(); ++i) w0[i] = std::sin(1.0 + double(i));
  for (bool amsgrad : {false, true}) {
    SCOPED_TRACE(amsgrad ? "amsgrad" : "plain");
    std::vector<Vec> want;
    adam_reference(0.05, 0.8, 0.99, 1e-3, amsgrad, 0.0, &want, 5, w0);
    Adam a64({.learning_rate = 0.05, .beta_1 = 0.8, .beta_2 = 0.99, .epsilon = 1e-3, .amsgrad = amsgrad});
    expect_trajectories_near(tf::testing::run_optimizer(a64, w0, 5), want, 1e-12);
    Adam a32({.learning_rate = 0.05, .beta_1 = 0.8, .beta_2 = 0.99, .epsilon = 1e-3, .amsgrad = amsgrad});
    expect_trajectories_near(tf::testing::run_optimizer(a32, w0, 5, tf::DType::kFloat32), want, 2e-5);
  }
}

TEST(AdamW, DecayBeforeAdamStep) {
  std::vector<Vec> want;
  adam_reference(0.1, 0.9, 0.999, 1e-7, false, 0.04, &want, 5);
  AdamW opt({.learning_rate = 0.1, .weight_decay = 0.04});
  expect_trajectories_near(tf::testing::run_optimizer(opt, kW0, 5), want, 1e-12);
  EXPECT_EQ(AdamW().config().weight_decay, 0.004);
  EXPECT_EQ(AdamW().name(), "AdamW");
}

TEST(Adam, SlotsNamedAndInspectable) {
  Adam opt({.amsgrad = true});
  tf::Variable w(tf::Tensor{1.0, 2.0}, {.name = "dense/kernel:0"});
  opt.apply_gradients({tf::Tensor{0.5, -1.0}}, {w});
  auto vars = opt.variables();
  ASSERT_EQ(vars.size(), 4u);
  EXPECT_EQ(vars[0].name(), "Adam/iterations:0");
  EXPECT_EQ(vars[1].name(), "Adam/dense/kernel/m:0");
  EXPECT_EQ(vars[2].name(), "Adam/dense/kernel/v:0");
  EXPECT_EQ(vars[3].name(), "Adam/dense/kernel/vhat:0");
  EXPECT_NEAR(opt.get_slot(w, "m").value().at({1}), -0.1, 1e-7);
  EXPECT_NEAR(opt.get_slot(w, "v").value().at({0}), 0.00025, 1e-9);
  EXPECT_EQ(opt.slot_names(w), (std::vector<std::string>{"m", "v", "vhat"}));
  EXPECT_THROW(opt.get_slot(tf::Variable(1.0), "m"), std::invalid_argument);
}

// Keras 3's slot names (keras/src/optimizers/adam.py: momentums, velocities, velocity_hats) find
// the same Variables as the stored TF-Keras 2 names.
TEST(Adam, GetSlotAcceptsKeras3Names) {
  Adam opt({.amsgrad = true});
  tf::Variable w(tf::Tensor{1.0, 2.0}, {.name = "dense/kernel:0"});
  opt.apply_gradients({tf::Tensor{0.5, -1.0}}, {w});
  EXPECT_TRUE(opt.get_slot(w, "momentum").same_as(opt.get_slot(w, "m")));
  EXPECT_TRUE(opt.get_slot(w, "velocity").same_as(opt.get_slot(w, "v")));
  EXPECT_TRUE(opt.get_slot(w, "velocity_hat").same_as(opt.get_slot(w, "vhat")));
  try {
    opt.get_slot(w, "rms");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has no slot 'rms' (slots: m (momentum), v (velocity), vhat (velocity_hat))"),
              std::string::npos)
        << e.what();
  }
}

TEST(SGD, PlainMomentumNesterov) {
  for (double mu : {0.0, 0.9}) {
    for (bool nesterov : {false, true}) {
      Vec m(kW0.size());
      auto want = tf::testing::run_reference(kW0, 6, [&](Vec& w, const Vec& g, int) {
        for (std::size_t i = 0; i < w.size(); ++i) {
          if (mu == 0) {
            w[i] -= 0.05 * g[i];
            continue;
          }
          m[i] = mu * m[i] - 0.05 * g[i];
          w[i] += nesterov ? mu * m[i] - 0.05 * g[i] : m[i];
        }
      });
      SGD opt({.learning_rate = 0.05, .momentum = mu, .nesterov = nesterov});
      expect_trajectories_near(tf::testing::run_optimizer(opt, kW0, 6), want, 1e-12);
      EXPECT_EQ(opt.variables().size(), mu == 0 ? 1u : 2u);
    }
  }
  EXPECT_EQ(SGD().current_learning_rate(), 0.01);
}

TEST(SGD, LargeVariableParallelUpdateFloat32) {
  const std::int64_t n = 100000;
  SGD opt({.learning_rate = 0.5, .momentum = 0.5});
  tf::Variable w(tf::ones({n}));
  tf::Tensor g = tf::fill({n}, 2.0);
  opt.apply_gradients({g}, {w});
  opt.apply_gradients({g}, {w});
  // m1 = -1, w1 = 0; m2 = -0.5 - 1 = -1.5, w2 = -1.5
  auto v = w.value().to_vector<float>();
  for (std::int64_t i = 0; i < n; i += 997) ASSERT_EQ(v[i], -1.5f);
  EXPECT_EQ(v[n - 1], -1.5f);
}

TEST(Optimizer, ApplyGradientsErrorsAndSkips) {
  SGD opt({.learning_rate = 1.0});
  tf::Variable a(tf::Tensor{1.0, 2.0}, {.name = "a:0"}), b(tf::Tensor{{1.0, 2.0}}, {.name = "b:0"});
  try {
    opt.apply_gradients({tf::Tensor{1.0, 2.0, 3.0}}, {a});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("'a:0'"));
    EXPECT_THAT(e.what(), testing::HasSubstr("[3]"));
    EXPECT_THAT(e.what(), testing::HasSubstr("[2]"));
  }
  EXPECT_THROW(opt.apply_gradients({tf::Tensor{1.0, 2.0}}, {a, b}), std::invalid_argument);
  EXPECT_THROW(opt.apply_gradients(std::vector<std::optional<tf::Tensor>>{std::nullopt}, {a}), std::invalid_argument);
  EXPECT_THROW(opt.apply_gradients({tf::convert(tf::Tensor{1.0, 2.0}, tf::DType::kFloat64)}, {a}),
               std::invalid_argument);
  tf::Variable i(tf::constant(std::vector<std::int32_t>{1}, tf::Shape{1}));
  EXPECT_THROW(opt.apply_gradients({tf::constant(std::vector<std::int32_t>{1}, tf::Shape{1})}, {i}),
               std::invalid_argument);
  EXPECT_EQ(opt.iterations(), 0);
  // An absent gradient skips its variable.
  opt.apply_gradients(std::vector<std::optional<tf::Tensor>>{std::nullopt, tf::Tensor{{1.0, 1.0}}}, {a, b});
  EXPECT_EQ(a.value().to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(b.value().to_vector<float>(), (std::vector<float>{0.0f, 1.0f}));
  EXPECT_EQ(opt.iterations(), 1);
  EXPECT_THROW(SGD({.momentum = 1.5}), std::invalid_argument);
  EXPECT_THROW(Adam({.beta_1 = 1.0}), std::invalid_argument);
  EXPECT_THROW(Adam({.epsilon = -1}), std::invalid_argument);
  EXPECT_THROW(AdamW({.weight_decay = -1}), std::invalid_argument);
}

TEST(Adam, TrajectoryWithCosineDecaySchedule) {
  // lr at step s (0-based iterations) = CosineDecay(0.2, 4, alpha 0.1); t = s + 1 in the bias correction.
  Vec m(kW0.size()), v(kW0.size());
  auto want = tf::testing::run_reference(kW0, 6, [&](Vec& w, const Vec& g, int t) {
    const double s = std::min(t - 1, 4) / 4.0;
    const double lr = 0.2 * (0.9 * 0.5 * (1 + std::cos(std::numbers::pi * s)) + 0.1);
    const double a = lr * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    for (std::size_t i = 0; i < w.size(); ++i) {
      m[i] += (g[i] - m[i]) * 0.1;
      v[i] += (g[i] * g[i] - v[i]) * 0.001;
      w[i] -= a * m[i] / (std::sqrt(v[i]) + 1e-7);
    }
  });
  Adam opt({.learning_rate = CosineDecay(0.2, 4, 0.1)});
  expect_trajectories_near(tf::testing::run_optimizer(opt, kW0, 6), want, 1e-12);
  EXPECT_NEAR(opt.current_learning_rate(), 0.02, 1e-15);
}
