// The packed GEMM's AVX-512 float tile (ukernels/gemm_tiles_512.h). Compiled for AVX2 + FMA only
// (tape/CMakeLists.txt), as internal/gemm_avx2.cc, whose tile loop calls it.
#include "tape/kernels/ukernels/internal/gemm_tiles_512.h"

#include <immintrin.h>

namespace tapeflow::kernels::internal::isa_avx2 {

#if TAPEFLOW_HAVE_AVX512_KERNELS
// micro_kernel for floats over two adjacent packed B panels (32 columns: bp and bp + kc * NR) with
// R rows x 2 zmm accumulators: per element the same FMA chain as micro_kernel's, so the same bits.
namespace {

template <int R, class Panel>
TAPEFLOW_AVX512 void micro_kernel_512(std::int64_t kc, Panel ap, const float* __restrict bp, float* __restrict c,
                                      std::int64_t ldc, bool accumulate) {
  constexpr std::int64_t NR = kGemmNR<float>;
  const float* __restrict bq = bp + kc * NR;
  __m512 x[R][2];
  if (accumulate) {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      x[i][0] = _mm512_loadu_ps(c + i * ldc);
      x[i][1] = _mm512_loadu_ps(c + i * ldc + NR);
    }
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      x[i][0] = x[i][1] = _mm512_setzero_ps();
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 2 * NR - 1), _MM_HINT_T0);
    }
  }
#pragma GCC unroll 4
  for (std::int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bq);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m512 a = _mm512_set1_ps(*ap.at(i));
      x[i][0] = _mm512_fmadd_ps(a, b0, x[i][0]);
      x[i][1] = _mm512_fmadd_ps(a, b1, x[i][1]);
    }
    ap.next();
    bp += NR;
    bq += NR;
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    _mm512_storeu_ps(c + i * ldc, x[i][0]);
    _mm512_storeu_ps(c + i * ldc + NR, x[i][1]);
  }
}

}  // namespace

template <class Panel>
TAPEFLOW_AVX512 void tile_512(std::int64_t mr, std::int64_t kc, Panel ap, const float* bp, float* c, std::int64_t ldc,
                              bool accumulate) {
  switch (mr) {
    case 6: return micro_kernel_512<6>(kc, ap, bp, c, ldc, accumulate);
    case 5: return micro_kernel_512<5>(kc, ap, bp, c, ldc, accumulate);
    case 4: return micro_kernel_512<4>(kc, ap, bp, c, ldc, accumulate);
    case 3: return micro_kernel_512<3>(kc, ap, bp, c, ldc, accumulate);
    case 2: return micro_kernel_512<2>(kc, ap, bp, c, ldc, accumulate);
    default: return micro_kernel_512<1>(kc, ap, bp, c, ldc, accumulate);
  }
}
template void tile_512<PackedPanel<float>>(std::int64_t, std::int64_t, PackedPanel<float>, const float*, float*,
                                           std::int64_t, bool);
template void tile_512<RowsPanel<float>>(std::int64_t, std::int64_t, RowsPanel<float>, const float*, float*,
                                         std::int64_t, bool);
#endif

}  // namespace tapeflow::kernels::internal::isa_avx2
