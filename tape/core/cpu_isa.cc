#include "tape/core/cpu_isa.h"

#include <algorithm>
#include <atomic>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#include <cstdlib>
#include <stdexcept>

namespace tapeflow {
namespace {

CpuIsa detect() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // libgcc's (and compiler-rt's) checks read CPUID and, for AVX and AVX-512, XGETBV: a level
  // counts only when the OS saves the ymm (XCR0 bits 1-2) and zmm (bits 5-7) state.
  __builtin_cpu_init();
  // F16C (CPUID.1:ECX bit 29; libgcc's check has no name for it) comes with every AVX2 CPU, but
  // is checked: the kAvx2 kernels are compiled with -mf16c (cmake/tapeflow_isa.cmake).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  return avx512 ? CpuIsa::kAvx512 : avx2 ? CpuIsa::kAvx2 : CpuIsa::kBaseline;
#else
  return CpuIsa::kBaseline;
#endif
}

// The best level this build compiled kernels for (cmake/tapeflow_isa.cmake): the opt-in native build
// with GCC < 13 has no avx512 level. Its drivers must not see kAvx512: they would lay data out for
// AVX-512 tiles that the build lacks (wrong convolution results at avx512 in that build).
#if defined(TAPEFLOW_NO_AVX512_TILES)
constexpr int kBuildBest = static_cast<int>(CpuIsa::kAvx2);
#else
constexpr int kBuildBest = static_cast<int>(CpuIsa::kAvx512);
#endif

// The cap: -1 until the first cpu_isa() reads TAPEFLOW_MAX_CPU_ISA.
std::atomic<int> g_cap{-1};

std::string known_names() { return "baseline, avx2, avx512"; }

}  // namespace

CpuIsa host_cpu_isa() {
  static const CpuIsa host = static_cast<CpuIsa>(std::min(static_cast<int>(detect()), kBuildBest));
  return host;
}

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline: return "baseline";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

CpuIsa parse_cpu_isa(std::string_view name, const std::string& what) {
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (name == cpu_isa_name(isa)) {
      if (static_cast<int>(isa) > static_cast<int>(host_cpu_isa()))
        throw std::invalid_argument(what + ": \"" + std::string(name) + "\" is not supported by this CPU and build (best: " +
                                    std::string(cpu_isa_name(host_cpu_isa())) + ")");
      return isa;
    }
  throw std::invalid_argument(what + ": unknown instruction-set level \"" + std::string(name) + "\" (expected " +
                              known_names() + ")");
}

CpuIsa cpu_isa() {
  int cap = g_cap.load(std::memory_order_relaxed);
  if (cap < 0) {
    const char* env = std::getenv("TAPEFLOW_MAX_CPU_ISA");
    cap = static_cast<int>(env && *env ? parse_cpu_isa(env) : host_cpu_isa());
    g_cap.store(cap, std::memory_order_relaxed);
  }
  return static_cast<CpuIsa>(cap);
}

CpuIsa set_max_cpu_isa(CpuIsa isa) {
  if (static_cast<int>(isa) > static_cast<int>(host_cpu_isa()))
    throw std::invalid_argument("set_max_cpu_isa: \"" + std::string(cpu_isa_name(isa)) +
                                "\" is not supported by this CPU and build (best: " + std::string(cpu_isa_name(host_cpu_isa())) +
                                ")");
  const CpuIsa previous = cpu_isa();
  g_cap.store(static_cast<int>(isa), std::memory_order_relaxed);
  return previous;
}

namespace internal {
bool cpu_isa_fuses_multiply_add(CpuIsa isa) {
#if defined(__FMA__)
  return true;  // the whole build targets FMA (TAPEFLOW_NATIVE on an FMA machine)
#else
  return isa != CpuIsa::kBaseline;
#endif
}
}  // namespace internal

}  // namespace tapeflow
