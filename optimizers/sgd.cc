#include "optimizers/sgd.h"

#include <stdexcept>

#include "optimizers/internal/update_loop.h"

namespace tapeflow::optimizers {
namespace {

// kMode: 0 plain, 1 momentum, 2 Nesterov momentum.
template <class T, int kMode>
void sgd_kernel(T* __restrict w, T* __restrict m, const T* __restrict g, std::int64_t n, T lr, T mu) {
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (kMode == 0) {
      w[i] -= lr * g[i];
    } else {
      m[i] = mu * m[i] - lr * g[i];
      w[i] += kMode == 2 ? mu * m[i] - lr * g[i] : m[i];
    }
  }
}

}  // namespace

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
      if (!m) sgd_kernel<T, 0>(w + b, nullptr, g + b, e - b, lr_t, mu);
      else if (nesterov) sgd_kernel<T, 2>(w + b, m + b, g + b, e - b, lr_t, mu);
      else sgd_kernel<T, 1>(w + b, m + b, g + b, e - b, lr_t, mu);
    });
  });
}

}  // namespace tapeflow::optimizers
