// The float GELU loops (tape/kernels/nn.h: gelu, gelu_grad; driven by nn.cc), compiled once per
// instruction-set level into kernels::isa_<level> (TAPEFLOW_KERNEL_ISA; tape/CMakeLists.txt).
// Plain loops the compiler vectorizes at the level's width; this file is compiled with
// -ffp-contract=off (no multiply-add is fused), so every
// element is the same sequence of IEEE operations at every level and width: the bits of Eigen 3.4's
// SSE packets on the baseline (its rational erf and its Cephes exp, each multiply-add a multiply
// then an add), which nn.cc evaluated for every level before.
#ifndef TAPEFLOW_KERNEL_ISA
#error "gelu_loops.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>

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

// Eigen's pexp_float for x <= 0 (x clamped to -88.723; m = floor(x log2 e + 1/2), r in two
// parts, Cephes' polynomial, then y 2^m: here y 2^h 2^(m-h), h = floor(m / 2), whose first
// product is exact as Eigen's four factors are, so the one rounding is the same).
inline float exp_nonpositive_f32(float a) {
  const float x = a < -88.723f ? -88.723f : a;
  // floor(t) as round-to-nearest (adding and taking away 1.5 · 2^23), minus 1 where that rounded up.
  const float t = x * 1.44269504088896341f + 0.5f;
  const float nearest = (t + 12582912.f) - 12582912.f;
  const float m = nearest > t ? nearest - 1.f : nearest;
  float r = m * -0.693359375f + x;
  r = m * 2.12194440e-4f + r;
  const float r2 = r * r, r3 = r2 * r;
  float y = 1.9875691500e-4f * r + 1.3981999507e-3f;
  float y1 = 4.1665795894e-2f * r + 1.6666665459e-1f;
  const float y2 = r + 1.f;
  y = y * r + 8.3334519073e-3f;
  y1 = y1 * r + 5.0000001201e-1f;
  y = y * r3 + y1;
  y = y * r2 + y2;
  // m as an integer (m is integral, |m| <= 128: adding 1.5 · 2^23 is exact and puts it in the low bits).
  const std::int32_t mi = std::bit_cast<std::int32_t>(m + 12582912.f) - std::bit_cast<std::int32_t>(12582912.f);
  const std::int32_t h = mi >> 1;
  const float s1 = std::bit_cast<float>(static_cast<std::int32_t>(static_cast<std::uint32_t>(h + 127) << 23));
  const float s2 = std::bit_cast<float>(static_cast<std::int32_t>(static_cast<std::uint32_t>(mi - h + 127) << 23));
  return (y * s1) * s2;
}

constexpr float kInvSqrt2 = static_cast<float>(std::numbers::sqrt2 / 2);
constexpr float kInvSqrt2Pi = static_cast<float>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);

}  // namespace

// y = (x / 2) (1 + erf(x / √2)) over [b, e).
void gelu_f32(const float* __restrict x, float* __restrict y, std::int64_t b, std::int64_t e) {
  for (std::int64_t i = b; i < e; ++i) y[i] = (0.5f * x[i]) * (1.f + erf_f32(x[i] * kInvSqrt2));
}

// dx = dy (Φ(x) + x φ(x)) over [b, e), as (1 + erf(x / √2)) / 2 + (x / √(2π)) exp(-x² / 2).
void gelu_grad_f32(const float* __restrict dy, const float* __restrict x, float* __restrict dx, std::int64_t b,
                   std::int64_t e) {
  for (std::int64_t i = b; i < e; ++i) {
    const float v = x[i];
    dx[i] = dy[i] * (0.5f * (1.f + erf_f32(v * kInvSqrt2)) + (v * kInvSqrt2Pi) * exp_nonpositive_f32(-0.5f * (v * v)));
  }
}

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
