// The register tiles of the convolutions (tape/kernels/ukernels/*.cc): each one template over the
// vector traits of ukernels/internal/vec.h, compiled once per instruction-set level into
// kernels::isa_<level>::uk (tape/CMakeLists.txt), so the same source gives the baseline (SSE), the
// AVX2 + FMA and the AVX-512 tiles. The drivers (tape/kernels/conv/) call their own level's tiles,
// and the AVX2 + FMA drivers call isa_avx512::uk's float tiles when avx512_tiles<float>() holds.
// (The packed GEMM's tiles, ukernels/gemm.cc, are declared with its loops: gemm/internal/tiles.h.)
// Shapes:   every tile is 2 vectors of columns wide (kTileVectors): NB = 2 x the level's lanes
//           (baseline 8 floats / 4 doubles, AVX2 16 / 8, AVX-512 32 floats), the drivers' blocks.
// Facts:    Per output element each tile is one FMA chain in a fixed order that does not depend on
//           the vector width: the AVX2 and AVX-512 tiles give the same bits (both fuse), the
//           baseline tiles multiply then add (no FMA at that level), as the baseline drivers' packets.
//           These files are the only ones of the library with AVX-512 instructions
//           (CTest kernels.avx512_only_in_per_isa_objects).
#pragma once

#include <algorithm>
#include <cstdint>

namespace tapeflow::kernels {

namespace ukernel_shapes {
inline constexpr std::int64_t kDirectPixels = 6;  // output pixels per direct block
inline constexpr std::int64_t kDirectTaps = 6;    // filter taps per direct filter-gradient block
inline constexpr std::int64_t kIgemmMR = 6;       // rows of one indirect-GEMM row tile
// Rows of dfilterᵀ per tile of the in-place filter gradient (AVX-512): 28 zmm accumulators (31
// registers in all), each pair of x loads (from L2) feeding 28 FMAs (6-row tiles: W9 convT1's
// filter gradient 57-63 ms, 12: 49-54; W8 conv2's tiles of 14, 14, 14, 11, 11 rows against
// 12 x 5 + 4: 6% less time in the tiles).
inline constexpr std::int64_t kFilterInPlaceRows = 14;
// Pixels ahead that the in-place filter tile prefetches (24 measured best of 8-32 on W9's convT1).
inline constexpr std::int64_t kFilterInPlacePrefetch = 24;
// Channels (columns) of the AVX-512 float tiles: two zmm registers.
inline constexpr std::int64_t kWide = 32;

// Row tiles of the in-place filter tile over `rows` rows: kFilterInPlaceRows each, the last two
// splitting the rest evenly (no short last tile). Tile t starts at row filter_tile_begin(rows, t), t <= tiles.
constexpr std::int64_t filter_tiles(std::int64_t rows) { return (rows + kFilterInPlaceRows - 1) / kFilterInPlaceRows; }
constexpr std::int64_t filter_tile_begin(std::int64_t rows, std::int64_t t) {
  const std::int64_t tiles = filter_tiles(rows), full = tiles >= 2 ? tiles - 2 : 0;
  const std::int64_t last = tiles >= 2 ? (rows - full * kFilterInPlaceRows + 1) / 2 : rows;
  return t <= full ? t * kFilterInPlaceRows : std::min(rows, full * kFilterInPlaceRows + (t - full) * last);
}
static_assert(filter_tile_begin(64, 4) == 53 && filter_tile_begin(64, 5) == 64 && filter_tile_begin(14, 1) == 14);
}  // namespace ukernel_shapes

// The tiles of one level for element type T (NB = the tile's columns, see Shapes above):
//   direct_block:        kDirectPixels pixels (panel values x0 + p * step + tap_offset[t]) x NB
//                        channels of the padded filter (fq, row stride fp) over the k taps, then
//                        + bias[0, NB) when bias, then relu when relu (apply_epilogue's
//                        operations), stored at y + p * ldy.
//   direct_filter_block: kDirectTaps taps (offsets off) x NB channels of one output row's dy
//                        (d_row, row stride fp) summed over its wo pixels from 0, then added to
//                        part (row stride fp) for the first nq taps.
//   igemm_tile:          tiles (1 or 2) row tiles of kIgemmMR rows (tile u's row pointers at
//                        a + u * a_stride, kIgemmMR per step): row q of c[q] .. c[q] + NB =
//                        (accumulate ? itself : 0) + sum over steps s and p < klen of
//                        a[s][q][p] * B, B's first vector at bp + boff[s] + p * bstride and its
//                        second at bq + boff[s] + p * bstride.
#define TAPEFLOW_UKERNEL_DECLARE(T)                                                                                   \
  void direct_block(const T* x0, std::int64_t step, const std::int64_t* tap_offset, std::int64_t k, const T* fq,     \
                    std::int64_t fp, T* y, std::int64_t ldy, const T* bias, bool relu);                              \
  void direct_filter_block(const T* panel, std::int64_t step, const std::int64_t* off, std::int64_t wo,              \
                           const T* d_row, std::int64_t fp, T* part, std::int64_t nq);                               \
  void igemm_tile(int tiles, std::int64_t steps, const T* const* a, std::int64_t a_stride, const std::int64_t* boff, \
                  std::int64_t klen, const T* bp, const T* bq, std::int64_t bstride, T* const* c, bool accumulate);

namespace isa_baseline::uk {
TAPEFLOW_UKERNEL_DECLARE(float)
TAPEFLOW_UKERNEL_DECLARE(double)
}  // namespace isa_baseline::uk
namespace isa_avx2::uk {
TAPEFLOW_UKERNEL_DECLARE(float)
TAPEFLOW_UKERNEL_DECLARE(double)
}  // namespace isa_avx2::uk
namespace isa_avx512::uk {
TAPEFLOW_UKERNEL_DECLARE(float)
// The in-place filter-gradient tile: rows f0 .. f0 + rows (rows <= kFilterInPlaceRows) of dfilterᵀ
// (dy's channels, broadcast from dy row dp[p] + f0) by 32 columns (x at xp[p], or zeros), summed
// over the np pixels of one run as one FMA chain per element from 0, then stored to out (row
// stride ldo) or, when add, added to it: the packed GEMM's arithmetic, the same bits, with no
// patch or dy packing.
void filter_tile_rows(std::int64_t rows, std::int64_t np, const float* const* xp, const float* const* dp,
                      std::int64_t f0, float* out, std::int64_t ldo, bool add);
}  // namespace isa_avx512::uk

#undef TAPEFLOW_UKERNEL_DECLARE

}  // namespace tapeflow::kernels
