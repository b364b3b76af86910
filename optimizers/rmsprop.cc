#include "optimizers/rmsprop.h"

#include <cmath>
#include <stdexcept>

#include "optimizers/internal/update_loop.h"
#include "tape/kernels/optimizer_updates.h"

namespace tapeflow::optimizers {
RMSprop::RMSprop(RMSpropOptions o)
    : Optimizer(common_config(o)),
      options_(std::move(o)) {
  add_slot_alias("velocity", "rms");  // Keras 3's names (rmsprop.py: velocities, average_gradients)
  add_slot_alias("average_gradient", "mg");
  require(options_.rho >= 0 && options_.rho < 1, "rho must be in [0, 1)", options_.rho);
  require(options_.momentum >= 0 && options_.momentum <= 1, "momentum must be in [0, 1]", options_.momentum);
  require(options_.epsilon >= 0, "epsilon must be >= 0", options_.epsilon);
}

void RMSprop::build_slots(const Variable& var) {
  add_slot(var, "rms");
  if (options_.momentum > 0) add_slot(var, "momentum");
  if (options_.centered) add_slot(var, "mg");
}

void RMSprop::update_step(const Tensor& grad, const Variable& var, double lr) {
  internal::dispatch_update(var.dtype(), "RMSprop", [&](auto tag) {
    using T = decltype(tag);
    T* w = var.mutable_data_for_update<T>();
    const T* g = grad.data<T>();
    T* rms = slot(var, "rms").mutable_data_for_update<T>();
    T* mom = options_.momentum > 0 ? slot(var, "momentum").mutable_data_for_update<T>() : nullptr;
    T* mg = options_.centered ? slot(var, "mg").mutable_data_for_update<T>() : nullptr;
    const T rho = static_cast<T>(options_.rho);
    const T eps = static_cast<T>(options_.epsilon), lr_t = static_cast<T>(lr), mu = static_cast<T>(options_.momentum);
    internal::for_each_range(var.shape().num_elements(), [&](std::int64_t b, std::int64_t e) {
      kernels::rmsprop_update<T>(w + b, rms + b, mom ? mom + b : nullptr, mg ? mg + b : nullptr, g + b, e - b, rho, eps,
                                 lr_t, mu);
    });
  });
}

Adagrad::Adagrad(AdagradOptions o)
    : Optimizer(common_config(o)),
      options_(std::move(o)) {
  require(options_.initial_accumulator_value >= 0, "initial_accumulator_value must be >= 0",
          options_.initial_accumulator_value);
  require(options_.epsilon >= 0, "epsilon must be >= 0", options_.epsilon);
}

void Adagrad::build_slots(const Variable& var) {
  add_slot(var, "accumulator", options_.initial_accumulator_value);
}

void Adagrad::update_step(const Tensor& grad, const Variable& var, double lr) {
  internal::dispatch_update(var.dtype(), "Adagrad", [&](auto tag) {
    using T = decltype(tag);
    T* w = var.mutable_data_for_update<T>();
    const T* g = grad.data<T>();
    T* acc = slot(var, "accumulator").mutable_data_for_update<T>();
    const T eps = static_cast<T>(options_.epsilon), lr_t = static_cast<T>(lr);
    internal::for_each_range(var.shape().num_elements(), [&](std::int64_t b, std::int64_t e) {
      kernels::adagrad_update<T>(w + b, acc + b, g + b, e - b, eps, lr_t);
    });
  });
}

}  // namespace tapeflow::optimizers
