// The Winograd kernels (Lavin & Gray 2016; conv/algorithms.h): the filter gradient by F(3x3, 2x2)
// (AVX2 + FMA copy only: its products run on the packed GEMM or the AVX-512 tile) and the
// convolution under a 2x2 max pool by F(2x2, 3x3) (its products on the indirect GEMM's rows).
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv/internal/algorithms.h"
#include "tape/kernels/conv/internal/common.h"
#include "tape/kernels/conv/internal/igemm.h"
#include "tape/kernels/internal/pool_windows.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

namespace {

// ---- Shared by the Winograd kernels (the filter gradient's and the one under a max pool) ----
// Scratch from TBB's allocator, not zeroed (every value read is written first): std::vector's
// zeroing and fresh mappings (page faults) took longer than the Winograd products.
template <class T>
std::unique_ptr<T, void (*)(void*)> winograd_scratch(std::int64_t count) {
  std::unique_ptr<T, void (*)(void*)> p(
      static_cast<T*>(
          scalable_aligned_malloc(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T), 64)),
      scalable_aligned_free);
  if (!p) throw std::bad_alloc();
  return p;
}

// r[i][col] = (Bᵀ d)[i][col] over the 4x4 block at d0 (rows row_stride apart, columns C apart),
// channels c .. c + L: Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] for F(2, 3), the last row
// negated ([0 -1 0 1]) for F(3, 2).
template <class T, class P = typename ei::packet_traits<T>::type>
void winograd_input_rows(const T* d0, std::int64_t row_stride, std::int64_t C, std::int64_t c, bool f32, P r[4][4]) {
#pragma GCC unroll 4
  for (int col = 0; col < 4; ++col) {
    const P a0 = ei::ploadu<P>(d0 + col * C + c), a1 = ei::ploadu<P>(d0 + row_stride + col * C + c);
    const P a2 = ei::ploadu<P>(d0 + 2 * row_stride + col * C + c), a3 = ei::ploadu<P>(d0 + 3 * row_stride + col * C + c);
    r[0][col] = ei::psub(a0, a2);
    r[1][col] = ei::padd(a1, a2);
    r[2][col] = ei::psub(a2, a1);
    r[3][col] = f32 ? ei::psub(a3, a1) : ei::psub(a1, a3);
  }
}

// Whether a packet of (y - y) sums holds a nonzero lane: some y was inf or NaN.
template <class T, class P>
bool any_nonfinite(const P& sums) {
  constexpr std::int64_t L = ei::packet_traits<T>::size;
  alignas(64) T lanes[L];
  ei::pstoreu(lanes, sums);
  for (std::int64_t l = 0; l < L; ++l)
    if (lanes[l] != T(0)) return true;
  return false;
}

}  // namespace

#if TAPEFLOW_GEMM_AVX2
// ---- The filter gradient by Winograd F(3x3, 2x2) (Lavin & Gray 2016) ----
// dfilter[i, j] = sum over output pixels of x at (p + i, q + j) times dy at (p, q): over each 2x2
// block of dy (pixels 2ty.., 2tx..) that is a 3x3 correlation of the 4x4 block of x under it with
// the 2x2 block of dy, F(3, 2) in each direction. Per block V = Bᵀ x B (per channel c) and
// W = G dy Gᵀ (per channel f); S_k = sum over blocks of V_k W_kᵀ (16 products [C, blocks] x
// [blocks, F]: 16 FMAs per block and (c, f) where the direct sum takes 36); then dfilter = Aᵀ S A
// per (c, f). Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 -1 0 1], G = [1 0; .5 .5; .5 -.5; 0 1],
// Aᵀ = [1 1 1 0; 0 1 -1 0; 0 1 1 1].
// The blocks run in fixed units of whole images; per unit and k one FMA chain per element of S_k
// from 0 (the in-place filter tile on AVX-512, packed_gemm otherwise: the same chain), added in unit order
// within fixed groups of units, the groups' sums then added in group order: the same bits for any
// thread count (threads own groups; every split depends on the shape only) and on either tile.
constexpr std::int64_t kWinogradFilterUnitBlocks = 48;  // dy blocks per unit at least (whole images)
constexpr std::int64_t kWinogradFilterGroups = 4;       // groups of units summed apart (at most)

// Float, 3x3 stride-1 undilated VALID, channels in whole packets.
template <class T>
bool winograd_filter(const Conv2DGeometry& g) {
  constexpr std::int64_t L = ei::packet_traits<T>::size;
  return std::is_same_v<T, float> && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
         g.pad_top == 0 && g.pad_left == 0 && g.ho == g.h - 2 && g.wo == g.w - 2 && g.c % L == 0 && g.f % L == 0 &&
         g.c >= 16 && g.f >= 16;
}

