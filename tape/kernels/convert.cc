// kernels::float_to_half / half_to_float (convert.h): each call runs the copy of
// ukernels/convert_loops.cc compiled for cpu_isa()'s level.
#include "tape/kernels/convert.h"

#include "tape/core/cpu_isa.h"
#include "tape/kernels/internal/conv_isa.h"  // TAPEFLOW_HAS_AVX2_KERNELS

namespace tapeflow::kernels {
namespace isa_baseline {
void float_to_half(const float* x, std::uint16_t* y, std::int64_t n);
void half_to_float(const std::uint16_t* x, float* y, std::int64_t n);
}  // namespace isa_baseline
#if TAPEFLOW_HAS_AVX2_KERNELS
namespace isa_avx2 {
void float_to_half(const float* x, std::uint16_t* y, std::int64_t n);
void half_to_float(const std::uint16_t* x, float* y, std::int64_t n);
}  // namespace isa_avx2
#endif

void float_to_half(const float* x, std::uint16_t* y, std::int64_t n) {
#if TAPEFLOW_HAS_AVX2_KERNELS
  if (cpu_isa() >= CpuIsa::kAvx2) return isa_avx2::float_to_half(x, y, n);
#endif
  isa_baseline::float_to_half(x, y, n);
}

void half_to_float(const std::uint16_t* x, float* y, std::int64_t n) {
#if TAPEFLOW_HAS_AVX2_KERNELS
  if (cpu_isa() >= CpuIsa::kAvx2) return isa_avx2::half_to_float(x, y, n);
#endif
  isa_baseline::half_to_float(x, y, n);
}

}  // namespace tapeflow::kernels
