#include "optimizers/schedules.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace tapeflow::optimizers {

ExponentialDecay::ExponentialDecay(ExponentialDecayOptions options) : o_(options) {
  if (o_.decay_steps <= 0)
    throw std::invalid_argument("ExponentialDecay: decay_steps must be positive, got " + std::to_string(o_.decay_steps));
}

double ExponentialDecay::operator()(std::int64_t step) const {
  double p = static_cast<double>(step) / static_cast<double>(o_.decay_steps);
  if (o_.staircase) p = std::floor(p);
  return o_.initial_learning_rate * std::pow(o_.decay_rate, p);
}

CosineDecay::CosineDecay(CosineDecayOptions options) : o_(options) {
  if (o_.decay_steps <= 0)
    throw std::invalid_argument("CosineDecay: decay_steps must be positive, got " + std::to_string(o_.decay_steps));
}

double CosineDecay::operator()(std::int64_t step) const {
  double s = static_cast<double>(std::min(step, o_.decay_steps)) / static_cast<double>(o_.decay_steps);
  double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * s));
  return o_.initial_learning_rate * ((1.0 - o_.alpha) * cosine + o_.alpha);
}

PiecewiseConstantDecay::PiecewiseConstantDecay(std::vector<std::int64_t> boundaries, std::vector<double> values)
    : boundaries_(std::move(boundaries)), values_(std::move(values)) {
  if (values_.size() != boundaries_.size() + 1)
    throw std::invalid_argument("PiecewiseConstantDecay: expected " + std::to_string(boundaries_.size() + 1) +
                                " values for " + std::to_string(boundaries_.size()) + " boundaries, got " +
                                std::to_string(values_.size()));
  if (!std::is_sorted(boundaries_.begin(), boundaries_.end()))
    throw std::invalid_argument("PiecewiseConstantDecay: boundaries must be sorted ascending");
}

double PiecewiseConstantDecay::operator()(std::int64_t step) const {
  for (std::size_t i = 0; i < boundaries_.size(); ++i)
    if (step <= boundaries_[i]) return values_[i];
  return values_.back();
}

void LearningRate::check() const {
  if (!schedule_) throw std::invalid_argument("LearningRate: null schedule");
}

}  // namespace tapeflow::optimizers