// dfilter for winograd_filter shapes whose kept extent (filter_kept_extent: kh x kw) is even in
// both directions, so that 2x2 blocks cover it exactly (a max pool's gradient: W8's conv2, 10 x 10
// of 11 x 11). Returns false (dfilter to be overwritten) when a value came out inf or NaN: an inf
// or NaN in x or dy, or a sum overflowing (the transforms' differences turn inf into NaN).
template <class T>
bool conv2d_backprop_filter_winograd(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g, std::int64_t kh,
                                     std::int64_t kw) {
  using P = typename ei::packet_traits<T>::type;
  constexpr std::int64_t L = ei::packet_traits<T>::size;
  const std::int64_t C = g.c, F = g.f, bh = kh / 2, bw = kw / 2, per_image = bh * bw;
  const std::int64_t images = std::max<std::int64_t>(1, (kWinogradFilterUnitBlocks + per_image - 1) / per_image);
  const std::int64_t units = (g.n + images - 1) / images, most = images * per_image;
  const auto scratch = [](std::int64_t count) { return winograd_scratch<T>(count); };
  const auto s_buf = scratch(16 * C * F);  // S_k [C, F]
  T* const s = s_buf.get();
  [[maybe_unused]] const bool wide = internal::avx512_tiles<T>() && F % kWide == 0;
  // Fixed groups of units, each summed in unit order into its own S (group 0's is s), then added
  // to s in group order: a thread reads only its groups' x and dy.
  const std::int64_t groups = std::min(kWinogradFilterGroups, units);
  const auto gs_buf = scratch((groups - 1) * 16 * C * F);
  parallel_for(groups, 1, [&](std::int64_t gb, std::int64_t ge) {
    const auto v_buf = scratch(16 * most * C), w_buf = scratch(16 * most * F), part_buf = scratch(C * F);
    T *const v = v_buf.get(), *const w = w_buf.get(), *const part = part_buf.get();
    std::vector<const T*> vp(static_cast<std::size_t>(most)), wp(static_cast<std::size_t>(most));
    for (std::int64_t unit = gb * units / groups; unit < ge * units / groups; ++unit) {
      std::int64_t group = gb;
      while ((group + 1) * units / groups <= unit) ++group;
      T* const sg = group == 0 ? s : gs_buf.get() + (group - 1) * 16 * C * F;
      const bool first = unit == group * units / groups;  // the group's first unit
      const std::int64_t n0 = unit * images, blocks = (std::min(g.n, n0 + images) - n0) * per_image;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t n = n0 + b / per_image, ty = b % per_image / bw, tx = b % bw;
        // V_k[b, c].
        const T* x0 = x + ((n * g.h + 2 * ty) * g.w + 2 * tx) * C;
        for (std::int64_t c = 0; c < C; c += L) {
          P r[4][4];  // (Bᵀ x)[i][column]
          winograd_input_rows<T>(x0, g.w * C, C, c, true, r);
#pragma GCC unroll 4
          for (std::int64_t i = 0; i < 4; ++i) {
            T* vt = v + (i * 4 * most + b) * C + c;
            ei::pstoreu(vt, ei::psub(r[i][0], r[i][2]));
            ei::pstoreu(vt + most * C, ei::padd(r[i][1], r[i][2]));
            ei::pstoreu(vt + 2 * most * C, ei::psub(r[i][2], r[i][1]));
            ei::pstoreu(vt + 3 * most * C, ei::psub(r[i][3], r[i][1]));
          }
        }
        // W_k[b, f] = (G dy Gᵀ)[k]: G times each column of the dy block, then each row times Gᵀ.
        const T* d0 = dy + ((n * g.ho + 2 * ty) * g.wo + 2 * tx) * F;
        const P half = ei::pset1<P>(T(0.5));
        const auto g4 = [&](const P& a, const P& b, P out[4]) {
          out[0] = a;
          out[1] = ei::pmul(ei::padd(a, b), half);
          out[2] = ei::pmul(ei::psub(a, b), half);
          out[3] = b;
        };
        for (std::int64_t f = 0; f < F; f += L) {
          P t0[4], t1[4], row[4];
          g4(ei::ploadu<P>(d0 + f), ei::ploadu<P>(d0 + g.wo * F + f), t0);          // column 0 of dy
          g4(ei::ploadu<P>(d0 + F + f), ei::ploadu<P>(d0 + (g.wo + 1) * F + f), t1);  // column 1
#pragma GCC unroll 4
          for (std::int64_t i = 0; i < 4; ++i) {
            g4(t0[i], t1[i], row);
            T* wt = w + (i * 4 * most + b) * F + f;
            for (int j = 0; j < 4; ++j) ei::pstoreu(wt + j * most * F, row[j]);
          }
        }
      }
      // S_k (+)= V_kᵀ W_k over the unit's blocks.
      for (std::int64_t q = 0; q < 16; ++q) {
        T* sk = sg + q * C * F;
        const T* vq = v + q * most * C;
        const T* wq = w + q * most * F;
#if TAPEFLOW_HAVE_AVX512_KERNELS
        if constexpr (std::is_same_v<T, float>)
          if (wide) {
            // Rows c of S_k (V broadcast) by 32 columns f (W read in place).
            for (std::int64_t b = 0; b < blocks; ++b) vp[static_cast<std::size_t>(b)] = vq + b * C;
            for (std::int64_t col = 0; col < F; col += kWide) {
              for (std::int64_t b = 0; b < blocks; ++b) wp[static_cast<std::size_t>(b)] = wq + b * F + col;
              for (std::int64_t t = 0; t < filter_tiles(C); ++t) {
                const std::int64_t c0 = filter_tile_begin(C, t);
                isa_avx512::uk::filter_tile_rows(filter_tile_begin(C, t + 1) - c0, blocks, wp.data(), vp.data(), c0, sk + c0 * F + col,
                                     F, !first);
              }
            }
            continue;
          }
#endif
        internal::packed_gemm<T>(C, F, blocks, vq, C, true, wq, F, false, first ? sk : part, F);
        if (!first)
          for (std::int64_t e = 0; e < C * F; ++e) sk[e] += part[e];
      }
    }
  });
  for (std::int64_t group = 1; group < groups; ++group) {
    const T* sg = gs_buf.get() + (group - 1) * 16 * C * F;
    for (std::int64_t e = 0; e < 16 * C * F; ++e) s[e] += sg[e];
  }
  // dfilter[i, j, c, f] = (Aᵀ S A)[i, j] per (c, f); a sum of the values' y - y: 0 while all are finite.
  std::atomic<bool> nonfinite{false};
  parallel_for(C, std::max<std::int64_t>(1, C / 2), [&](std::int64_t c0, std::int64_t c1) {
    P bad = ei::pset1<P>(T(0));
    for (std::int64_t c = c0; c < c1; ++c)
      for (std::int64_t f = 0; f < F; f += L) {
        P q[4][4], r[3][4];
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k) q[k / 4][k % 4] = ei::ploadu<P>(s + (k * C + c) * F + f);
#pragma GCC unroll 4
        for (int l = 0; l < 4; ++l) {
          r[0][l] = ei::padd(ei::padd(q[0][l], q[1][l]), q[2][l]);
          r[1][l] = ei::psub(q[1][l], q[2][l]);
          r[2][l] = ei::padd(ei::padd(q[1][l], q[2][l]), q[3][l]);
        }
#pragma GCC unroll 3
        for (int i = 0; i < 3; ++i) {
          const P y[3] = {ei::padd(ei::padd(r[i][0], r[i][1]), r[i][2]), ei::psub(r[i][1], r[i][2]),
                          ei::padd(ei::padd(r[i][1], r[i][2]), r[i][3])};
          for (int j = 0; j < 3; ++j) {
            bad = ei::padd(bad, ei::psub(y[j], y[j]));
            ei::pstoreu(dfilter + ((i * 3 + j) * C + c) * F + f, y[j]);
          }
        }
      }
    if (any_nonfinite<T>(bad)) nonfinite.store(true, std::memory_order_relaxed);
  });
  return !nonfinite.load();
}
#endif  // TAPEFLOW_GEMM_AVX2

