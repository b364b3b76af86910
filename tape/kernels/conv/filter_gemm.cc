// The filter gradient on the packed GEMM with the patches packed straight from x (conv/algorithms.h),
// or with both operands read in place by the AVX-512 tile (ukernels/filter.cc). AVX2 + FMA copy
// only (the packed GEMM, gemm/internal/packed.h).
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv/internal/algorithms.h"
#include "tape/kernels/conv/internal/common.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

#if TAPEFLOW_GEMM_AVX2

// Whether conv2d_backprop_filter_packed takes g: whole B panels per tap and at least one full row
// tile of dfilterᵀ.
template <class T>
bool filter_packed(const Conv2DGeometry& g) {
  return g.c % internal::kGemmNR<T> == 0 && g.f >= internal::kGemmMR;
}

namespace {

// The patch matrix [rows, kh*kw*C] (im2col's), from column col0 on, as the B operand of the
// packed GEMM (internal::PackBBlock): each block is packed straight from x.
template <class T>
struct PatchSource {
  const T* x;
  const Conv2DGeometry* g;
  const std::int64_t* corner;  // per output pixel: its window's top row and left column (maybe in
                               // the padding) and its image's first row (n * H)
  std::int64_t col0;
};

// One block in the GEMM's B layout, tap by tap: a tap's panels (C is a multiple of the panel width,
// so none straddles two taps) read the same x row per pixel, each cache line of it once.
template <class T>
void pack_patches(const void* ctx, std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t kc, T* dst) {
  constexpr std::int64_t NR = internal::kGemmNR<T>;
  const auto& src = *static_cast<const PatchSource<T>*>(ctx);
  const Conv2DGeometry& g = *src.g;
  const std::int64_t* corner = src.corner + 3 * pc;
  const std::int64_t first = src.col0 + jc, end = first + nc;
  for (std::int64_t j0 = first; j0 < end;) {
    const std::int64_t tap = j0 / g.c, j1 = std::min(end, (tap + 1) * g.c), panels = (j1 - j0) / NR;
    const std::int64_t di = tap / g.kw * g.dh, dj = tap % g.kw * g.dw, c0 = j0 % g.c;
    T* d = dst + (j0 - first) * kc;
    for (std::int64_t p = 0; p < kc; ++p, d += NR) {
      const std::int64_t* cr = corner + 3 * p;
      const std::int64_t ih = cr[0] + di, iw = cr[1] + dj;
      if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) {
        const T* row = src.x + ((cr[2] + ih) * g.w + iw) * g.c + c0;
        for (std::int64_t q = 0; q < panels; ++q) std::memcpy(d + q * NR * kc, row + q * NR, NR * sizeof(T));
      } else {
        for (std::int64_t q = 0; q < panels; ++q) std::memset(d + q * NR * kc, 0, NR * sizeof(T));
      }
    }
    j0 = j1;
  }
}

// Pixels per partial sum of the filter gradient: the row tiles of the im2col scheme below
// kFilterWideChannels (the patch tile within kConvGradTileBytes, at least kFilterWave tiles), the
// row chunks of the per-tap scheme from there on (kFilterWideChunkBytes of one tap's rows). Both
// schemes this one replaced summed those rows in one chain each and added the partials in order:
// keeping their rows keeps their results, bit for bit (the CNN app's 30-epoch test accuracy sits
// within rounding of its 0.915 target, so the trajectory is worth keeping).
template <class T>
std::int64_t filter_partial_rows(const Conv2DGeometry& g) {
  if (g.c >= kFilterWideChannels)
    return std::max<std::int64_t>(kFilterWideChunkBytes / (g.c * static_cast<std::int64_t>(sizeof(T))), 64);
  return filter_tile_rows<T>(g);
}

}  // namespace

