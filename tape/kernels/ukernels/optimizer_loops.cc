// The optimizers' update loops (tape/kernels/optimizer_updates.h), compiled once per instruction-set
// level into kernels::isa_<level> (TAPEFLOW_KERNEL_ISA; tape/CMakeLists.txt). Plain element loops
// over __restrict pointers, which GCC and clang vectorize at the level's width (4 floats for the
// baseline's SSE, 8 for AVX2), square roots and divisions included: this file alone is compiled
// with -fno-math-errno (sqrt need not set errno, so it vectorizes) and -ffp-contract=off (no
// multiply-add is fused, so every level rounds each operation as the baseline does).
#ifndef TAPEFLOW_KERNEL_ISA
#error "optimizer_loops.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {
namespace {

// kMode: 0 plain, 1 momentum, 2 Nesterov momentum.
template <class T, int kMode>
void sgd_loop(T* __restrict w, T* __restrict m, const T* __restrict g, std::int64_t n, T lr, T mu) {
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (kMode == 0) {
      w[i] -= lr * g[i];
    } else {
      m[i] = mu * m[i] - lr * g[i];
      w[i] += kMode == 2 ? mu * m[i] - lr * g[i] : m[i];
    }
  }
}

// m += (g - m)·(1 - β1); v += (g² - v)·(1 - β2); w -= m·a / (sqrt(v̂) + ε).
template <class T, bool kAmsgrad>
void adam_loop(T* __restrict w, T* __restrict m, T* __restrict v, T* __restrict vh, const T* __restrict g,
               std::int64_t n, T a, T eps, T one_b1, T one_b2) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T mi = m[i] + (g[i] - m[i]) * one_b1;
    T vi = v[i] + (g[i] * g[i] - v[i]) * one_b2;
    m[i] = mi;
    v[i] = vi;
    if constexpr (kAmsgrad) vi = vh[i] = std::max(vh[i], vi);
    w[i] -= mi * a / (std::sqrt(vi) + eps);
  }
}

// rms = ρ rms + (1 - ρ) g²; centered: mg = ρ mg + (1 - ρ) g, d = rms - mg² + ε, else d = rms + ε;
// momentum: mom = μ mom + lr g / sqrt(d), w -= mom; else w -= lr g / sqrt(d).
template <class T, bool kCentered, bool kMomentum>
void rmsprop_loop(T* __restrict w, T* __restrict rms, T* __restrict mom, T* __restrict mg, const T* __restrict g,
                  std::int64_t n, T rho, T eps, T lr, T mu) {
  const T one_rho = T(1) - rho;
  for (std::int64_t i = 0; i < n; ++i) {
    const T r = rho * rms[i] + one_rho * (g[i] * g[i]);
    rms[i] = r;
    T d;
    if constexpr (kCentered) {
      const T a = rho * mg[i] + one_rho * g[i];
      mg[i] = a;
      d = r - a * a + eps;
    } else {
      d = r + eps;
    }
    const T step = lr * g[i] / std::sqrt(d);
    if constexpr (kMomentum) {
      const T mo = mu * mom[i] + step;
      mom[i] = mo;
      w[i] -= mo;
    } else {
      w[i] -= step;
    }
  }
}

// acc += g²; w -= lr g / sqrt(acc + ε).
template <class T>
void adagrad_loop(T* __restrict w, T* __restrict acc, const T* __restrict g, std::int64_t n, T eps, T lr) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T a = acc[i] + g[i] * g[i];
    acc[i] = a;
    w[i] -= lr * g[i] / std::sqrt(a + eps);
  }
}

}  // namespace

template <class T>
void sgd_update(T* w, T* m, const T* g, std::int64_t n, T lr, T mu, bool nesterov) {
  if (!m) sgd_loop<T, 0>(w, nullptr, g, n, lr, mu);
  else if (nesterov) sgd_loop<T, 2>(w, m, g, n, lr, mu);
  else sgd_loop<T, 1>(w, m, g, n, lr, mu);
}

template <class T>
void adam_update(T* w, T* m, T* v, T* vhat, const T* g, std::int64_t n, T a, T eps, T one_b1, T one_b2) {
  if (vhat) adam_loop<T, true>(w, m, v, vhat, g, n, a, eps, one_b1, one_b2);
  else adam_loop<T, false>(w, m, v, nullptr, g, n, a, eps, one_b1, one_b2);
}

template <class T>
void rmsprop_update(T* w, T* rms, T* mom, T* mg, const T* g, std::int64_t n, T rho, T eps, T lr, T mu) {
  if (mg && mom) rmsprop_loop<T, true, true>(w, rms, mom, mg, g, n, rho, eps, lr, mu);
  else if (mg) rmsprop_loop<T, true, false>(w, rms, nullptr, mg, g, n, rho, eps, lr, mu);
  else if (mom) rmsprop_loop<T, false, true>(w, rms, mom, nullptr, g, n, rho, eps, lr, mu);
  else rmsprop_loop<T, false, false>(w, rms, nullptr, nullptr, g, n, rho, eps, lr, mu);
}

template <class T>
void adagrad_update(T* w, T* acc, const T* g, std::int64_t n, T eps, T lr) {
  adagrad_loop<T>(w, acc, g, n, eps, lr);
}

#define TAPEFLOW_OPTIMIZER_LOOPS(T)                                                                     \
  template void sgd_update<T>(T*, T*, const T*, std::int64_t, T, T, bool);                              \
  template void adam_update<T>(T*, T*, T*, T*, const T*, std::int64_t, T, T, T, T);                     \
  template void rmsprop_update<T>(T*, T*, T*, T*, const T*, std::int64_t, T, T, T, T);                  \
  template void adagrad_update<T>(T*, T*, const T*, std::int64_t, T, T);
TAPEFLOW_OPTIMIZER_LOOPS(float)
TAPEFLOW_OPTIMIZER_LOOPS(double)
#undef TAPEFLOW_OPTIMIZER_LOOPS

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