// ---- Winograd F(2x2, 3x3) under a 2x2 max pool (Lavin & Gray 2016, "Fast Algorithms for
// Convolutional Neural Networks") ----
// Each 2x2 block of the convolution's output, exactly one pool window, comes from the 4x4 block of
// x under it: V = Bᵀ d B per channel (adds only), then for each of the 16 positions k a product
// M_k [tiles, F] = V_k [tiles, C] @ U_k [C, F], U = G g Gᵀ the transformed filter, then
// Y = Aᵀ M A (adds only) + bias. 16 C x F products per 4 output pixels instead of 36: 2.25x fewer
// FMAs. Each product runs on igemm_rows (one FMA chain per element over C from 0) and the
// transforms are lane-wise adds, so the bits are the same on the AVX2 and AVX-512 tiles and for
// any thread count; they differ from the direct product's by rounding (the transforms' sums).
constexpr std::int64_t kWinogradUnitTiles = 64;  // tiles per work unit at least (whole images)

// Float, a 3x3 stride-1 undilated VALID convolution, a 2x2 stride-2 pool, channels in whole
// packets, a convolution wide enough to be worth the transforms.
template <class T>
bool winograd_pool(const Conv2DGeometry& g, const Conv2DGeometry& pool) {
  constexpr std::int64_t L = ei::packet_traits<T>::size;
  return std::is_same_v<T, float> && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
         g.pad_top == 0 && g.pad_left == 0 && g.ho == g.h - 2 && g.wo == g.w - 2 && pool_2x2(pool) &&
         pool.ho > 0 && pool.wo > 0 && g.c % L == 0 && g.f % L == 0 && g.c >= 16 && g.f >= 16;
}

