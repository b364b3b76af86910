// The packed GEMM's AVX-512 float tile (ukernels/gemm_tiles_512.cc) and the A-panel views it and
// the AVX2 tiles of internal/gemm_avx2.cc read through. AVX2 + FMA copy only
// (internal::isa_avx2); the tile carries the avx512 target attribute (internal/simd512.h) and
// runs when avx512_tiles<float>() holds, with the AVX2 tiles' bits.
#pragma once

#include <cstdint>

#include "tape/kernels/internal/gemm_avx2.h"
#include "tape/kernels/internal/simd512.h"

namespace tapeflow::kernels::internal::isa_avx2 {

// Where the micro-kernel reads op(A)(i, p), i < MR, of its tile: at(i) for the current p,
// next() steps p.
template <class T>
struct PackedPanel {  // pack_a's layout: kc groups of MR values
  const T* a;
  const T* at(int i) const { return a + i; }
  void next() { a += kGemmMR; }
};
template <class T>
struct RowsPanel {  // A itself, not transposed: row i at a + i * lda
  const T* a;
  std::int64_t lda;
  const T* at(int i) const { return a + i * lda; }
  void next() { ++a; }
};

#if TAPEFLOW_HAVE_AVX512_KERNELS
// C tile [mr, 32] (mr <= kGemmMR, row stride ldc) = (accumulate ? C : 0) + A panel x two adjacent
// packed B panels (bp and bp + kc * kGemmNR<float>): per element the same FMA chain as the AVX2
// micro kernel's, so the same bits. Panel: PackedPanel<float> or RowsPanel<float>.
template <class Panel>
TAPEFLOW_AVX512 void tile_512(std::int64_t mr, std::int64_t kc, Panel ap, const float* bp, float* c, std::int64_t ldc,
                              bool accumulate);
#endif

}  // namespace tapeflow::kernels::internal::isa_avx2
