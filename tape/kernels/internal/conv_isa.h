// The per-level copies of the convolution and pooling kernels (tape/kernels/conv/*.cc and pool.cc
// compiled once per instruction-set level, tape/CMakeLists.txt) and the one list of their
// signatures, from which conv/dispatch.cc writes kernels::conv2d & co. (conv.h: shapes, semantics,
// errors).
// Facts:    isa_baseline is compiled for the build's baseline (x86-64-v2), isa_avx2 for AVX2 + FMA
//           (which calls isa_avx512's register tiles, tape/kernels/ukernels/, when
//           avx512_tiles() holds); conv/dispatch.cc calls isa_avx2 when cpu_isa() >= kAvx2.
#pragma once

#include <cstdint>

#include "tape/kernels/conv.h"

// Whether the build has the AVX2 copies (tape/CMakeLists.txt builds them on x86-64).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TAPEFLOW_HAS_AVX2_KERNELS 1
#else
#define TAPEFLOW_HAS_AVX2_KERNELS 0
#endif

// X(return type, name, (parameters), (arguments)) for every kernel of conv.h; T is the element type.
#define TAPEFLOW_CONV_KERNELS(X)                                                                                  \
  X(void, conv2d, (const T* x, const T* filter, T* y, const Conv2DGeometry& g, ConvEpilogue<T> epilogue),       \
    (x, filter, y, g, epilogue))                                                                                   \
  X(void, conv2d_backprop_input, (const T* filter, const T* dy, T* dx, const Conv2DGeometry& g), (filter, dy, dx, g)) \
  X(void, conv2d_backprop_filter, (const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g), (x, dy, dfilter, g)) \
  X(void, max_pool2d, (const T* x, T* y, const Conv2DGeometry& g), (x, y, g))                                      \
  X(void, max_pool2d_grad, (const T* x, const T* dy, T* dx, const Conv2DGeometry& g), (x, dy, dx, g))              \
  X(void, max_pool2d_grad_grad, (const T* x, const T* ddx, T* y, const Conv2DGeometry& g), (x, ddx, y, g))         \
  X(void, max_pool2d_with_argmax, (const T* x, T* y, std::int32_t* argmax, const Conv2DGeometry& g),               \
    (x, y, argmax, g))                                                                                             \
  X(bool, max_pool2d_grad_with_argmax, (const T* dy, const std::int32_t* argmax, T* dx, const Conv2DGeometry& g),  \
    (dy, argmax, dx, g))                                                                                           \
  X(bool, max_pool2d_grad_grad_with_argmax,                                                                        \
    (const T* ddx, const std::int32_t* argmax, T* y, const Conv2DGeometry& g), (ddx, argmax, y, g))                \
  X(void, conv2d_max_pool2d,                                                                                       \
    (const T* x, const T* filter, const T* bias, T* y, std::int32_t* argmax, const Conv2DGeometry& conv,           \
     const Conv2DGeometry& pool, bool relu),                                                                       \
    (x, filter, bias, y, argmax, conv, pool, relu))                                                                \
  X(bool, conv2d_backprop_filter_bias_with_argmax,                                                                 \
    (const T* x, const T* dy, const std::int32_t* argmax, T* dfilter, T* dbias, const Conv2DGeometry& conv,       \
     const Conv2DGeometry& pool, const T* relu_y),                                                                 \
    (x, dy, argmax, dfilter, dbias, conv, pool, relu_y))                                                           \
  X(void, avg_pool2d, (const T* x, T* y, const Conv2DGeometry& g), (x, y, g))                                      \
  X(void, avg_pool2d_grad, (const T* dy, T* dx, const Conv2DGeometry& g), (dy, dx, g))

#define TAPEFLOW_CONV_DECLARE(R, name, params, args) \
  template <class T>                                 \
  R name params;

namespace tapeflow::kernels::isa_baseline {
TAPEFLOW_CONV_KERNELS(TAPEFLOW_CONV_DECLARE)
}  // namespace tapeflow::kernels::isa_baseline
namespace tapeflow::kernels::isa_avx2 {
TAPEFLOW_CONV_KERNELS(TAPEFLOW_CONV_DECLARE)
}  // namespace tapeflow::kernels::isa_avx2

#undef TAPEFLOW_CONV_DECLARE
