// The float exp of the per-level loops (ukernels/softmax_loops.cc, gelu_loops.cc): one definition,
// compiled into each level's namespace (internal linkage: no inline code is shared between the
// levels' objects). Those files are compiled with -ffp-contract=off, so it gives the same bits at
// every level and vector width.
#pragma once

#ifndef TAPEFLOW_KERNEL_ISA
#error "exp_f32.h is for the per-level ukernels (-DTAPEFLOW_KERNEL_ISA=isa_<level>)"
#endif

#include <bit>
#include <cstdint>

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {
namespace {

// exp(x) for x <= 88.72 (larger x is clamped there; softmax passes x - max <= 0), NaN -> NaN:
// Cody-Waite reduction x = n ln2 + r (n = round(x log2 e), ln2 in two parts, n ln2_hi exact),
// Cephes' degree-6 polynomial for exp(r) on |r| <= ln2 / 2 (~1 ulp), then · 2^h · 2^(n-h) with
// h = floor(n / 2) (both factors normal, so results down to the denormals round once); x < -104
// (below half the least denormal) gives 0. Only multiplies, adds and integer bit operations, each
// rounded on its own (no FMA): the same bits at every vector width and level, and vectorizable
// (selects, no branches, no libm call).
inline float exp_f32(float x) {
  constexpr float kMagic = 12582912.f;  // 1.5 · 2^23: adding it rounds to an integer
  const float xc = x > 88.72283f ? 88.72283f : (x < -104.f ? -104.f : x);
  const float t = xc * 1.44269504088896341f + kMagic;
  const float n = t - kMagic;
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = (p * (r * r) + r) + 1.f;
  const std::int32_t ni = std::bit_cast<std::int32_t>(t) - std::bit_cast<std::int32_t>(kMagic);  // n
  const std::int32_t h = ni >> 1;
  const float s1 = std::bit_cast<float>(static_cast<std::int32_t>(static_cast<std::uint32_t>(h + 127) << 23));
  const float s2 = std::bit_cast<float>(static_cast<std::int32_t>(static_cast<std::uint32_t>(ni - h + 127) << 23));
  return x < -104.f ? 0.f : (e * s1) * s2;
}

}  // namespace
}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
