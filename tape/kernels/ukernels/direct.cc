// The direct convolution's register blocks (ukernels/internal/ukernels.h: direct_block,
// direct_filter_block), one template over Vec (ukernels/internal/vec.h), compiled per level.
#include "tape/kernels/ukernels/internal/ukernels.h"
#include "tape/kernels/ukernels/internal/vec.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk {

using namespace ukernel_shapes;

namespace {

template <class T>
void direct_block_t(const T* x0, std::int64_t step, const std::int64_t* tap_offset, std::int64_t k, const T* fq,
                    std::int64_t fp, T* y, std::int64_t ldy, const T* bias, bool relu) {
  using W = Vec<T>;
  using V = typename W::V;
  constexpr std::int64_t PX = kDirectPixels, L = W::kLanes;
  V acc[PX][2];
#pragma GCC unroll 6
  for (std::int64_t p = 0; p < PX; ++p) acc[p][0] = acc[p][1] = W::zero();
  for (std::int64_t t = 0; t < k; ++t, fq += fp) {
    const T* xt = x0 + tap_offset[t];
    V w0 = W::loadu(fq), w1 = W::loadu(fq + L);
    W::pin(w0, w1);
#pragma GCC unroll 6
    for (std::int64_t p = 0; p < PX; ++p) {
      const V v = W::set1(xt[p * step]);
      acc[p][0] = W::fmadd(v, w0, acc[p][0]);
      acc[p][1] = W::fmadd(v, w1, acc[p][1]);
    }
  }
  if (bias) {
    const V b0 = W::loadu(bias), b1 = W::loadu(bias + L);
#pragma GCC unroll 6
    for (std::int64_t p = 0; p < PX; ++p) {
      acc[p][0] = W::add(acc[p][0], b0);
      acc[p][1] = W::add(acc[p][1], b1);
    }
  }
  if (relu) {
#pragma GCC unroll 6
    for (std::int64_t p = 0; p < PX; ++p) {
      acc[p][0] = W::relu(acc[p][0]);
      acc[p][1] = W::relu(acc[p][1]);
    }
  }
#pragma GCC unroll 6
  for (std::int64_t p = 0; p < PX; ++p) {
    W::storeu(y + p * ldy, acc[p][0]);
    W::storeu(y + p * ldy + L, acc[p][1]);
  }
}

template <class T>
void direct_filter_block_t(const T* panel, std::int64_t step, const std::int64_t* off, std::int64_t wo, const T* d_row,
                           std::int64_t fp, T* part, std::int64_t nq) {
  using W = Vec<T>;
  using V = typename W::V;
  constexpr std::int64_t TB = kDirectTaps, L = W::kLanes;
  V acc[TB][2];
#pragma GCC unroll 6
  for (std::int64_t q = 0; q < TB; ++q) acc[q][0] = acc[q][1] = W::zero();
  for (std::int64_t ow = 0; ow < wo; ++ow) {
    const T* xp = panel + ow * step;
    const V d0 = W::loadu(d_row + ow * fp), d1 = W::loadu(d_row + ow * fp + L);
#pragma GCC unroll 6
    for (std::int64_t q = 0; q < TB; ++q) {
      const V v = W::set1(xp[off[q]]);
      acc[q][0] = W::fmadd(v, d0, acc[q][0]);
      acc[q][1] = W::fmadd(v, d1, acc[q][1]);
    }
  }
  // acc indexed by constants only: a runtime index made GCC keep acc in memory and store all 12
  // accumulators on every pixel (half the kernel's time).
#pragma GCC unroll 6
  for (std::int64_t q = 0; q < TB; ++q) {
    if (q >= nq) continue;
    T* out = part + q * fp;
    W::storeu(out, W::add(W::loadu(out), acc[q][0]));
    W::storeu(out + L, W::add(W::loadu(out + L), acc[q][1]));
  }
}

}  // namespace

#define TAPEFLOW_UK_DIRECT(T)                                                                                      \
  void direct_block(const T* x0, std::int64_t step, const std::int64_t* tap_offset, std::int64_t k, const T* fq,  \
                    std::int64_t fp, T* y, std::int64_t ldy, const T* bias, bool relu) {                          \
    direct_block_t(x0, step, tap_offset, k, fq, fp, y, ldy, bias, relu);                                          \
  }                                                                                                               \
  void direct_filter_block(const T* panel, std::int64_t step, const std::int64_t* off, std::int64_t wo,           \
                           const T* d_row, std::int64_t fp, T* part, std::int64_t nq) {                           \
    direct_filter_block_t(panel, step, off, wo, d_row, fp, part, nq);                                             \
  }
TAPEFLOW_UK_DIRECT(float)
#if !TAPEFLOW_UK_FLOAT_ONLY
TAPEFLOW_UK_DIRECT(double)
#endif
#undef TAPEFLOW_UK_DIRECT

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk
