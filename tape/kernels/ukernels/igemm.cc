// The indirect GEMM's register tile (ukernels/internal/ukernels.h: igemm_tile), one template over
// Vec (ukernels/internal/vec.h), compiled per level.
#include "tape/kernels/ukernels/internal/ukernels.h"
#include "tape/kernels/ukernels/internal/vec.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk {

using namespace ukernel_shapes;

namespace {

// TILES row tiles share each pair of B loads (2 x kIgemmMR rows x 2 vectors: 24 accumulators, for
// the 32 zmm registers of AVX-512).
template <class T, int TILES>
void igemm_tile_t(std::int64_t steps, const T* const* a, std::int64_t a_stride, const std::int64_t* boff,
                  std::int64_t klen, const T* bp, const T* bq, std::int64_t bstride, T* const* c, bool accumulate) {
  using W = Vec<T>;
  using V = typename W::V;
  constexpr std::int64_t MR = kIgemmMR * TILES, L = W::kLanes;
  V acc[MR][2];
  if (accumulate) {
#pragma GCC unroll 12
    for (std::int64_t q = 0; q < MR; ++q) {
      acc[q][0] = W::loadu(c[q]);
      acc[q][1] = W::loadu(c[q] + L);
    }
  } else {
#pragma GCC unroll 12
    for (std::int64_t q = 0; q < MR; ++q) {
      acc[q][0] = acc[q][1] = W::zero();
      // The tile is written at the end: fetch its lines while the loop runs (as the GEMM does).
      __builtin_prefetch(c[q], 1);
      __builtin_prefetch(c[q] + 2 * L - 1, 1);
    }
  }
  for (std::int64_t s = 0; s < steps; ++s, a += kIgemmMR) {
    const T* rows[MR];
#pragma GCC unroll 12
    for (std::int64_t q = 0; q < MR; ++q) rows[q] = a[q / kIgemmMR * a_stride + q % kIgemmMR];
    const T* b = bp + boff[s];
    const T* d = bq + boff[s];
#pragma GCC unroll 2
    for (std::int64_t p = 0; p < klen; ++p, b += bstride, d += bstride) {
      const V b0 = W::loadu(b), b1 = W::loadu(d);
#pragma GCC unroll 12
      for (std::int64_t q = 0; q < MR; ++q) {
        const V v = W::set1(rows[q][p]);
        acc[q][0] = W::fmadd(v, b0, acc[q][0]);
        acc[q][1] = W::fmadd(v, b1, acc[q][1]);
      }
    }
  }
#pragma GCC unroll 12
  for (std::int64_t q = 0; q < MR; ++q) {
    W::storeu(c[q], acc[q][0]);
    W::storeu(c[q] + L, acc[q][1]);
  }
}

}  // namespace

#define TAPEFLOW_UK_IGEMM(T)                                                                                         \
  void igemm_tile(int tiles, std::int64_t steps, const T* const* a, std::int64_t a_stride, const std::int64_t* boff, \
                  std::int64_t klen, const T* bp, const T* bq, std::int64_t bstride, T* const* c, bool accumulate) { \
    if (tiles == 2)                                                                                                  \
      igemm_tile_t<T, 2>(steps, a, a_stride, boff, klen, bp, bq, bstride, c, accumulate);                            \
    else                                                                                                             \
      igemm_tile_t<T, 1>(steps, a, a_stride, boff, klen, bp, bq, bstride, c, accumulate);                            \
  }
TAPEFLOW_UK_IGEMM(float)
#if !TAPEFLOW_UK_FLOAT_ONLY
TAPEFLOW_UK_IGEMM(double)
#endif
#undef TAPEFLOW_UK_IGEMM

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk
