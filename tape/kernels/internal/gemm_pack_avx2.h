// The packed GEMM's AVX2 vector helpers and packing (internal/gemm_pack_avx2.cc), shared by the
// GEMM's loops and tiles (internal/gemm_avx2.cc). AVX2 + FMA copy only (internal::isa_avx2).
// Layouts: pack_a writes kc groups of kGemmMR values per row panel (zero padded past mc), pack_b
// kc groups of kGemmNR<T> values per column panel (zero padded past nc), 64-byte aligned; pack_a
// and pack_a_rows may write up to 8 values past the end (callers leave that slack).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "tape/kernels/internal/gemm_avx2.h"

namespace tapeflow::kernels::internal::isa_avx2 {

template <class T>
struct Simd;

template <>
struct Simd<float> {
  using V = __m256;
  static constexpr int kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_load_ps(p); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, V v) { _mm256_store_ps(p, v); }
  static V bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
};

template <>
struct Simd<double> {
  using V = __m256d;
  static constexpr int kLanes = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const double* p) { return _mm256_load_pd(p); }
  static V loadu(const double* p) { return _mm256_loadu_pd(p); }
  static void storeu(double* p, V v) { _mm256_storeu_pd(p, v); }
  static void store(double* p, V v) { _mm256_store_pd(p, v); }
  static V bcast(const double* p) { return _mm256_broadcast_sd(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
};

// op(A)[0:mc, 0:kc] (ta: A stored transposed, row stride lda) into row panels.
template <class T>
void pack_a(std::int64_t mc, std::int64_t kc, const T* a, std::int64_t lda, bool ta, T* dst);
// pack_a for op(A) = Aᵀ read through a row table: element (i, p) = a[rows[p] * lda + i].
template <class T>
void pack_a_rows(std::int64_t mc, std::int64_t kc, const T* a, std::int64_t lda, const std::int64_t* rows, T* dst);
// op(B)[0:kc, 0:nc] (tb: B stored transposed, row stride ldb) into column panels.
template <class T>
void pack_b(std::int64_t kc, std::int64_t nc, const T* b, std::int64_t ldb, bool tb, T* dst);

}  // namespace tapeflow::kernels::internal::isa_avx2
