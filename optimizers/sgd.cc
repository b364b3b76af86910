#include "optimizers/sgd.h"

#include <stdexcept>

#include "optimizers/internal/update_loop.h"
#include "tape/kernels/optimizer_updates.h"

namespace tapeflow::optimizers {
SGD::SGD(SGDOptions o)
    : Optimizer(common_config(o)),
      options_(std::move(o)) {
  require(options_.momentum >= 0 && options_.momentum <= 1, "momentum must be in [0, 1]", options_.momentum);
}

void SGD::build_slots(const Variable& var) {
  if (options_.momentum != 0) add_slot(var, "momentum");
}

void SGD::update_step(const Tensor& grad, const Variable& var, double lr) {
  internal::dispatch_update(var.dtype(), "SGD", [&](auto tag) {
    using T = decltype(tag);
    T* w = var.mutable_data_for_update<T>();
    const T* g = grad.data<T>();
    const T lr_t = static_cast<T>(lr);
    T* m = options_.momentum != 0 ? slot(var, "momentum").mutable_data_for_update<T>() : nullptr;
    const T mu = static_cast<T>(options_.momentum);
    const bool nesterov = options_.nesterov;
    internal::for_each_range(var.shape().num_elements(), [&](std::int64_t b, std::int64_t e) {
      kernels::sgd_update<T>(w + b, m ? m + b : nullptr, g + b, e - b, lr_t, mu, nesterov);
    });
  });
}

}  // namespace tapeflow::optimizers
