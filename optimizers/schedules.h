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

#include <nlohmann/json_fwd.hpp>

namespace tapeflow::optimizers {

class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  virtual double operator()(std::int64_t step) const = 0;
  virtual std::string name() const = 0;
  // Keras's config of the schedule (optimizers/serialization.h). Errors: std::logic_error for a
  // schedule class that does not implement it.
  virtual nlohmann::json get_config() const;
};

struct ExponentialDecayOptions {
  double initial_learning_rate = 0.0;
  std::int64_t decay_steps = 0;
  double decay_rate = 0.0;
  bool staircase = false;
};
class ExponentialDecay : public LearningRateSchedule {
 public:
  explicit ExponentialDecay(ExponentialDecayOptions options);
  ExponentialDecay(double initial_learning_rate, std::int64_t decay_steps, double decay_rate, bool staircase = false)
      : ExponentialDecay(ExponentialDecayOptions{initial_learning_rate, decay_steps, decay_rate, staircase}) {}
  double operator()(std::int64_t step) const override;
  std::string name() const override { return "ExponentialDecay"; }
  nlohmann::json get_config() const override;

 private:
  ExponentialDecayOptions o_;
};

struct CosineDecayOptions {
  double initial_learning_rate = 0.0;
  std::int64_t decay_steps = 0;
  double alpha = 0.0;
};
class CosineDecay : public LearningRateSchedule {
 public:
  explicit CosineDecay(CosineDecayOptions options);
  CosineDecay(double initial_learning_rate, std::int64_t decay_steps, double alpha = 0.0)
      : CosineDecay(CosineDecayOptions{initial_learning_rate, decay_steps, alpha}) {}
  double operator()(std::int64_t step) const override;
  std::string name() const override { return "CosineDecay"; }
  nlohmann::json get_config() const override;

 private:
  CosineDecayOptions o_;
};

class PiecewiseConstantDecay : public LearningRateSchedule {
 public:
  PiecewiseConstantDecay(std::vector<std::int64_t> boundaries, std::vector<double> values);
  double operator()(std::int64_t step) const override;
  std::string name() const override { return "PiecewiseConstantDecay"; }
  nlohmann::json get_config() const override;

 private:
  std::vector<std::int64_t> boundaries_;
  std::vector<double> values_;
};

// An optimizer's learning rate: a constant or a schedule. Converts implicitly from either, so
// options read `.learning_rate = 1e-3` or `.learning_rate = ExponentialDecay(1e-2, 100, 0.9)`.
class LearningRate {
 public:
  LearningRate(double value) : value_(value) {}  // NOLINT
  template <class S>
    requires std::derived_from<S, LearningRateSchedule>
  LearningRate(std::shared_ptr<S> schedule) : schedule_(std::move(schedule)) {  // NOLINT
    check();
  }
  template <class S>
    requires std::derived_from<S, LearningRateSchedule>
  LearningRate(S schedule) : schedule_(std::make_shared<S>(std::move(schedule))) {}  // NOLINT
  // The rate at `step` (the constant for a number).
  double at(std::int64_t step) const { return schedule_ ? (*schedule_)(step) : value_; }
  bool is_schedule() const { return schedule_ != nullptr; }
  const std::shared_ptr<const LearningRateSchedule>& schedule() const { return schedule_; }

 private:
  void check() const;
  double value_ = 0.0;
  std::shared_ptr<const LearningRateSchedule> schedule_;
};

}  // namespace tapeflow::optimizers
