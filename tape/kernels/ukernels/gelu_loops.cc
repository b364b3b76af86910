// The float GELU loops (tape/kernels/nn.h: gelu, gelu_grad; driven by nn.cc), compiled once per
// instruction-set level into kernels::isa_<level> (TAPEFLOW_KERNEL_ISA; tape/CMakeLists.txt).
// Plain loops the compiler vectorizes at the level's width; this file is compiled with
// -ffp-contract=off (no multiply-add is fused), so every
// element is the same sequence of IEEE operations at every level and width. gelu gives the bits of
// Eigen 3.4's SSE packets on the baseline (its rational erf, each multiply-add a multiply then an
// add), which nn.cc evaluated for every level before; gelu_grad's exp(-x^2 / 2) is the softmax's
// exp_f32 (ukernels/internal/exp_f32.h), within an ulp or so of Eigen's.
#ifndef TAPEFLOW_KERNEL_ISA
#error "gelu_loops.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#include <cmath>
#include <cstdint>
#include <numbers>
#include <type_traits>

#include "tape/kernels/ukernels/internal/exp_f32.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {
namespace {

// Eigen's generic_fast_erf_float: a 13/8-degree rational function on x clamped to [-4, 4].
inline float erf_f32(float a) {
  const float x = a > 4.f ? 4.f : (a < -4.f ? -4.f : a);
  const float x2 = x * x;
  float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = x2 * p + -2.10102402082508e-06f;
  p = x2 * p + -5.69250639462346e-05f;
  p = x2 * p + -7.34990630326855e-04f;
  p = x2 * p + -2.95459980854025e-03f;
  p = x2 * p + -1.60960333262415e-02f;
  p = x * p;
  float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = x2 * q + -1.68282697438203e-03f;
  q = x2 * q + -7.37332916720468e-03f;
  q = x2 * q + -1.42647390514189e-02f;
  return p / q;
}

constexpr float kInvSqrt2 = static_cast<float>(std::numbers::sqrt2 / 2);
constexpr float kInvSqrt2Pi = static_cast<float>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);

}  // namespace

// y = (x / 2) (1 + erf(x / √2)) over [b, e). Float only (double stays on Eigen in nn.cc): templates
// so that nn.cc dispatches them as it does every per-level loop (internal/isa_dispatch.h).
template <class T>
void gelu_run(const T* __restrict x, T* __restrict y, std::int64_t b, std::int64_t e) {
  static_assert(std::is_same_v<T, float>);
  for (std::int64_t i = b; i < e; ++i) y[i] = (0.5f * x[i]) * (1.f + erf_f32(x[i] * kInvSqrt2));
}

// dx = dy (Φ(x) + x φ(x)) over [b, e), as (1 + erf(x / √2)) / 2 + (x / √(2π)) exp(-x² / 2).
template <class T>
void gelu_grad_run(const T* __restrict dy, const T* __restrict x, T* __restrict dx, std::int64_t b, std::int64_t e) {
  static_assert(std::is_same_v<T, float>);
  for (std::int64_t i = b; i < e; ++i) {
    const float v = x[i];
    dx[i] = dy[i] * (0.5f * (1.f + erf_f32(v * kInvSqrt2)) + (v * kInvSqrt2Pi) * exp_f32(-0.5f * (v * v)));
  }
}

template void gelu_run<float>(const float*, float*, std::int64_t, std::int64_t);
template void gelu_grad_run<float>(const float*, const float*, float*, std::int64_t, std::int64_t);

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
