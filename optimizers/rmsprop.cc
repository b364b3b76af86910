#include "optimizers/rmsprop.h"

#include <cmath>
#include <stdexcept>

#include "optimizers/internal/eigen_arrays.h"
#include "optimizers/internal/update_loop.h"

namespace tapeflow::optimizers {
namespace {

using internal::Arr;
using internal::ConstArr;

// One chunk of the RMSprop update (Eigen array expressions: vectorized, sqrt included).
template <class T, bool kCentered, bool kMomentum>
void rmsprop_kernel(T* w, T* rms, T* mom, T* mg, const T* g, std::int64_t n, T rho, T eps, T lr, T mu) {
  Arr<T> W(w, n), R(rms, n);
  ConstArr<T> G(g, n);
  const T one_rho = T(1) - rho;
  R = rho * R + one_rho * G.square();
  auto update = [&](const auto& denom) {
    if constexpr (kMomentum) {
      Arr<T> MO(mom, n);
      MO = mu * MO + lr * G / denom.sqrt();
      W -= MO;
    } else {
      W -= lr * G / denom.sqrt();
    }
  };
  if constexpr (kCentered) {
    Arr<T> MG(mg, n);
    MG = rho * MG + one_rho * G;
    update(R - MG.square() + eps);
  } else {
    update(R + eps);
  }
}

template <class T>
void adagrad_kernel(T* w, T* acc, const T* g, std::int64_t n, T eps, T lr) {
  Arr<T> W(w, n), AC(acc, n);
  ConstArr<T> G(g, n);
  AC += G.square();
  W -= lr * G / (AC + eps).sqrt();
}

}  // namespace

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
      const std::int64_t n = e - b;
      if (mg && mom) rmsprop_kernel<T, true, true>(w + b, rms + b, mom + b, mg + b, g + b, n, rho, eps, lr_t, mu);
      else if (mg) rmsprop_kernel<T, true, false>(w + b, rms + b, nullptr, mg + b, g + b, n, rho, eps, lr_t, mu);
      else if (mom) rmsprop_kernel<T, false, true>(w + b, rms + b, mom + b, nullptr, g + b, n, rho, eps, lr_t, mu);
      else rmsprop_kernel<T, false, false>(w + b, rms + b, nullptr, nullptr, g + b, n, rho, eps, lr_t, mu);
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
      adagrad_kernel<T>(w + b, acc + b, g + b, e - b, eps, lr_t);
    });
  });
}

}  // namespace tapeflow::optimizers
