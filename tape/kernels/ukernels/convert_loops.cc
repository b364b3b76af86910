// The float32 <-> half conversions (tape/kernels/convert.h), compiled once per instruction-set
// level into kernels::isa_<level> (TAPEFLOW_KERNEL_ISA; tape/CMakeLists.txt): 8 lanes of F16C
// (VCVTPS2PH / VCVTPH2PS) where the level has it (avx2 and avx512 are compiled with -mf16c),
// Eigen::half's exact integer conversion for the tails and at baseline.
#ifndef TAPEFLOW_KERNEL_ISA
#error "convert_loops.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#include <Eigen/Core>

#include <cstdint>
#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

void float_to_half(const float* x, std::uint16_t* y, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) y[i] = Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(x[i]));
}

void half_to_float(const std::uint16_t* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
#endif
  for (; i < n; ++i) y[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(x[i]));
}

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
