// The one SIMD vocabulary of the register tiles (tape/kernels/ukernels/*.cc): Vec<T>, the widest
// vector of T that the file's compile flags allow, with the few operations the tiles use.
// Facts:    Included only by ukernels/*.cc, which tape/CMakeLists.txt compiles once per level:
//           baseline (x86-64-v2: SSE, 4 floats / 2 doubles, no FMA), avx2 (AVX2 + FMA: 8 / 4),
//           avx512 (AVX-512F/BW/VL: 16 / 8; the convolutions have no double tiles at this level).
//           fmadd is one fused multiply-add where the level has FMA, else a multiply then an add
//           (Eigen's pmadd on the same level: the drivers' packet code rounds alike); relu keeps
//           v where 0 < v, else 0 (a NaN gives 0), as Eigen's pselect(pcmp_lt(0, v), v, 0).
//           The types live in the level's namespace (TAPEFLOW_KERNEL_ISA): no inline function is
//           shared between levels.
#pragma once

#ifndef TAPEFLOW_KERNEL_ISA
#error "ukernels are compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#if defined(TAPEFLOW_KERNEL_LEVEL_avx512) && !defined(__AVX512F__)
#error "ukernels: the avx512 level is compiled without AVX-512F (cmake/tapeflow_isa.cmake: TAPEFLOW_ISA_FLAGS_avx512)"
#endif
#if defined(TAPEFLOW_KERNEL_LEVEL_avx2) && !(defined(__AVX2__) && defined(__FMA__))
#error "ukernels: the avx2 level is compiled without AVX2 + FMA (cmake/tapeflow_isa.cmake: TAPEFLOW_ISA_FLAGS_avx2)"
#endif

#include <immintrin.h>

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk {

template <class T>
struct Vec;

#if defined(__AVX512F__)
// The convolutions' AVX-512 tiles are for floats only (their doubles keep the AVX2 tiles); the
// packed GEMM's tiles (ukernels/gemm.cc) use Vec<double> too.
#define TAPEFLOW_UK_FLOAT_ONLY 1
template <>
struct Vec<float> {
  using V = __m512;
  static constexpr int kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V relu(V v) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(_mm512_setzero_ps(), v, _CMP_LT_OQ), v); }
  static void pin(V&, V&) {}  // 32 zmm registers: GCC keeps the operands without help
};
template <>
struct Vec<double> {
  using V = __m512d;
  static constexpr int kLanes = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V loadu(const double* p) { return _mm512_loadu_pd(p); }
  static void storeu(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V set1(double x) { return _mm512_set1_pd(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V relu(V v) { return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(_mm512_setzero_pd(), v, _CMP_LT_OQ), v); }
  static void pin(V&, V&) {}
};
#elif defined(__AVX2__) && defined(__FMA__)
#define TAPEFLOW_UK_FLOAT_ONLY 0
template <>
struct Vec<float> {
  using V = __m256;
  static constexpr int kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V relu(V v) {
    const V z = _mm256_setzero_ps();
    return _mm256_blendv_ps(z, v, _mm256_cmp_ps(z, v, _CMP_LT_OQ));
  }
  // Keeps two vectors in registers: GCC otherwise folds their load into every FMA that uses them,
  // which doubles the loads per tap of the direct kernels (load-bound on Zen 3 at 2 x 256-bit loads
  // per cycle).
  static void pin(V& a, V& b) { asm("" : "+x"(a), "+x"(b)); }
};
template <>
struct Vec<double> {
  using V = __m256d;
  static constexpr int kLanes = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V loadu(const double* p) { return _mm256_loadu_pd(p); }
  static void storeu(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V set1(double x) { return _mm256_set1_pd(x); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V relu(V v) {
    const V z = _mm256_setzero_pd();
    return _mm256_blendv_pd(z, v, _mm256_cmp_pd(z, v, _CMP_LT_OQ));
  }
  static void pin(V& a, V& b) { asm("" : "+x"(a), "+x"(b)); }
};
#else
#define TAPEFLOW_UK_FLOAT_ONLY 0
template <>
struct Vec<float> {
  using V = __m128;
  static constexpr int kLanes = 4;
  static V zero() { return _mm_setzero_ps(); }
  static V loadu(const float* p) { return _mm_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm_storeu_ps(p, v); }
  static V set1(float x) { return _mm_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
  static V add(V a, V b) { return _mm_add_ps(a, b); }
  static V relu(V v) {
    const V z = _mm_setzero_ps();
    return _mm_blendv_ps(z, v, _mm_cmplt_ps(z, v));
  }
  static void pin(V& a, V& b) { asm("" : "+x"(a), "+x"(b)); }
};
template <>
struct Vec<double> {
  using V = __m128d;
  static constexpr int kLanes = 2;
  static V zero() { return _mm_setzero_pd(); }
  static V loadu(const double* p) { return _mm_loadu_pd(p); }
  static void storeu(double* p, V v) { _mm_storeu_pd(p, v); }
  static V set1(double x) { return _mm_set1_pd(x); }
  static V fmadd(V a, V b, V c) { return _mm_add_pd(_mm_mul_pd(a, b), c); }
  static V add(V a, V b) { return _mm_add_pd(a, b); }
  static V relu(V v) {
    const V z = _mm_setzero_pd();
    return _mm_blendv_pd(z, v, _mm_cmplt_pd(z, v));
  }
  static void pin(V& a, V& b) { asm("" : "+x"(a), "+x"(b)); }
};
#endif

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk
