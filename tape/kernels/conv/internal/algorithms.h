// The convolution algorithms, one file each beside this header, that conv/conv.cc chooses from
// (per-level copies: namespace isa_<level>, TAPEFLOW_KERNEL_ISA). Semantics as conv.h's; each
// writes every output element unless it says otherwise.
#pragma once
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include <cstdint>

#include "tape/kernels/conv.h"
#include "tape/kernels/gemm/internal/packed.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

// direct.cc: few input channels. The forward product with its epilogue; the filter gradient
// added into dfilter (zeroed by the caller).
template <class T>
void conv2d_direct(const T* x, const T* filter, T* y, const Conv2DGeometry& g, const ConvEpilogue<T>& epilogue);
template <class T>
void conv2d_backprop_filter_direct(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g);

// im2col.cc: the input gradient for few input channels (col2im of dy @ filterᵀ), and the filter
// gradient on patch tiles and the GEMM (x in place when pointwise).
template <class T>
void conv2d_backprop_input_im2col(const T* filter, const T* dy, T* dx, const Conv2DGeometry& g);
template <class T>
void conv2d_backprop_filter_im2col(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g);

#if TAPEFLOW_GEMM_AVX2
// filter_gemm.cc: whether the in-place packed filter gradient takes g, and that gradient.
template <class T>
bool filter_packed(const Conv2DGeometry& g);
template <class T>
void conv2d_backprop_filter_packed(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g);

// winograd.cc: whether the Winograd filter gradient takes g (float), and that gradient over the kept
// extent kh x kw of dy (false when a value came out inf or NaN: dfilter to be overwritten).
template <class T>
bool winograd_filter(const Conv2DGeometry& g);
template <class T>
bool conv2d_backprop_filter_winograd(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g, std::int64_t kh,
                                     std::int64_t kw);
#endif

// winograd.cc: whether Winograd F(2x2, 3x3) under a 2x2 max pool takes (g, pool), and that fused
// product (false when a value came out inf or NaN: to be redone another way).
template <class T>
bool winograd_pool(const Conv2DGeometry& g, const Conv2DGeometry& pool);
template <class T>
bool conv2d_max_pool2d_winograd(const T* x, const T* filter, const T* bias, T* y, std::int32_t* argmax,
                                const Conv2DGeometry& g, const Conv2DGeometry& pool, bool relu);

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
