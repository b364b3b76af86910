// The packed GEMM's register tiles and the loop over one block's tiles (gemm/internal/tiles.h:
// gemm_block), one template over ukernels/internal/vec.h compiled for the avx2 level (6 x 16 floats,
// 6 x 8 doubles: one B panel) and the avx512 level (6 x 32 floats, 6 x 16 doubles: two adjacent B
// panels; tape/CMakeLists.txt).
#include "tape/kernels/gemm/internal/tiles.h"

#include <immintrin.h>

#include <algorithm>

#include "tape/kernels/ukernels/internal/vec.h"

#if !defined(TAPEFLOW_KERNEL_LEVEL_avx2) && !defined(TAPEFLOW_KERNEL_LEVEL_avx512)
#error "ukernels/gemm.cc is compiled for the avx2 and avx512 levels only (tape/CMakeLists.txt)"
#endif

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk {
namespace {

using internal::kGemmMR;
using internal::kGemmNR;

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

// Columns of this level's full tile: two vectors (one B panel at avx2, two at avx512).
template <class T>
constexpr std::int64_t kTileCols = 2 * Vec<T>::kLanes;

// C tile [R, W * L] (row stride ldc) = (accumulate ? C : 0) + sum_p A(0:R, p) * B(p, 0:W L), one
// FMA per element and p, p ascending: the same arithmetic for every R, W and level, so edge tiles
// round like full ones. B: packed panels of NR columns from bp (kc groups of NR values each),
// vector w's L columns at w L, in the panel after bp's when w L >= NR.
template <class T, int R, int W, class Panel>
void micro_kernel(std::int64_t kc, Panel ap, const T* __restrict bp, T* __restrict c, std::int64_t ldc,
                  bool accumulate) {
  using S = Vec<T>;
  using V = typename S::V;
  constexpr int L = S::kLanes;
  constexpr std::int64_t NR = kGemmNR<T>;
  static_assert(W * L <= 2 * NR && NR % L == 0);
  const T* __restrict bq = bp + kc * NR;  // the next panel (read only when W L > NR)
  V x[R][W];
  if (accumulate) {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w) x[i][w] = S::loadu(c + i * ldc + w * L);
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w) x[i][w] = S::zero();
      // The tile is written at the end; fetch its lines while the loop runs.
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + W * L - 1), _MM_HINT_T0);
    }
  }
#pragma GCC unroll 4
  for (std::int64_t p = 0; p < kc; ++p) {
    V b[W];
#pragma GCC unroll 2
    for (int w = 0; w < W; ++w) b[w] = S::loadu((w * L < NR ? bp : bq) + w * L % NR);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const V a = S::set1(*ap.at(i));
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w) x[i][w] = S::fmadd(a, b[w], x[i][w]);
    }
    ap.next();
    bp += NR;
    bq += NR;
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int w = 0; w < W; ++w) S::storeu(c + i * ldc + w * L, x[i][w]);
}

// micro_kernel with R = mr (1..MR) rows.
template <class T, int W, class Panel>
void rows_kernel(std::int64_t mr, std::int64_t kc, Panel ap, const T* bp, T* c, std::int64_t ldc, bool accumulate) {
  switch (mr) {
    case 6: return micro_kernel<T, 6, W>(kc, ap, bp, c, ldc, accumulate);
    case 5: return micro_kernel<T, 5, W>(kc, ap, bp, c, ldc, accumulate);
    case 4: return micro_kernel<T, 4, W>(kc, ap, bp, c, ldc, accumulate);
    case 3: return micro_kernel<T, 3, W>(kc, ap, bp, c, ldc, accumulate);
    case 2: return micro_kernel<T, 2, W>(kc, ap, bp, c, ldc, accumulate);
    default: return micro_kernel<T, 1, W>(kc, ap, bp, c, ldc, accumulate);
  }
}

