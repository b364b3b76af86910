// The AVX-512 tiles of the float kernels (the packed GEMM's tiles, the convolutions' tiles): on a
// CPU with AVX-512 they multiply 32 columns per register row instead of 16, which doubles the FMA
// width on cores with full 512-bit FMA units (Zen 5 here: 109 -> 218 GFLOP/s per core on a loop of
// independent FMAs).
// Facts:    They live in tape/kernels/ukernels/, compiled for the avx512 level over
//           ukernels/internal/vec.h; the convolutions' AVX2 + FMA drivers call them when cpu_isa()
//           is kAvx512 (tape/core/cpu_isa.h), the packed GEMM's loops (gemm/packed.cc) pick the
//           level's gemm_block per call. TAPEFLOW_HAVE_AVX512_KERNELS says whether the copy being
//           compiled may call them.
//           Every element they produce is the same FMA chain, in the same order, as the AVX2
//           tiles': results are bit for bit the same at kAvx2 and kAvx512 (tests compare).
// Switch:   TAPEFLOW_MAX_CPU_ISA=avx2 (or set_max_cpu_isa(CpuIsa::kAvx2)) keeps them off.
#pragma once

#include <type_traits>

#include "tape/core/cpu_isa.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(TAPEFLOW_NO_AVX512_TILES)
#define TAPEFLOW_HAVE_AVX512_KERNELS 1
#else
#define TAPEFLOW_HAVE_AVX512_KERNELS 0
#endif

namespace tapeflow::kernels::internal {

// Whether the AVX-512 tiles run: cpu_isa() is kAvx512. Cheap (one relaxed atomic load).
inline bool avx512_enabled() { return cpu_isa() == CpuIsa::kAvx512; }
// Whether the convolutions' tiles for element type T run: avx512_enabled() for floats, never for
// doubles (their kernels keep the AVX2 tiles). The one place they ask; the packed GEMM has AVX-512
// tiles for both (gemm/packed.cc picks them at kAvx512).
template <class T>
bool avx512_tiles() {
  if constexpr (std::is_same_v<T, float>) return avx512_enabled();
  return false;
}

}  // namespace tapeflow::kernels::internal
