#include "optimizers/adam.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "optimizers/internal/update_loop.h"
#include "tape/kernels/optimizer_updates.h"

namespace tapeflow::optimizers {
Adam::Adam(AdamOptions o) : Adam(std::move(o), 0.0) {}

Adam::Adam(AdamOptions o, double weight_decay)
    : Optimizer(common_config(o, weight_decay)),
      options_(std::move(o)) {
  add_slot_alias("momentum", "m");  // Keras 3's names (base_optimizer: momentums, velocities)
  add_slot_alias("velocity", "v");
  add_slot_alias("velocity_hat", "vhat");
  require(options_.beta_1 >= 0 && options_.beta_1 < 1, "beta_1 must be in [0, 1)", options_.beta_1);
  require(options_.beta_2 >= 0 && options_.beta_2 < 1, "beta_2 must be in [0, 1)", options_.beta_2);
  require(options_.epsilon >= 0, "epsilon must be >= 0", options_.epsilon);
}

void Adam::build_slots(const Variable& var) {
  add_slot(var, "m");
  add_slot(var, "v");
  if (options_.amsgrad) add_slot(var, "vhat");
}

void Adam::update_step(const Tensor& grad, const Variable& var, double lr) {
  const double t = static_cast<double>(iterations() + 1);
  const double alpha = lr * std::sqrt(1.0 - std::pow(options_.beta_2, t)) / (1.0 - std::pow(options_.beta_1, t));
  internal::dispatch_update(var.dtype(), "Adam", [&](auto tag) {
    using T = decltype(tag);
    T* w = var.mutable_data_for_update<T>();
    const T* g = grad.data<T>();
    T* m = slot(var, "m").mutable_data_for_update<T>();
    T* v = slot(var, "v").mutable_data_for_update<T>();
    const T a = static_cast<T>(alpha), eps = static_cast<T>(options_.epsilon);
    const T one_b1 = static_cast<T>(1.0 - options_.beta_1), one_b2 = static_cast<T>(1.0 - options_.beta_2);
    T* vh = options_.amsgrad ? slot(var, "vhat").mutable_data_for_update<T>() : nullptr;
    internal::for_each_range(var.shape().num_elements(), [&](std::int64_t b, std::int64_t e) {
      kernels::adam_update<T>(w + b, m + b, v + b, vh ? vh + b : nullptr, g + b, e - b, a, eps, one_b1, one_b2);
    });
  });
}

AdamW::AdamW(AdamWOptions o)
    : Adam(AdamOptions{.learning_rate = o.learning_rate,
                       .beta_1 = o.beta_1,
                       .beta_2 = o.beta_2,
                       .epsilon = o.epsilon,
                       .amsgrad = o.amsgrad,
                       .clipnorm = o.clipnorm,
                       .clipvalue = o.clipvalue,
                       .global_clipnorm = o.global_clipnorm,
                       .name = o.name},
           o.weight_decay) {}

}  // namespace tapeflow::optimizers