// One tile of mr <= MR rows and nr <= kTileCols columns. Widths of one or two vectors are stored
// in place; others go through a tile on the stack (only nr columns are copied back).
template <class T, class Panel>
void tile(std::int64_t mr, std::int64_t nr, std::int64_t kc, Panel ap, const T* bp, T* c, std::int64_t ldc,
          bool accumulate) {
  constexpr std::int64_t L = Vec<T>::kLanes, TW = kTileCols<T>;
  if (nr == TW) return rows_kernel<T, 2>(mr, kc, ap, bp, c, ldc, accumulate);
  if (nr == L) return rows_kernel<T, 1>(mr, kc, ap, bp, c, ldc, accumulate);
  alignas(64) T buf[kGemmMR * TW];
  if (accumulate)
    for (std::int64_t i = 0; i < mr; ++i) std::copy(c + i * ldc, c + i * ldc + nr, buf + i * TW);
  if (nr < L) rows_kernel<T, 1>(mr, kc, ap, bp, buf, TW, accumulate);
  else rows_kernel<T, 2>(mr, kc, ap, bp, buf, TW, accumulate);
  for (std::int64_t i = 0; i < mr; ++i) std::copy(buf + i * TW, buf + i * TW + nr, c + i * ldc);
}

// The MR x kTileCols tiles of one block, A through `panel(ir)`.
template <class T, class PanelAt>
void tiles(const internal::GemmBlock<T>& blk, PanelAt panel, internal::GemmPrefetch& pf) {
  constexpr std::int64_t MR = kGemmMR, NR = kGemmNR<T>, TW = kTileCols<T>;
  const std::int64_t mc = blk.mc, nc = blk.nc, kc = blk.kc, ldc = blk.ldc;
  T* const c = blk.c;
  for (std::int64_t jr = 0; jr < nc; jr += TW) {
    const std::int64_t nr = std::min(TW, nc - jr);
    const T* bpanel = blk.bp + jr * kc;
    for (std::int64_t ir = 0; ir < mc; ir += MR) {
      const std::int64_t mr = std::min(MR, mc - ir);
      if (blk.accumulate) {
        // The next tile starts by loading its C, which a large C (a filter gradient's [256, 3200])
        // holds far from L1: fetch it while this tile runs (W9 convT1's filter gradient on one
        // thread: 207 -> 150 ms; 1024^3 product: 38 -> 29 ms).
        const std::int64_t ni = ir + MR < mc ? ir + MR : 0, nj = ir + MR < mc ? jr : jr + TW;
        if (nj < nc)
          for (std::int64_t i = ni; i < std::min(ni + MR, mc); ++i) {
            const T* row = c + i * ldc + nj;
            _mm_prefetch(reinterpret_cast<const char*>(row), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(row + NR - 1), _MM_HINT_T0);
            if constexpr (TW > NR) _mm_prefetch(reinterpret_cast<const char*>(row + 2 * NR - 1), _MM_HINT_T0);
          }
      }
      tile<T>(mr, nr, kc, panel(ir), bpanel, c + ir * ldc + jr, ldc, blk.accumulate);
      pf.step();
    }
  }
}

template <class T>
void gemm_block_t(const internal::GemmBlock<T>& blk, internal::GemmPrefetch& pf) {
  if (blk.a_packed)
    tiles(blk, [&](std::int64_t ir) { return PackedPanel<T>{blk.a + ir * blk.kc}; }, pf);
  else
    tiles(blk, [&](std::int64_t ir) { return RowsPanel<T>{blk.a + ir * blk.lda, blk.lda}; }, pf);
}

}  // namespace

void gemm_block(const internal::GemmBlock<float>& block, internal::GemmPrefetch& prefetch) {
  gemm_block_t(block, prefetch);
}
void gemm_block(const internal::GemmBlock<double>& block, internal::GemmPrefetch& prefetch) {
  gemm_block_t(block, prefetch);
}

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk
