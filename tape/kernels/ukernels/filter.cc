// The filter gradient's in-place register tile (ukernels/internal/ukernels.h: filter_tile_rows),
// one template over Vec (ukernels/internal/vec.h). Only the AVX-512 level has it (its 28
// accumulators need 32 vector registers); the other levels' filter gradients run on the packed
// GEMM with the same arithmetic.
#include "tape/kernels/ukernels/internal/ukernels.h"
#include "tape/kernels/ukernels/internal/vec.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk {

#if defined(__AVX512F__)
using namespace ukernel_shapes;

namespace {

template <class T, int R>
void filter_tile_t(std::int64_t np, const T* const* xp, const T* const* dp, std::int64_t f0, T* out, std::int64_t ldo,
                   bool add) {
  using W = Vec<T>;
  using V = typename W::V;
  constexpr std::int64_t L = W::kLanes;
  V acc[R][2];
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = W::zero();
  // The pixels' x and dy lines are fetched kFilterInPlacePrefetch pixels ahead: the hardware
  // prefetchers miss the dy lines of wide layers (W9 convT1, 1 KB rows: its filter gradient
  // 40-42 -> 33 ms at 2T; W8 unchanged).
  constexpr std::int64_t pf = kFilterInPlacePrefetch;
#pragma GCC unroll 2
  for (std::int64_t p = 0; p < np; ++p) {
    if (p + pf < np) {
      __builtin_prefetch(xp[p + pf], 0, 3);
      __builtin_prefetch(xp[p + pf] + L, 0, 3);
      __builtin_prefetch(dp[p + pf] + f0, 0, 3);
    }
    const V b0 = W::loadu(xp[p]), b1 = W::loadu(xp[p] + L);
    const T* d = dp[p] + f0;
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i) {
      const V v = W::set1(d[i]);
      acc[i][0] = W::fmadd(v, b0, acc[i][0]);
      acc[i][1] = W::fmadd(v, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) {
    T* o = out + i * ldo;
    if (add) {
      W::storeu(o, W::add(W::loadu(o), acc[i][0]));
      W::storeu(o + L, W::add(W::loadu(o + L), acc[i][1]));
    } else {
      W::storeu(o, acc[i][0]);
      W::storeu(o + L, acc[i][1]);
    }
  }
}

}  // namespace

void filter_tile_rows(std::int64_t rows, std::int64_t np, const float* const* xp, const float* const* dp,
                      std::int64_t f0, float* out, std::int64_t ldo, bool add) {
  static_assert(kFilterInPlaceRows == 14, "the cases below");
  switch (rows) {
    case 14: return filter_tile_t<float, 14>(np, xp, dp, f0, out, ldo, add);
    case 13: return filter_tile_t<float, 13>(np, xp, dp, f0, out, ldo, add);
    case 12: return filter_tile_t<float, 12>(np, xp, dp, f0, out, ldo, add);
    case 11: return filter_tile_t<float, 11>(np, xp, dp, f0, out, ldo, add);
    case 10: return filter_tile_t<float, 10>(np, xp, dp, f0, out, ldo, add);
    case 9: return filter_tile_t<float, 9>(np, xp, dp, f0, out, ldo, add);
    case 8: return filter_tile_t<float, 8>(np, xp, dp, f0, out, ldo, add);
    case 7: return filter_tile_t<float, 7>(np, xp, dp, f0, out, ldo, add);
    case 6: return filter_tile_t<float, 6>(np, xp, dp, f0, out, ldo, add);
    case 5: return filter_tile_t<float, 5>(np, xp, dp, f0, out, ldo, add);
    case 4: return filter_tile_t<float, 4>(np, xp, dp, f0, out, ldo, add);
    case 3: return filter_tile_t<float, 3>(np, xp, dp, f0, out, ldo, add);
    case 2: return filter_tile_t<float, 2>(np, xp, dp, f0, out, ldo, add);
    default: return filter_tile_t<float, 1>(np, xp, dp, f0, out, ldo, add);
  }
}
#endif

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk
