#include "tape/kernels/internal/simd512.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tapeflow::kernels::internal {
namespace {

// -1: not decided yet; 0: off; 1: on.
std::atomic<int> g_state{-1};

int decide() { return avx512_supported() && avx512_allowed_by(std::getenv("TAPEFLOW_AVX512")) ? 1 : 0; }

}  // namespace

bool avx512_allowed_by(const char* value) {
  if (!value || std::string(value) == "1") return true;
  if (std::string(value) == "0") return false;
  throw std::invalid_argument("TAPEFLOW_AVX512: expected 0 or 1, got \"" + std::string(value) + "\"");
}

bool avx512_supported() {
#if TAPEFLOW_HAVE_AVX512_KERNELS
  // libgcc's check covers the OS too (XCR0 must enable the zmm state).
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
#else
  return false;
#endif
}

bool avx512_enabled() {
  int s = g_state.load(std::memory_order_relaxed);
  if (s < 0) {
    s = decide();
    g_state.store(s, std::memory_order_relaxed);
  }
  return s == 1;
}

bool set_avx512_enabled(bool on) {
  const bool was = avx512_enabled();
  g_state.store(on && avx512_supported() ? 1 : 0, std::memory_order_relaxed);
  return was;
}

}  // namespace tapeflow::kernels::internal
