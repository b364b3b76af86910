// The packed GEMM's packing (gemm/internal/tiles.h: pack_a, pack_a_rows, pack_b): 8 x 8 (4 x 4)
// register transposes for the transposed operands. Compiled for the avx2 level only
// (tape/CMakeLists.txt): it copies values, so the level that runs it changes no bit.
#include "tape/kernels/gemm/internal/tiles.h"

#include <immintrin.h>

#include <algorithm>

#if !defined(TAPEFLOW_KERNEL_LEVEL_avx2)
#error "ukernels/gemm_pack.cc is compiled for the avx2 level only (tape/CMakeLists.txt)"
#endif

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk {
namespace {

constexpr std::int64_t kMR = internal::kGemmMR;

// The B panel's two vectors per p: 8 floats or 4 doubles.
inline __m256 load2(const float* p) { return _mm256_loadu_ps(p); }
inline __m256d load2(const double* p) { return _mm256_loadu_pd(p); }
inline void store2(float* p, __m256 v) { _mm256_store_ps(p, v); }
inline void store2(double* p, __m256d v) { _mm256_store_pd(p, v); }

// Transposes 8 rows of 8 floats in place: afterwards r[q] = (r0[q], r1[q], ..., r7[q]).
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Transposes 4 rows of 4 doubles in place.
inline void transpose4(__m256d r[4]) {
  const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
  const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
  r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
  r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
  r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
  r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// dst[p * R + i] = src[i * ld + p] for i < R, p < kc: R rows, each contiguous along p, into
// kc groups of R. Writes up to 2 elements past the end (callers leave that slack).
template <int R>
void pack_rows(const float* src, std::int64_t ld, std::int64_t kc, float* dst) {
  static_assert(R == 6 || R == 16);
  std::int64_t p = 0;
  for (; p + 8 <= kc; p += 8, dst += 8 * R) {
    for (int h = 0; h < (R == 16 ? 2 : 1); ++h) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i)
        r[i] = (R == 6 && i >= 6) ? _mm256_setzero_ps() : _mm256_loadu_ps(src + (h * 8 + i) * ld + p);
      transpose8(r);
      if constexpr (R == 16) {
        for (int q = 0; q < 8; ++q) _mm256_store_ps(dst + q * R + h * 8, r[q]);
      } else {
        // Each 8-wide store spills 2 zeros into the next group; the next store overwrites them.
        for (int q = 0; q < 8; ++q) _mm256_storeu_ps(dst + q * R, r[q]);
      }
    }
  }
  for (; p < kc; ++p, dst += R)
    for (int i = 0; i < R; ++i) dst[i] = src[i * ld + p];
}

template <int R>
void pack_rows(const double* src, std::int64_t ld, std::int64_t kc, double* dst) {
  static_assert(R == 6 || R == 8);
  std::int64_t p = 0;
  for (; p + 4 <= kc; p += 4, dst += 4 * R) {
    __m256d r[4];
    for (int i = 0; i < 4; ++i) r[i] = _mm256_loadu_pd(src + i * ld + p);
    transpose4(r);
    for (int q = 0; q < 4; ++q) _mm256_storeu_pd(dst + q * R, r[q]);
    if constexpr (R == 8) {
      for (int i = 0; i < 4; ++i) r[i] = _mm256_loadu_pd(src + (4 + i) * ld + p);
      transpose4(r);
      for (int q = 0; q < 4; ++q) _mm256_storeu_pd(dst + q * R + 4, r[q]);
    } else {
      const __m256d r4 = _mm256_loadu_pd(src + 4 * ld + p), r5 = _mm256_loadu_pd(src + 5 * ld + p);
      const __m256d lo = _mm256_unpacklo_pd(r4, r5), hi = _mm256_unpackhi_pd(r4, r5);  // p+0, p+2 | p+1, p+3
      _mm_storeu_pd(dst + 0 * R + 4, _mm256_castpd256_pd128(lo));
      _mm_storeu_pd(dst + 1 * R + 4, _mm256_castpd256_pd128(hi));
      _mm_storeu_pd(dst + 2 * R + 4, _mm256_extractf128_pd(lo, 1));
      _mm_storeu_pd(dst + 3 * R + 4, _mm256_extractf128_pd(hi, 1));
    }
  }
  for (; p < kc; ++p, dst += R)
    for (int i = 0; i < R; ++i) dst[i] = src[i * ld + p];
}

// dst[p * 6 + i] = src[p * ld + i]: 6 contiguous values per p.
inline void pack_cols6(const float* src, std::int64_t ld, std::int64_t kc, float* dst) {
  for (std::int64_t p = 0; p < kc; ++p, src += ld, dst += 6) {
    _mm_storeu_ps(dst, _mm_loadu_ps(src));
    const __m128 tail = _mm_loadl_pi(_mm_setzero_ps(), reinterpret_cast<const __m64*>(src + 4));
    _mm_storel_pi(reinterpret_cast<__m64*>(dst + 4), tail);
  }
}
inline void pack_cols6(const double* src, std::int64_t ld, std::int64_t kc, double* dst) {
  for (std::int64_t p = 0; p < kc; ++p, src += ld, dst += 6) {
    _mm256_storeu_pd(dst, _mm256_loadu_pd(src));
    _mm_storeu_pd(dst + 4, _mm_loadu_pd(src + 4));
  }
}

// Element (i, p) of a panel of r < R rows at src (i * row_stride + p * p_stride) into kc groups
// of R, zero for i >= r: the edge panels.
template <class T>
void pack_partial(const T* src, std::int64_t row_stride, std::int64_t p_stride, std::int64_t r, std::int64_t R,
                  std::int64_t kc, T* dst) {
  std::fill(dst, dst + kc * R, T(0));
  if (p_stride == 1) {
    for (std::int64_t i = 0; i < r; ++i)
      for (std::int64_t p = 0; p < kc; ++p) dst[p * R + i] = src[i * row_stride + p];
  } else {
    for (std::int64_t p = 0; p < kc; ++p)
      for (std::int64_t i = 0; i < r; ++i) dst[p * R + i] = src[i * row_stride + p * p_stride];
  }
}

// Packs op(A)[0:mc, 0:kc] into panels of MR rows: panel r holds kc groups of MR values
// (rows r*MR .. r*MR+MR-1 at one p), zero padded past mc.
}  // namespace

