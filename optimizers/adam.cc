#include "optimizers/adam.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "optimizers/internal/update_loop.h"

namespace tapeflow::optimizers {
namespace {

// One chunk of the Adam update in a single pass over w, m, v (and vhat): m and v are updated and
// used while still in registers. Eigen's packet ops (8 floats with AVX) vectorize the sqrt and the
// division; the operation order is that of the array expressions m += (g - m)·(1 - β1);
// v += (g² - v)·(1 - β2); w -= m·a / (sqrt(v̂) + ε), so results are unchanged, in a third of the
// memory passes.
template <class T, bool kAmsgrad>
void adam_kernel(T* __restrict w, T* __restrict m, T* __restrict v, T* __restrict vh, const T* __restrict g,
                 std::int64_t n, T a, T eps, T one_b1, T one_b2) {
  namespace ei = Eigen::internal;
  using P = typename ei::packet_traits<T>::type;
  constexpr std::int64_t kLanes = ei::packet_traits<T>::size;
  const P pa = ei::pset1<P>(a), peps = ei::pset1<P>(eps), pb1 = ei::pset1<P>(one_b1), pb2 = ei::pset1<P>(one_b2);
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const P gi = ei::ploadu<P>(g + i);
    const P mi = ei::padd(ei::ploadu<P>(m + i), ei::pmul(ei::psub(gi, ei::ploadu<P>(m + i)), pb1));
    P vi = ei::padd(ei::ploadu<P>(v + i), ei::pmul(ei::psub(ei::pmul(gi, gi), ei::ploadu<P>(v + i)), pb2));
    ei::pstoreu(m + i, mi);
    ei::pstoreu(v + i, vi);
    if constexpr (kAmsgrad) {
      vi = ei::pmax(ei::ploadu<P>(vh + i), vi);
      ei::pstoreu(vh + i, vi);
    }
    ei::pstoreu(w + i, ei::psub(ei::ploadu<P>(w + i), ei::pdiv(ei::pmul(mi, pa), ei::padd(ei::psqrt(vi), peps))));
  }
  for (; i < n; ++i) {
    const T mi = m[i] + (g[i] - m[i]) * one_b1;
    T vi = v[i] + (g[i] * g[i] - v[i]) * one_b2;
    m[i] = mi;
    v[i] = vi;
    if constexpr (kAmsgrad) vi = vh[i] = std::max(vh[i], vi);
    w[i] -= mi * a / (std::sqrt(vi) + eps);
  }
}

}  // namespace

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
      if (vh)
        adam_kernel<T, true>(w + b, m + b, v + b, vh + b, g + b, e - b, a, eps, one_b1, one_b2);
      else
        adam_kernel<T, false>(w + b, m + b, v + b, nullptr, g + b, e - b, a, eps, one_b1, one_b2);
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
