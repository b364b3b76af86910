#include "optimizers/sgd.h"

#include <stdexcept>

#include "optimizers/internal/update_loop.h"

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
    const std::int64_t n = var.shape().num_elements();
    if (options_.momentum == 0) {
      internal::for_each_index(n, [&](std::int64_t i) { w[i] -= lr_t * g[i]; });
      return;
    }
    T* m = slot(var, "momentum").mutable_data_for_update<T>();
    const T mu = static_cast<T>(options_.momentum);
    if (options_.nesterov) {
      internal::for_each_index(n, [&](std::int64_t i) {
        m[i] = mu * m[i] - lr_t * g[i];
        w[i] += mu * m[i] - lr_t * g[i];
      });
    } else {
      internal::for_each_index(n, [&](std::int64_t i) {
        m[i] = mu * m[i] - lr_t * g[i];
        w[i] += m[i];
      });
    }
  });
}

}  // namespace tapeflow::optimizers