// y, argmax as conv2d_max_pool2d for winograd_pool shapes. Returns false, leaving y and argmax to
// be overwritten, when a convolution value came out inf or NaN (an inf or NaN in x or the filter,
// or a transform's sum overflowing): the transforms' differences would turn inf into NaN where
// the direct product keeps inf.
template <class T>
bool conv2d_max_pool2d_winograd(const T* x, const T* filter, const T* bias, T* y, ArgmaxIndex* argmax,
                                const Conv2DGeometry& g, const Conv2DGeometry& pool, bool relu) {
  using P = typename ei::packet_traits<T>::type;
  constexpr std::int64_t L = ei::packet_traits<T>::size, MR = kIgemmMR;
  const std::int64_t C = g.c, F = g.f, th = pool.ho, tw = pool.wo, per_image = th * tw;
  const auto scratch = [](std::int64_t count) { return winograd_scratch<T>(count); };
  // U_k = G g Gᵀ per (c, f), G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1], packed as igemm B panels.
  std::vector<std::vector<T>> packed(16);
  {
    const auto u_buf = scratch(16 * C * F);
    T* const u = u_buf.get();
    const auto gt = [](T a, T b, T c, T out[4]) {
      out[0] = a;
      out[1] = (a + b + c) * T(0.5);
      out[2] = (a - b + c) * T(0.5);
      out[3] = c;
    };
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t f = 0; f < F; ++f) {
        T gg[3][3], col[4][3], out[4];
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) gg[i][j] = filter[((i * 3 + j) * C + c) * F + f];
        for (int j = 0; j < 3; ++j) {  // G g: column by column
          gt(gg[0][j], gg[1][j], gg[2][j], out);
          for (int i = 0; i < 4; ++i) col[i][j] = out[i];
        }
        for (int i = 0; i < 4; ++i) {  // (G g) Gᵀ: row by row
          gt(col[i][0], col[i][1], col[i][2], out);
          for (int j = 0; j < 4; ++j) u[((i * 4 + j) * C + c) * F + f] = out[j];
        }
      }
    for (std::int64_t k = 0; k < 16; ++k)
      packed[static_cast<std::size_t>(k)] =
          pack_panels<T>(C, F, [&](std::int64_t r, std::int64_t j) { return u[(k * C + r) * F + j]; });
  }
  const std::int64_t images = std::max<std::int64_t>(1, (kWinogradUnitTiles + per_image - 1) / per_image);
  const std::int64_t units = (g.n + images - 1) / images, row = g.wo * F, image_in = g.h * g.w * C;
  const ConvEpilogue<T> activation{nullptr, relu};
  std::atomic<bool> nonfinite{false};
  parallel_for(units, 1, [&](std::int64_t b, std::int64_t e) {
    const std::int64_t most = images * per_image, padded = round_up(most, MR);
    const auto v_buf = scratch(16 * padded * C), m_buf = scratch(16 * most * F);
    T *const v = v_buf.get(), *const m = m_buf.get();
    std::vector<T> rows(static_cast<std::size_t>(2 * row));
    std::vector<const T*> ind(static_cast<std::size_t>(padded));
    std::vector<T*> out(static_cast<std::size_t>(most));
    const std::int64_t boff = 0;
    P bad = ei::pset1<P>(T(0));  // y - y summed: 0 while every value is finite
    for (std::int64_t unit = b; unit < e; ++unit) {
      const std::int64_t n0 = unit * images, n1 = std::min(g.n, n0 + images), tiles = (n1 - n0) * per_image;
      // V_k[tile, c] = (Bᵀ d B)[k], Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
      for (std::int64_t t = 0; t < tiles; ++t) {
        const std::int64_t n = n0 + t / per_image, ty = t % per_image / tw, tx = t % tw;
        const T* d0 = x + n * image_in + (2 * ty * g.w + 2 * tx) * C;
        for (std::int64_t c = 0; c < C; c += L) {
          P r[4][4];
          winograd_input_rows<T>(d0, g.w * C, C, c, false, r);
          T* vt = v + t * C + c;
          for (int i = 0; i < 4; ++i) {
            ei::pstoreu(vt + (i * 4 + 0) * padded * C, ei::psub(r[i][0], r[i][2]));
            ei::pstoreu(vt + (i * 4 + 1) * padded * C, ei::padd(r[i][1], r[i][2]));
            ei::pstoreu(vt + (i * 4 + 2) * padded * C, ei::psub(r[i][2], r[i][1]));
            ei::pstoreu(vt + (i * 4 + 3) * padded * C, ei::psub(r[i][1], r[i][3]));
          }
        }
      }
      // M_k = V_k @ U_k (rows past `tiles` of the last row tile read row 0; their results are dropped).
      for (std::int64_t k = 0; k < 16; ++k) {
        for (std::int64_t t = 0; t < padded; ++t)
          ind[static_cast<std::size_t>(t)] = v + (k * padded + (t < tiles ? t : 0)) * C;
        for (std::int64_t t = 0; t < tiles; ++t) out[static_cast<std::size_t>(t)] = m + (k * most + t) * F;
        igemm_rows<T>(tiles, 1, 1, ind.data(), &boff, C, packed[static_cast<std::size_t>(k)].data(), C, F, out.data());
      }
      // Y = Aᵀ M A + bias, Aᵀ = [1 1 1 0; 0 1 -1 -1], a row of tiles at a time into the two
      // convolution rows of one pooled row, then pooled while in cache.
      for (std::int64_t n = n0; n < n1; ++n)
        for (std::int64_t ty = 0; ty < th; ++ty) {
          for (std::int64_t tx = 0; tx < tw; ++tx) {
            const T* mt = m + ((n - n0) * per_image + ty * tw + tx) * F;
            for (std::int64_t f = 0; f < F; f += L) {
              P q[4][4];
              for (int k = 0; k < 16; ++k) q[k / 4][k % 4] = ei::ploadu<P>(mt + k * most * F + f);
              P s[2][4];
              for (int j = 0; j < 4; ++j) {
                s[0][j] = ei::padd(ei::padd(q[0][j], q[1][j]), q[2][j]);
                s[1][j] = ei::psub(ei::psub(q[1][j], q[2][j]), q[3][j]);
              }
              const P bf = bias ? ei::ploadu<P>(bias + f) : ei::pset1<P>(T(0));
              for (int i = 0; i < 2; ++i) {
                P y0 = ei::padd(ei::padd(s[i][0], s[i][1]), s[i][2]);
                P y1 = ei::psub(ei::psub(s[i][1], s[i][2]), s[i][3]);
                if (bias) y0 = ei::padd(y0, bf), y1 = ei::padd(y1, bf);
                bad = ei::padd(bad, ei::padd(ei::psub(y0, y0), ei::psub(y1, y1)));
                ei::pstoreu(rows.data() + i * row + (2 * tx) * F + f, y0);
                ei::pstoreu(rows.data() + i * row + (2 * tx + 1) * F + f, y1);
              }
            }
          }
          T* yr = y + (n * th + ty) * tw * F;
          pool_2x2_row_with_argmax(rows.data(), rows.data() + row, pool, 2 * ty * row, yr,
                                   argmax + (n * th + ty) * tw * F);
          apply_epilogue(yr, tw, F, activation);
        }
    }
    if (any_nonfinite<T>(bad)) nonfinite.store(true, std::memory_order_relaxed);
  });
  return !nonfinite.load();
}

#if TAPEFLOW_GEMM_AVX2
template bool winograd_filter<float>(const Conv2DGeometry&);
template bool conv2d_backprop_filter_winograd<float>(const float*, const float*, float*, const Conv2DGeometry&,
                                                     std::int64_t, std::int64_t);
#endif
#define TAPEFLOW_INSTANTIATE(T)                                                                        \
  template bool winograd_pool<T>(const Conv2DGeometry&, const Conv2DGeometry&);                       \
  template bool conv2d_max_pool2d_winograd<T>(const T*, const T*, const T*, T*, std::int32_t*,         \
                                              const Conv2DGeometry&, const Conv2DGeometry&, bool);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
