// The AVX-512 switch of the float kernels (the packed GEMM's tiles, the indirect convolution's
// tiles): on a CPU with AVX-512F they multiply 32 columns per register row instead of 16, which
// doubles the FMA width on cores with full 512-bit FMA units (Zen 5 here: 109 -> 218 GFLOP/s per
// core on a loop of independent FMAs).
// Facts:    The build keeps AVX-512 off (-mno-avx512f on GCC < 13, see CMakeLists.txt): only
//           functions marked TAPEFLOW_AVX512 use it, chosen at run time by avx512_enabled().
//           Every element they produce is the same FMA chain, in the same order, as the AVX2
//           tiles': results are bit for bit the same with the switch on or off (tests compare).
//           Only with an FMA build (the AVX2 kernels fuse their multiply-adds; an AVX-512 FMA
//           would round differently from a multiply and an add).
// Switch:   TAPEFLOW_AVX512=0 in the environment turns it off (A/B benchmarks); 1 or unset: on
//           where the CPU has it. Any other value throws std::invalid_argument naming the
//           variable and the value, on the first kernel call that asks.
#pragma once

#include <type_traits>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
#define TAPEFLOW_HAVE_AVX512_KERNELS 1
#define TAPEFLOW_AVX512 __attribute__((target("avx512f")))
#else
#define TAPEFLOW_HAVE_AVX512_KERNELS 0
#define TAPEFLOW_AVX512
#endif

namespace tapeflow::kernels::internal {

// Whether the AVX-512 tiles run: the CPU and OS support AVX-512F, TAPEFLOW_AVX512 is not 0, and
// set_avx512_enabled(false) is not in force. Cheap (one relaxed atomic load after the first call).
bool avx512_enabled();
// Turns the AVX-512 tiles off (false) or back on where the CPU has them (true), for tests and
// benchmarks that compare the two; returns the previous setting. Not for use while kernels run.
bool set_avx512_enabled(bool on);
// Whether the tiles for element type T run: avx512_enabled() for floats, never for doubles (their
// kernels keep the AVX2 tiles). The one place kernels ask.
template <class T>
bool avx512_tiles() {
  if constexpr (std::is_same_v<T, float>) return avx512_enabled();
  return false;
}
// Whether this CPU (and OS) could run them at all.
bool avx512_supported();
// What a value of TAPEFLOW_AVX512 says: null (unset) or "1": allowed, "0": not; anything else
// throws std::invalid_argument naming the variable and the value.
bool avx512_allowed_by(const char* value);

}  // namespace tapeflow::kernels::internal