// dfilterᵀ [F, K] = dyᵀ [F, rows] @ patches [rows, K] on the packed GEMM, the patches packed
// straight from x block by block (no im2col tile written and read back, no transposed A to pack).
// Threads own column ranges of K (each packs its own patch columns and all of dy). Each run of
// filter_partial_rows pixels is one FMA chain per element (fma(dy, x) and fma(x, dy) round alike),
// its partial added to dfilterᵀ in order: the same bits for any thread count or column split.
//
// Pixels on dy's all-zero trailing rows and columns (a max pool's gradient where no window reads:
// W8's conv2, a sixth of the pixels) are left out of their run: a zero product adds exactly
// nothing to a chain and the runs keep their other pixels, so the bits are the same. The GEMM
// reads the kept dy rows through a row table. Not when x holds an inf or NaN those pixels read
// (0 * inf must still give NaN).
template <class T>
void conv2d_backprop_filter_packed(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g) {
  constexpr std::int64_t NR = internal::kGemmNR<T>;
  const std::int64_t rows = g.out_pixels(), k = g.patch_size(), units = k / NR, hw = g.ho * g.wo;
  const std::int64_t parts = std::clamp<std::int64_t>(num_threads(), 1, units), chunk = filter_partial_rows<T>(g);
  const auto [keep_h, keep_w] = filter_kept_extent(x, dy, g);
  const bool compact = keep_h < g.ho || keep_w < g.wo;
  // Per kept pixel, in order: its dy row (compact only) and its window's corner.
  std::vector<std::int64_t> kept_rows;
  if (compact) {
    kept_rows.reserve(static_cast<std::size_t>(g.n * keep_h * keep_w));
    for (std::int64_t m = 0; m < g.n; ++m)
      for (std::int64_t a = 0; a < keep_h; ++a)
        for (std::int64_t b = 0; b < keep_w; ++b) kept_rows.push_back((m * g.ho + a) * g.wo + b);
  }
  const std::int64_t n_kept = compact ? static_cast<std::int64_t>(kept_rows.size()) : rows;
  // Kept pixels before output pixel r.
  const auto kept_before = [&](std::int64_t r) {
    return compact ? static_cast<std::int64_t>(std::lower_bound(kept_rows.begin(), kept_rows.end(), r) - kept_rows.begin())
                   : r;
  };
  std::vector<std::int64_t> corner(static_cast<std::size_t>(3 * n_kept));
  parallel_for(n_kept, 1 << 12, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const std::int64_t r = compact ? kept_rows[static_cast<std::size_t>(i)] : i;
      std::int64_t* cr = corner.data() + 3 * i;
      cr[0] = (r % hw) / g.wo * g.sh - g.pad_top;
      cr[1] = r % g.wo * g.sw - g.pad_left;
      cr[2] = r / hw * g.h;
    }
  });
  const std::unique_ptr<T[]> t(new T[static_cast<std::size_t>(g.f * k)]);  // dfilterᵀ
  // The kept pixels of the run starting at output pixel r0: [first, end).
  const auto run_of = [&](std::int64_t r0) {
    return std::pair<std::int64_t, std::int64_t>{kept_before(r0), r0 + chunk < rows ? kept_before(r0 + chunk) : n_kept};
  };
  if (g.c % kWide == 0 && internal::avx512_tiles<T>()) {
#if TAPEFLOW_HAVE_AVX512_KERNELS
    if constexpr (std::is_same_v<T, float>) {
      // Same runs, same chains as the GEMM below, both operands read in place (isa_avx512::uk::filter_tile_rows).
      // Work items: (tap, 32 channels of it, half of dfilterᵀ's row tiles).
      const std::int64_t pairs = g.c / kWide, row_tiles = filter_tiles(g.f), halves = row_tiles > 1 ? 2 : 1;
      const auto tile_begin = [&](std::int64_t tile) { return filter_tile_begin(g.f, tile); };
      std::vector<const float*> dp(static_cast<std::size_t>(n_kept));
      for (std::int64_t i = 0; i < n_kept; ++i)
        dp[static_cast<std::size_t>(i)] = dy + (compact ? kept_rows[static_cast<std::size_t>(i)] : i) * g.f;
      const std::vector<float> zeros(static_cast<std::size_t>(g.c), 0.0f);
      const std::int64_t taps = g.kh * g.kw;
      // Each task runs its items run by run (the run's x, about 60 KB for W8's conv2, stays in L2
      // for all of them; item by item, each would stream all of x from memory again), in tasks of
      // about a quarter of the items (fixed by the shape).
      const std::int64_t items = taps * pairs * halves;
      parallel_for(items, std::max<std::int64_t>(1, items / 4), [&](std::int64_t b, std::int64_t e) {
        std::vector<const float*> xp(static_cast<std::size_t>(std::min(chunk, n_kept)));
        for (std::int64_t r0 = 0; r0 < rows; r0 += chunk) {
          const auto [k0, k1] = run_of(r0);
          const std::int64_t kr = k1 - k0;
          std::int64_t xp_for = -1;  // the (tap, pair) whose pointers xp holds for this run
          for (std::int64_t item = b; item < e; ++item) {
            const std::int64_t tap = item / (pairs * halves), pair = item / halves % pairs, half = item % halves;
            const std::int64_t col = tap * g.c + pair * kWide;
            const std::int64_t tile0 = half * row_tiles / halves, tile1 = (half + 1) * row_tiles / halves;
            if (kr == 0) {
              if (r0 == 0)
                for (std::int64_t f = tile_begin(tile0); f < tile_begin(tile1); ++f)
                  std::fill_n(t.get() + f * k + col, kWide, 0.0f);
              continue;
            }
            if (xp_for != item / halves) {  // the other half of the rows reuses the table
              const std::int64_t di = tap / g.kw * g.dh, dj = tap % g.kw * g.dw;
              for (std::int64_t i = 0; i < kr; ++i) {
                const std::int64_t* cr = corner.data() + 3 * (k0 + i);
                const std::int64_t ih = cr[0] + di, iw = cr[1] + dj;
                xp[static_cast<std::size_t>(i)] = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w
                                                      ? x + ((cr[2] + ih) * g.w + iw) * g.c + pair * kWide
                                                      : zeros.data();
              }
              xp_for = item / halves;
            }
            for (std::int64_t tile = tile0; tile < tile1; ++tile) {
              const std::int64_t f0 = tile_begin(tile);
              isa_avx512::uk::filter_tile_rows(tile_begin(tile + 1) - f0, kr, xp.data(), dp.data() + k0, f0, t.get() + f0 * k + col,
                                   k, r0 > 0);
            }
          }
        }
      });
    }
#endif
  } else {
    parallel_for(parts, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t q = b; q < e; ++q) {
        const std::int64_t c0 = units * q / parts * NR, n = units * (q + 1) / parts * NR - c0;
        std::vector<T> part;
        // dy's rows [k0, k0 + kr) of the kept pixels into out (ldc), run by run.
        const auto product = [&](std::int64_t k0, std::int64_t kr, const PatchSource<T>& src, T* out,
                                 std::int64_t ldc) {
          if (compact)
            internal::packed_gemm<T>(g.f, n, kr, dy, g.f, kept_rows.data() + k0, pack_patches<T>, &src, out, ldc);
          else
            internal::packed_gemm<T>(g.f, n, kr, dy + k0 * g.f, g.f, true, pack_patches<T>, &src, out, ldc);
        };
        for (std::int64_t r0 = 0; r0 < rows; r0 += chunk) {
          const auto [k0, k1] = run_of(r0);
          const PatchSource<T> src{x, &g, corner.data() + 3 * k0, c0};
          const std::int64_t kr = k1 - k0;
          if (r0 == 0) {
            if (kr == 0)
              for (std::int64_t f = 0; f < g.f; ++f) std::fill_n(t.get() + f * k + c0, n, T(0));
            else
              product(k0, kr, src, t.get() + c0, k);
            continue;
          }
          if (kr == 0) continue;
          part.resize(static_cast<std::size_t>(g.f * n));
          product(k0, kr, src, part.data(), n);
          for (std::int64_t f = 0; f < g.f; ++f) {
            T* out = t.get() + f * k + c0;
            const T* in = part.data() + f * n;
            for (std::int64_t j = 0; j < n; ++j) out[j] += in[j];
          }
        }
      }
    });
  }
  parallel_for(k, std::max<std::int64_t>(1, 4096 / g.f), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r)
      for (std::int64_t f = 0; f < g.f; ++f) dfilter[r * g.f + f] = t[static_cast<std::size_t>(f * k + r)];
  });
}

#define TAPEFLOW_INSTANTIATE(T)                                                                   \
  template bool filter_packed<T>(const Conv2DGeometry&);                                          \
  template void conv2d_backprop_filter_packed<T>(const T*, const T*, T*, const Conv2DGeometry&);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

#endif  // TAPEFLOW_GEMM_AVX2

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
