// kernels::conv2d & co. (conv.h): each call runs the copy of conv/ and pool.cc compiled for cpu_isa()'s
// level (internal/conv_isa.h).
#include "tape/core/cpu_isa.h"
#include "tape/kernels/conv.h"
#include "tape/kernels/internal/conv_isa.h"

namespace tapeflow::kernels {

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
