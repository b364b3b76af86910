// Learning-rate schedules (functions of the optimizer's step) and LearningRate (a number or a schedule).
//
// Facts:    Evaluated at the optimizer's `iterations` before it is incremented (step 0 first), as Keras.
//           ExponentialDecay: initial · decay_rate^(step / decay_steps) (floored exponent if staircase).
//           CosineDecay: step' = min(step, decay_steps); initial · ((1 - alpha) · ½(1 + cos(π step' /
//           decay_steps)) + alpha).
//           PiecewiseConstantDecay: values[0] for step <= boundaries[0], values[i] for
//           boundaries[i-1] < step <= boundaries[i], values.back() after the last boundary.
// Errors:   std::invalid_argument for decay_steps <= 0, values.size() != boundaries.size() + 1,
//           unsorted boundaries, a null schedule.
// Ref:      keras/src/optimizers/schedules/learning_rate_schedule.py
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tape/core/config.h"

namespace tapeflow::optimizers {

// A learning rate as a function of the optimizer's step; subclass it for a schedule of your own.
// Ref: keras.optimizers.schedules.LearningRateSchedule
class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  // The learning rate at `step` (the optimizer's iterations before the update: 0 first).
  virtual double operator()(std::int64_t step) const = 0;
  // The schedule's Keras class name ("ExponentialDecay", ...), written as its config's class_name.
  virtual std::string name() const = 0;
  // Keras's config of the schedule (optimizers/serialization.h). Errors: std::logic_error for a
  // schedule class that does not implement it.
  virtual Config get_config() const;
};

// ExponentialDecay's arguments, in Keras's order (Keras has no defaults for the first three).
struct ExponentialDecayOptions {
  // The rate at step 0.
  double initial_learning_rate = 0.0;
  // Steps over which the rate is multiplied by decay_rate once (> 0).
  std::int64_t decay_steps = 0;
  // Factor per decay_steps steps.
  double decay_rate = 0.0;
  // Decay in whole steps of decay_steps (floor(step / decay_steps)) instead of continuously.
  bool staircase = false;
};
// initial_learning_rate · decay_rate^(step / decay_steps), the exponent floored if staircase.
// Ref: keras.optimizers.schedules.ExponentialDecay
class ExponentialDecay : public LearningRateSchedule {
 public:
  // Errors: std::invalid_argument for decay_steps <= 0 (names the value).
  explicit ExponentialDecay(ExponentialDecayOptions options);
  // ExponentialDecay({initial_learning_rate, decay_steps, decay_rate, staircase}), Keras's positional order.
  ExponentialDecay(double initial_learning_rate, std::int64_t decay_steps, double decay_rate, bool staircase = false)
      : ExponentialDecay(ExponentialDecayOptions{initial_learning_rate, decay_steps, decay_rate, staircase}) {}
  // initial_learning_rate · decay_rate^(step / decay_steps) (floored exponent if staircase).
  double operator()(std::int64_t step) const override;
  // "ExponentialDecay".
  std::string name() const override { return "ExponentialDecay"; }
  Config get_config() const override;

 private:
  ExponentialDecayOptions o_;
};

// CosineDecay's arguments, in Keras's order (no warmup: Keras's warmup_target/warmup_steps are refused
// when a config is read).
struct CosineDecayOptions {
  // The rate at step 0.
  double initial_learning_rate = 0.0;
  // Steps over which the rate falls along half a cosine to alpha · initial_learning_rate (> 0).
  std::int64_t decay_steps = 0;
  // The final rate as a fraction of initial_learning_rate (Keras's default 0).
  double alpha = 0.0;
};
// Cosine decay from initial_learning_rate to alpha · initial_learning_rate over decay_steps, then
// constant. Ref: keras.optimizers.schedules.CosineDecay
class CosineDecay : public LearningRateSchedule {
 public:
  // Errors: std::invalid_argument for decay_steps <= 0 (names the value).
  explicit CosineDecay(CosineDecayOptions options);
  // CosineDecay({initial_learning_rate, decay_steps, alpha}), Keras's positional order.
  CosineDecay(double initial_learning_rate, std::int64_t decay_steps, double alpha = 0.0)
      : CosineDecay(CosineDecayOptions{initial_learning_rate, decay_steps, alpha}) {}
  // initial · ((1 - alpha) · ½(1 + cos(π · min(step, decay_steps) / decay_steps)) + alpha).
  double operator()(std::int64_t step) const override;
  // "CosineDecay".
  std::string name() const override { return "CosineDecay"; }
  Config get_config() const override;

 private:
  CosineDecayOptions o_;
};

// A constant rate per interval of steps: values[i] up to and including boundaries[i], values.back()
// after the last boundary. Ref: keras.optimizers.schedules.PiecewiseConstantDecay
class PiecewiseConstantDecay : public LearningRateSchedule {
 public:
  // Errors: std::invalid_argument unless values.size() == boundaries.size() + 1 (names both counts),
  // or if boundaries are not sorted ascending.
  PiecewiseConstantDecay(std::vector<std::int64_t> boundaries, std::vector<double> values);
  // values[0] for step <= boundaries[0], values[i] for boundaries[i-1] < step <= boundaries[i],
  // values.back() after the last boundary.
  double operator()(std::int64_t step) const override;
  // "PiecewiseConstantDecay".
  std::string name() const override { return "PiecewiseConstantDecay"; }
  Config get_config() const override;

 private:
  std::vector<std::int64_t> boundaries_;
  std::vector<double> values_;
};

// An optimizer's learning rate: a constant or a schedule. Converts implicitly from either, so
// options read `.learning_rate = 1e-3` or `.learning_rate = ExponentialDecay(1e-2, 100, 0.9)`.
class LearningRate {
 public:
  // A constant rate `value` at every step.
  LearningRate(double value) : value_(value) {}  // NOLINT
  // A schedule shared with the caller (it may keep and inspect it).
  // Errors: std::invalid_argument for a null schedule.
  template <class S>
    requires std::derived_from<S, LearningRateSchedule>
  LearningRate(std::shared_ptr<S> schedule) : schedule_(std::move(schedule)) {  // NOLINT
    check();
  }
  // A copy of `schedule` (an ExponentialDecay(...) written inline in the options).
  template <class S>
    requires std::derived_from<S, LearningRateSchedule>
  LearningRate(S schedule) : schedule_(std::make_shared<S>(std::move(schedule))) {}  // NOLINT
  // The rate at `step` (the constant for a number).
  double at(std::int64_t step) const { return schedule_ ? (*schedule_)(step) : value_; }
  // True for a schedule, false for a constant.
  bool is_schedule() const { return schedule_ != nullptr; }
  // The schedule (null for a constant).
  const std::shared_ptr<const LearningRateSchedule>& schedule() const { return schedule_; }

 private:
  void check() const;
  double value_ = 0.0;
  std::shared_ptr<const LearningRateSchedule> schedule_;
};

}  // namespace tapeflow::optimizers