template <class T>
void pack_a(std::int64_t mc, std::int64_t kc, const T* a, std::int64_t lda, bool ta, T* dst) {
  for (std::int64_t r = 0; r < mc; r += kMR, dst += kMR * kc) {
    const std::int64_t mr = std::min(kMR, mc - r);
    if (mr < kMR) pack_partial(ta ? a + r : a + r * lda, ta ? 1 : lda, ta ? lda : 1, mr, kMR, kc, dst);
    else if (ta) pack_cols6(a + r, lda, kc, dst);
    else pack_rows<kMR>(a + r * lda, lda, kc, dst);
  }
}

// pack_a for op(A) = Aᵀ read through a row table: element (i, p) = a[rows[p] * lda + i]. Row by
// row (each stored row read once, contiguously), its values dealt to the panels.
template <class T>
void pack_a_rows(std::int64_t mc, std::int64_t kc, const T* a, std::int64_t lda, const std::int64_t* rows, T* dst) {
  const std::int64_t full = mc / kMR * kMR;
  for (std::int64_t p = 0; p < kc; ++p) {
    const T* src = a + rows[p] * lda;
    T* d = dst + p * kMR;
    for (std::int64_t r = 0; r < full; r += kMR, d += kMR * kc) pack_cols6(src + r, 0, 1, d);  // one p
    if (full < mc)
      for (std::int64_t i = 0; i < kMR; ++i) d[i] = full + i < mc ? src[full + i] : T(0);
  }
}

// Packs op(B)[0:kc, 0:nc] into panels of NR columns: panel j holds kc groups of NR values, zero
// padded past nc.
template <class T>
void pack_b(std::int64_t kc, std::int64_t nc, const T* b, std::int64_t ldb, bool tb, T* dst) {
  constexpr std::int64_t NR = internal::kGemmNR<T>, L = NR / 2;
  for (std::int64_t j = 0; j < nc; j += NR, dst += NR * kc) {
    const std::int64_t nr = std::min(NR, nc - j);
    if (nr < NR) {
      pack_partial(tb ? b + j * ldb : b + j, tb ? ldb : 1, tb ? 1 : ldb, nr, NR, kc, dst);
    } else if (tb) {
      pack_rows<NR>(b + j * ldb, ldb, kc, dst);
    } else {
      const T* src = b + j;
      T* d = dst;
      for (std::int64_t p = 0; p < kc; ++p, d += NR, src += ldb) {
        store2(d, load2(src));
        store2(d + L, load2(src + L));
      }
    }
  }
}

#define TAPEFLOW_INSTANTIATE(T)                                                                             \
  template void pack_a<T>(std::int64_t, std::int64_t, const T*, std::int64_t, bool, T*);                    \
  template void pack_a_rows<T>(std::int64_t, std::int64_t, const T*, std::int64_t, const std::int64_t*, T*); \
  template void pack_b<T>(std::int64_t, std::int64_t, const T*, std::int64_t, bool, T*);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk
