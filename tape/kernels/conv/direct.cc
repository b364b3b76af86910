// The direct convolution's entry points for whole tensors (conv/direct.h): the forward product and
// the filter gradient reading dy in place.
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv/internal/algorithms.h"
#include "tape/kernels/conv/internal/direct.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

template <class T>
void conv2d_direct(const T* x, const T* filter, T* y, const Conv2DGeometry& g, const ConvEpilogue<T>& epilogue) {
  const DirectConv<T> conv(x, filter, g);
  parallel_for(g.n * g.ho, conv.grain(), [&](std::int64_t b, std::int64_t e) {
    std::vector<T> panel = conv.panel();
    for (std::int64_t r = b; r < e; ++r) conv.row(r, y + r * g.wo * g.f, panel, epilogue);
  });
}

template <class T>
void conv2d_backprop_filter_direct(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g) {
  conv2d_backprop_filter_direct_rows(
      x, [&] { return [&](std::int64_t r) { return dy + r * g.wo * g.f; }; }, dfilter, g);
}

#define TAPEFLOW_INSTANTIATE(T)                                                                                     \
  template void conv2d_direct<T>(const T*, const T*, T*, const Conv2DGeometry&, const ConvEpilogue<T>&);            \
  template void conv2d_backprop_filter_direct<T>(const T*, const T*, T*, const Conv2DGeometry&);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
