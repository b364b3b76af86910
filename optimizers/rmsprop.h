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

// RMSprop's keyword arguments, in Keras's order. Ref: keras.optimizers.RMSprop
struct RMSpropOptions {
  // A constant (default 0.001) or a schedule of the iteration count.
  LearningRate learning_rate = 0.001;
  // Discount of the running average of squared gradients (slot "rms"), in [0, 1).
  double rho = 0.9;
  // Momentum of the update, in [0, 1] (0: no momentum and no "momentum" slot).
  double momentum = 0.0;
  // Added to the average of squares inside the square root (>= 0; Keras's default 1e-7).
  double epsilon = 1e-7;
  // Centered RMSprop: divide by an estimate of the variance (rms - mg², slot "mg") instead of rms.
  bool centered = false;
  // Clip each gradient to this L2 norm before the update (> 0; not with global_clipnorm).
  std::optional<double> clipnorm = std::nullopt;
  // Clip each gradient element to [-clipvalue, clipvalue] (> 0).
  std::optional<double> clipvalue = std::nullopt;
  // Clip all gradients together to this global L2 norm (> 0; not with clipnorm).
  std::optional<double> global_clipnorm = std::nullopt;
  // The optimizer's name (in configs and checkpoints).
  std::string name = "RMSprop";
};

// RMSprop (optionally centered, with momentum); see the file comment for the update.
// Ref: keras.optimizers.RMSprop
class RMSprop : public Optimizer {
 public:
  // Errors: std::invalid_argument for rho outside [0, 1), momentum outside [0, 1], epsilon < 0, and
  // as Optimizer for the clip options (names the option and value).
  explicit RMSprop(RMSpropOptions options = {});
  // The options it was made with.
  const RMSpropOptions& options() const { return options_; }
  Config get_config() const override;
  // "RMSprop".
  std::string class_name() const override { return "RMSprop"; }
  std::vector<std::vector<std::string>> keras_slot_order() const override { return {{"rms"}, {"momentum"}, {"mg"}}; }

 protected:
  void build_slots(const Variable& var) override;
  void update_step(const Tensor& grad, const Variable& var, double lr) override;

 private:
  RMSpropOptions options_;
};

// Adagrad's keyword arguments, in Keras's order. Ref: keras.optimizers.Adagrad
struct AdagradOptions {
  // A constant (default 0.001) or a schedule of the iteration count.
  LearningRate learning_rate = 0.001;
  // Starting value of the sum of squared gradients (slot "accumulator"), >= 0.
  double initial_accumulator_value = 0.1;
  // Added to the accumulator inside the square root (>= 0; Keras's default 1e-7).
  double epsilon = 1e-7;
  // Clip each gradient to this L2 norm before the update (> 0; not with global_clipnorm).
  std::optional<double> clipnorm = std::nullopt;
  // Clip each gradient element to [-clipvalue, clipvalue] (> 0).
  std::optional<double> clipvalue = std::nullopt;
  // Clip all gradients together to this global L2 norm (> 0; not with clipnorm).
  std::optional<double> global_clipnorm = std::nullopt;
  // The optimizer's name (in configs and checkpoints).
  std::string name = "Adagrad";
};

// Adagrad: steps scaled by the inverse root of each element's sum of squared gradients; see the file
// comment for the update. Ref: keras.optimizers.Adagrad
class Adagrad : public Optimizer {
 public:
  // Errors: std::invalid_argument for initial_accumulator_value < 0, epsilon < 0, and as Optimizer
  // for the clip options (names the option and value).
  explicit Adagrad(AdagradOptions options = {});
  // The options it was made with.
  const AdagradOptions& options() const { return options_; }
  Config get_config() const override;
  // "Adagrad".
  std::string class_name() const override { return "Adagrad"; }

 protected:
  void build_slots(const Variable& var) override;
  void update_step(const Tensor& grad, const Variable& var, double lr) override;

 private:
  AdagradOptions options_;
};

}  // namespace tapeflow::optimizers
