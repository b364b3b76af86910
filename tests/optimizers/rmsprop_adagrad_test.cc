// RMSprop (plain, momentum, centered) and Adagrad trajectories against the Keras 3 formulas in double.
#include <gtest/gtest.h>

#include <cmath>

#include "optimizers/optimizers.h"
#include "tests/optimizers/optimizer_test_util.h"

namespace tf = tapeflow;
using namespace tf::optimizers;
using tf::testing::Vec;

namespace {
const Vec kW0 = {0.3, -1.0, 2.0, 0.0};
void expect_near(const std::vector<Vec>& got, const std::vector<Vec>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t s = 0; s < got.size(); ++s)
    for (std::size_t i = 0; i < got[s].size(); ++i)
      EXPECT_NEAR(got[s][i], want[s][i], tol * (1 + std::abs(want[s][i]))) << "step " << s << " element " << i;
}
}  // namespace

TEST(RMSprop, TrajectoriesAllVariants) {
  for (double mu : {0.0, 0.5}) {
    for (bool centered : {false, true}) {
      const double lr = 0.01, rho = 0.8, eps = 1e-7;
      Vec rms(kW0.size()), mom(kW0.size()), mg(kW0.size());
      auto want = tf::testing::run_reference(kW0, 7, [&](Vec& w, const Vec& g, int) {
        for (std::size_t i = 0; i < w.size(); ++i) {
          rms[i] = rho * rms[i] + (1 - rho) * g[i] * g[i];
          double d = rms[i] + eps;
          if (centered) {
            mg[i] = rho * mg[i] + (1 - rho) * g[i];
            d = rms[i] - mg[i] * mg[i] + eps;
          }
          double inc = lr * g[i] / std::sqrt(d);
          if (mu > 0) {
            mom[i] = mu * mom[i] + inc;
            w[i] -= mom[i];
          } else {
            w[i] -= inc;
          }
        }
      });
      RMSprop opt({.learning_rate = lr, .rho = rho, .momentum = mu, .centered = centered});
      expect_near(tf::testing::run_optimizer(opt, kW0, 7), want, 1e-11);
      RMSprop opt32({.learning_rate = lr, .rho = rho, .momentum = mu, .centered = centered});
      expect_near(tf::testing::run_optimizer(opt32, kW0, 7, tf::DType::kFloat32), want, 1e-4);
      EXPECT_EQ(opt.variables().size(), 2u + (mu > 0) + centered);
    }
  }
  RMSprop d;
  EXPECT_EQ(d.options().rho, 0.9);
  EXPECT_EQ(d.options().epsilon, 1e-7);
  EXPECT_EQ(d.current_learning_rate(), 1e-3);
  EXPECT_THROW(RMSprop({.rho = 1.0}), std::invalid_argument);
  EXPECT_THROW(RMSprop({.momentum = -0.1}), std::invalid_argument);
  EXPECT_THROW(RMSprop({.epsilon = -1}), std::invalid_argument);
}

TEST(RMSprop, SlotNames) {
  RMSprop opt({.momentum = 0.9, .centered = true});
  tf::Variable w(tf::Tensor{1.0}, {.name = "v:0"});
  opt.apply_gradients({tf::Tensor{2.0}}, {w});
  EXPECT_EQ(opt.slot_names(w), (std::vector<std::string>{"rms", "momentum", "mg"}));
  EXPECT_EQ(opt.get_slot(w, "mg").name(), "RMSprop/v/mg:0");
  EXPECT_NEAR(opt.get_slot(w, "rms").value().item(), 0.4, 1e-7);
  // Keras 3's names (keras/src/optimizers/rmsprop.py: velocities, momentums, average_gradients).
  EXPECT_TRUE(opt.get_slot(w, "velocity").same_as(opt.get_slot(w, "rms")));
  EXPECT_TRUE(opt.get_slot(w, "average_gradient").same_as(opt.get_slot(w, "mg")));
  EXPECT_EQ(opt.get_slot(w, "momentum").name(), "RMSprop/v/momentum:0");
  EXPECT_THROW(opt.get_slot(w, "m"), std::invalid_argument);
}

TEST(Adagrad, TrajectoryAndInitialAccumulator) {
  const double lr = 0.1;
  Vec acc(kW0.size(), 0.1);
  auto want = tf::testing::run_reference(kW0, 6, [&](Vec& w, const Vec& g, int) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      acc[i] += g[i] * g[i];
      w[i] -= lr * g[i] / std::sqrt(acc[i] + 1e-7);
    }
  });
  Adagrad opt({.learning_rate = lr});
  expect_near(tf::testing::run_optimizer(opt, kW0, 6), want, 1e-12);
  Adagrad fresh;
  tf::Variable w(tf::Tensor{1.0, 2.0});
  fresh.build({w});
  EXPECT_NEAR(fresh.get_slot(w, "accumulator").value().at({1}), 0.1, 1e-8);
  EXPECT_EQ(fresh.current_learning_rate(), 1e-3);
  EXPECT_THROW(Adagrad({.initial_accumulator_value = -1}), std::invalid_argument);
  EXPECT_THROW(Adagrad({.epsilon = -1}), std::invalid_argument);
}
