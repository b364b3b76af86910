// The indirect GEMM (XNNPACK's indirection-buffer scheme; conv/igemm.cc): conv2d and
// conv2d_backprop_input for more than kDirectMaxChannels channels, and the row sweep that the
// Winograd kernel under a max pool (conv/winograd.cc) reuses for its 16 products.
#pragma once
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv/internal/common.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

struct NeededLines {
  std::int64_t h = std::numeric_limits<std::int64_t>::max(), w = std::numeric_limits<std::int64_t>::max();
};

// B [k, n] (b(r, j)) packed into panels of 2 packets of columns: panel jp holds rows 0..k-1 of
// columns [jp*NB, jp*NB + NB), zeros past n, at jp * k * NB.
template <class T, class B>
std::vector<T> pack_panels(std::int64_t k, std::int64_t n, B b) {
  constexpr std::int64_t NB = 2 * ei::packet_traits<T>::size;
  const std::int64_t panels = (n + NB - 1) / NB;
  std::vector<T> out(static_cast<std::size_t>(panels * k * NB), T(0));
  for (std::int64_t jp = 0; jp < panels; ++jp)
    for (std::int64_t r = 0; r < k; ++r)
      for (std::int64_t j = jp * NB; j < std::min(n, jp * NB + NB); ++j)
        out[static_cast<std::size_t>((jp * k + r) * NB + j - jp * NB)] = b(r, j);
  return out;
}

// Output rows [0, rows) of n values, row i at out[i], of an indirect GEMM whose row tile r (kIgemmMR
// rows) reads `steps` steps: kIgemmMR row pointers per step at ind + (r * steps + s) * kIgemmMR, the
// step's B rows at offset boff[s] of a panel of pack_panels (k_panel rows). Groups of `group` steps
// accumulate through the output. One FMA chain per element, steps ascending.
template <class T>
void igemm_rows(std::int64_t rows, std::int64_t steps, std::int64_t group, const T* const* ind,
                const std::int64_t* boff, std::int64_t klen, const T* packed, std::int64_t k_panel, std::int64_t n,
                T* const* out);

// y = conv2d(x, filter) then the epilogue, on the indirect GEMM; only output rows < need.h and
// columns < need.w are computed.
template <class T>
void conv2d_igemm(const T* x, const T* filter, T* y, const Conv2DGeometry& g, const ConvEpilogue<T>& epilogue,
                  NeededLines need = {});
// dx = the gradient of conv2d w.r.t. x on the indirect GEMM (every dx element written).
template <class T>
void conv2d_backprop_input_igemm(const T* filter, const T* dy, T* dx, const Conv2DGeometry& g);

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
