// kernels::conv2d & co. (conv.h): each call runs the copy of conv/ and pool.cc compiled for cpu_isa()'s
// level (internal/conv_isa.h).
#include "tape/core/cpu_isa.h"
#include "tape/kernels/conv.h"
#include "tape/kernels/internal/conv_isa.h"

#include <atomic>
#include <stdexcept>
#include <string>

#include "tape/kernels/conv/internal/forced_algorithm.h"

namespace tapeflow::kernels {

// The hook of conv/internal/forced_algorithm.h: one setting for every level's copy.
namespace internal {
namespace {
std::atomic<ConvAlgorithm> forced{ConvAlgorithm::kAuto};
}  // namespace
ConvAlgorithm force_conv_algorithm(ConvAlgorithm algorithm) { return forced.exchange(algorithm); }
ConvAlgorithm forced_conv_algorithm() { return forced.load(std::memory_order_relaxed); }
std::string_view conv_algorithm_name(ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::kAuto: return "auto";
    case ConvAlgorithm::kDirect: return "direct";
    case ConvAlgorithm::kIgemm: return "igemm";
    case ConvAlgorithm::kIm2col: return "im2col";
    case ConvAlgorithm::kFilterGemm: return "filter_gemm";
    case ConvAlgorithm::kWinograd: return "winograd";
    case ConvAlgorithm::kPoolFused: return "pool_fused";
    case ConvAlgorithm::kPointwise: return "pointwise";
  }
  return "?";
}
void throw_forced_conv_algorithm(std::string_view kernel, std::string_view why) {
  throw std::invalid_argument(std::string(kernel) + ": the forced algorithm " +
                              std::string(conv_algorithm_name(forced_conv_algorithm())) + " " + std::string(why));
}
}  // namespace internal

#if TAPEFLOW_HAS_AVX2_KERNELS
#define TAPEFLOW_CONV_DISPATCH(R, name, params, args)                                 \
  template <class T>                                                                  \
  R name params {                                                                     \
    if (cpu_isa() >= CpuIsa::kAvx2) return isa_avx2::name<T> args;                    \
    return isa_baseline::name<T> args;                                                \
  }
#else  // a build without the AVX2 copies (not x86-64)
#define TAPEFLOW_CONV_DISPATCH(R, name, params, args) \
  template <class T>                                  \
  R name params {                                     \
    return isa_baseline::name<T> args;                \
  }
#endif
TAPEFLOW_CONV_KERNELS(TAPEFLOW_CONV_DISPATCH)
#undef TAPEFLOW_CONV_DISPATCH

#define TAPEFLOW_CONV_INSTANTIATE(R, name, params, args) template R name<T> params;
#define T float
TAPEFLOW_CONV_KERNELS(TAPEFLOW_CONV_INSTANTIATE)
#undef T
#define T double
TAPEFLOW_CONV_KERNELS(TAPEFLOW_CONV_INSTANTIATE)
#undef T
#undef TAPEFLOW_CONV_INSTANTIATE

}  // namespace tapeflow::kernels
