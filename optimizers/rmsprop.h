// RMSprop and Adagrad: per-element step sizes from running averages / sums of squared gradients.
//
// Facts:    RMSprop slots "rms" (zeros), "momentum" (if momentum > 0), "mg" (if centered);
//           get_slot also takes Keras 3's names "velocity" (rms) and "average_gradient" (mg):
//           rms = ρ·rms + (1 - ρ)·g²; centered: mg = ρ·mg + (1 - ρ)·g, d = rms - mg² + ε, else
//           d = rms + ε; inc = lr·g/sqrt(d); momentum > 0: mom = momentum·mom + inc, var -= mom;
//           else var -= inc (Keras 3: epsilon inside the square root).
//           Adagrad slot "accumulator" (initial_accumulator_value): acc += g²;
//           var -= lr·g/sqrt(acc + ε).
// Errors:   std::invalid_argument for rho outside [0, 1), momentum outside [0, 1], epsilon < 0,
//           initial_accumulator_value < 0.
// Ref:      keras/src/optimizers/rmsprop.py, keras/src/optimizers/adagrad.py
#pragma once

#include "optimizers/optimizer.h"

namespace tapeflow::optimizers {

struct RMSpropOptions {
  LearningRate learning_rate = 0.001;
  double rho = 0.9;
  double momentum = 0.0;
  double epsilon = 1e-7;
  bool centered = false;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "RMSprop";
};

class RMSprop : public Optimizer {
 public:
  explicit RMSprop(RMSpropOptions options = {});
  const RMSpropOptions& options() const { return options_; }

 protected:
  void build_slots(const Variable& var) override;
  void update_step(const Tensor& grad, const Variable& var, double lr) override;

 private:
  RMSpropOptions options_;
};

struct AdagradOptions {
  LearningRate learning_rate = 0.001;
  double initial_accumulator_value = 0.1;
  double epsilon = 1e-7;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = "Adagrad";
};

class Adagrad : public Optimizer {
 public:
  explicit Adagrad(AdagradOptions options = {});
  const AdagradOptions& options() const { return options_; }

 protected:
  void build_slots(const Variable& var) override;
  void update_step(const Tensor& grad, const Variable& var, double lr) override;

 private:
  AdagradOptions options_;
};

}  // namespace tapeflow::optimizers
