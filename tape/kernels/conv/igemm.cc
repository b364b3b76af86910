// The indirect GEMM convolutions (conv/igemm.h): tiles of kIgemmMR rows x 2 packets over a table
// of row pointers into x (or dy), B packed once per call; the AVX-512 tiles in ukernels/.
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv/internal/igemm.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

namespace {

// ---- Indirect GEMM (XNNPACK's indirection-buffer scheme) for more than kDirectMaxChannels channels ----
// A convolution is a GEMM whose A rows are gathered: row p, step s (a filter tap that reaches
// pixel p) is C contiguous values at a pointer into x. Tiles of kIgemmMR rows x 2 packets keep 12
// accumulators in registers over all the taps (on AVX-512, two row tiles x 32 columns at once:
// 24), read A straight from x through a table of pointers built per task (no im2col copy, no A
// packing) and B from panels packed once per call.

// Bytes of one B micro-panel (K rows x 2 packets) that should stay in L1 while the row tiles of a
// task stream past it: taps are grouped so that a group's K rows fit.
constexpr std::int64_t kIgemmPanelBytes = 24 * 1024;
// Output rows per work item: its pointer table stays under kIgemmChunkRows x taps pointers (about
// 19 KB for a 3x3 filter, 52 KB for 5x5) whatever the image size, and one image splits into
// several items.
constexpr std::int64_t kIgemmChunkRows = 264;


// The indirect GEMM's tile (ukernels.h: igemm_tile) of this copy's level, or AVX-512's when wide.
template <class T>
void run_igemm_tile(bool wide, int tiles, std::int64_t steps, const T* const* a, std::int64_t a_stride,
                    const std::int64_t* boff, std::int64_t klen, const T* bp, const T* bq, std::int64_t bstride,
                    T* const* c, bool accumulate) {
#if TAPEFLOW_HAVE_AVX512_KERNELS
  if constexpr (std::is_same_v<T, float>)
    if (wide) return isa_avx512::uk::igemm_tile(tiles, steps, a, a_stride, boff, klen, bp, bq, bstride, c, accumulate);
#endif
  uk::igemm_tile(tiles, steps, a, a_stride, boff, klen, bp, bq, bstride, c, accumulate);
}

}  // namespace

// Output rows [0, rows) of n values, row i at out[i], of an indirect GEMM whose row tile r (MR
// rows) reads `steps` steps: MR row pointers per step at ind + (r * steps + s) * MR, the step's B
// rows at offset boff[s] of a panel. Tiles of MR rows x NB columns over groups of `group` steps
// (accumulating through the output between groups, so a group's K rows of a B panel stay in L1
// while the row tiles pass); edge tiles go through a tile on the stack.
template <class T>
void igemm_rows(std::int64_t rows, std::int64_t steps, std::int64_t group, const T* const* ind,
                const std::int64_t* boff, std::int64_t klen, const T* packed, std::int64_t k_panel, std::int64_t n,
                T* const* out) {
  constexpr std::int64_t NB = 2 * ei::packet_traits<T>::size, MR = kIgemmMR;
  const std::int64_t panels = (n + NB - 1) / NB;
  alignas(64) T tmp[MR * 2 * NB];
  T* crow[2 * MR];
  // Floats on AVX-512: row tiles over two full panels at once (simd512.h).
  const bool wide = wide_tiles<T>();
  for (std::int64_t s0 = 0; s0 < steps; s0 += group) {
    const std::int64_t ns = std::min(group, steps - s0);
    const bool acc = s0 > 0;
    for (std::int64_t jp = 0; jp < panels; ++jp) {
      // A tile's two vectors of B: the two halves of one panel (NB columns), or with the AVX-512
      // tiles two adjacent panels (2 * NB columns); NB values per p either way.
      const T* bp = packed + jp * k_panel * NB;
      const std::int64_t j0 = jp * NB;
      const bool pair = wide && n - j0 >= 2 * NB;
      const std::int64_t width = pair ? 2 * NB : NB, nc = std::min(width, n - j0);
      const T* bq = pair ? bp + k_panel * NB : bp + NB / 2;
      for (std::int64_t r0 = 0; r0 < rows; r0 += MR) {
        const T* const* a = ind + (r0 / MR * steps + s0) * MR;
        const std::int64_t nr = std::min(MR, rows - r0);
        if (pair && rows - r0 >= 2 * MR) {  // two full row tiles at once (24 zmm accumulators)
          for (std::int64_t q = 0; q < 2 * MR; ++q) crow[q] = out[r0 + q] + j0;
          run_igemm_tile(pair, 2, ns, a, steps * MR, boff + s0, klen, bp, bq, NB, crow, acc);
          r0 += MR;  // the loop adds the other MR
          continue;
        }
        if (nr == MR && nc == width) {
          for (std::int64_t q = 0; q < MR; ++q) crow[q] = out[r0 + q] + j0;
          run_igemm_tile(pair, 1, ns, a, 0, boff + s0, klen, bp, bq, NB, crow, acc);
          continue;
        }
        // A short tile (border classes, the last columns): through a tile on the stack.
        for (std::int64_t q = 0; q < MR; ++q) crow[q] = tmp + q * width;
        if (acc)
          for (std::int64_t q = 0; q < nr; ++q) std::copy_n(out[r0 + q] + j0, nc, tmp + q * width);
        run_igemm_tile(pair, 1, ns, a, 0, boff + s0, klen, bp, bq, NB, crow, acc);
        for (std::int64_t q = 0; q < nr; ++q) std::copy_n(tmp + q * width, nc, out[r0 + q] + j0);
      }
      if (pair) ++jp;  // its second panel is done
    }
  }
}

namespace {

// Steps per group: the group's K rows of a B panel stay under kIgemmPanelBytes, and the groups of
// a tile's `steps` steps are as even as can be (8 + 1 taps cost a second pass through the output
// for one tap).
template <class T>
std::int64_t igemm_group(std::int64_t klen, std::int64_t steps) {
  constexpr std::int64_t NB = 2 * ei::packet_traits<T>::size;
  const std::int64_t most = std::max<std::int64_t>(1, kIgemmPanelBytes / (klen * NB * static_cast<std::int64_t>(sizeof(T))));
  const std::int64_t groups = std::max<std::int64_t>((steps + most - 1) / most, 1);
  return std::max<std::int64_t>((steps + groups - 1) / groups, 1);
}

// Which filter rows (or columns) reach one output row (or column) of an indirect convolution, and
// the source row each reads: pairs (i, source index), i ascending.
using TapLine = std::vector<std::pair<std::int64_t, std::int64_t>>;

// Output lines [0, limit) with the same filter rows, in order of first appearance: the classes
// whose pixels share one tap list (so a tile never multiplies padding or, with strides, a
// structural zero).
struct LineClasses {
  std::vector<std::vector<std::int64_t>> lines;  // per class: its output lines, ascending
  std::vector<std::vector<std::int64_t>> taps;   // per class: its filter rows
};
LineClasses line_classes(const std::vector<TapLine>& per_line, std::int64_t limit) {
  LineClasses c;
  for (std::int64_t l = 0; l < std::min(limit, static_cast<std::int64_t>(per_line.size())); ++l) {
    std::vector<std::int64_t> rows;
    for (const auto& [i, src] : per_line[static_cast<std::size_t>(l)]) rows.push_back(i);
    const auto it = std::find(c.taps.begin(), c.taps.end(), rows);
    if (it == c.taps.end()) {
      c.taps.push_back(std::move(rows));
      c.lines.push_back({l});
    } else {
      c.lines[static_cast<std::size_t>(it - c.taps.begin())].push_back(l);
    }
  }
  return c;
}

// The indirect-GEMM convolution shared by conv2d and conv2d_backprop_input. Output grid
// [n, rows_h.size(), cols_w.size()] of `nout` channels at dst; output pixel (m, a, b) reads, for
// each (i, sh) in rows_h[a] and (j, sw) in cols_w[b] (tap order: i, then j), the `klen` values at
// src[((m * src_h + sh) * src_w + sw) * klen] times the B rows of tap (i, j): packed panels of
// [kh * kw * klen, nout]. Pixels with the same row and column classes run together, in work items
// fixed by the shape (any partition gives the same bits anyway: each output element is one sum).
// Pixels no tap reaches are set to zero. finish(row) runs on each output row once it is complete
// (still in cache). Only the pixels of output rows < need.h and columns < need.w are computed (the
// rest of dst is left as it is).
template <class T, class Finish>
void igemm_conv(std::int64_t n, const std::vector<TapLine>& rows_h, const std::vector<TapLine>& cols_w,
                std::int64_t kw, const T* src, std::int64_t src_h, std::int64_t src_w, std::int64_t klen,
                const std::vector<T>& packed, T* dst, std::int64_t nout, Finish finish, NeededLines need = {}) {
  constexpr std::int64_t NB = 2 * ei::packet_traits<T>::size, MR = kIgemmMR;
  const std::int64_t oh = static_cast<std::int64_t>(rows_h.size()), ow = static_cast<std::int64_t>(cols_w.size());
  const LineClasses rc = line_classes(rows_h, need.h), cc = line_classes(cols_w, need.w);
  const std::int64_t classes = static_cast<std::int64_t>(rc.taps.size() * cc.taps.size());
  const std::int64_t k_panel = static_cast<std::int64_t>(packed.size()) / (((nout + NB - 1) / NB) * NB);
  // Work items: images in groups of about 24 pixels per class (so small border classes still fill
  // most of a tile), then per class its rows in chunks of kIgemmChunkRows (so one large image, or a
  // batch of one, still splits across threads).
  const std::int64_t images = std::clamp<std::int64_t>((24 * classes + oh * ow - 1) / (oh * ow), 1, n);
  struct Item {
    std::int64_t n0, n1, r, c, row0;
  };
  std::vector<Item> items;
  for (std::int64_t n0 = 0; n0 < n; n0 += images)
    for (std::size_t r = 0; r < rc.taps.size(); ++r)
      for (std::size_t c = 0; c < cc.taps.size(); ++c) {
        const std::int64_t n1 = std::min(n, n0 + images);
        const std::int64_t rows = (n1 - n0) * static_cast<std::int64_t>(rc.lines[r].size() * cc.lines[c].size());
        for (std::int64_t row0 = 0; row0 < rows; row0 += kIgemmChunkRows)
          items.push_back({n0, n1, static_cast<std::int64_t>(r), static_cast<std::int64_t>(c), row0});
      }
  parallel_for(static_cast<std::int64_t>(items.size()), 1, [&](std::int64_t b, std::int64_t e) {
    std::vector<const T*> ind;
    std::vector<T*> out;
    std::vector<std::int64_t> boff, hoff, woff;
    for (std::int64_t it = b; it < e; ++it) {
      const Item& item = items[static_cast<std::size_t>(it)];
      const std::vector<std::int64_t>& lr = rc.lines[static_cast<std::size_t>(item.r)];
      const std::vector<std::int64_t>& lc = cc.lines[static_cast<std::size_t>(item.c)];
      const std::vector<std::int64_t>& tr = rc.taps[static_cast<std::size_t>(item.r)];
      const std::vector<std::int64_t>& tc = cc.taps[static_cast<std::size_t>(item.c)];
      const std::int64_t la = static_cast<std::int64_t>(lr.size()), lb = static_cast<std::int64_t>(lc.size());
      const std::int64_t ni = static_cast<std::int64_t>(tr.size()), nj = static_cast<std::int64_t>(tc.size());
      const std::int64_t steps = ni * nj, group = igemm_group<T>(klen, steps);
      const std::int64_t nr = std::min(kIgemmChunkRows, (item.n1 - item.n0) * la * lb - item.row0);
      boff.resize(static_cast<std::size_t>(steps));
      for (std::int64_t u = 0; u < ni; ++u)
        for (std::int64_t v = 0; v < nj; ++v)
          boff[static_cast<std::size_t>(u * nj + v)] = (tr[static_cast<std::size_t>(u)] * kw + tc[static_cast<std::size_t>(v)]) * klen * NB;
      const std::int64_t padded = round_up(nr, MR);
      ind.resize(static_cast<std::size_t>(padded * steps));
      out.resize(static_cast<std::size_t>(nr));
      // Row q of the class: image n0 + q / (la * lb), line lr[(q / lb) % la], column lc[q % lb]; its
      // output row and, per step (u, v), the pointer it reads: the image's base plus the line's row
      // offset for u plus the column's offset for v (both tabled once per item, no divisions per row).
      hoff.resize(static_cast<std::size_t>(la * ni));
      woff.resize(static_cast<std::size_t>(lb * nj));
      for (std::int64_t ai = 0; ai < la; ++ai)
        for (std::int64_t u = 0; u < ni; ++u)
          hoff[static_cast<std::size_t>(ai * ni + u)] =
              rows_h[static_cast<std::size_t>(lr[static_cast<std::size_t>(ai)])][static_cast<std::size_t>(u)].second *
              src_w * klen;
      for (std::int64_t ci = 0; ci < lb; ++ci)
        for (std::int64_t v = 0; v < nj; ++v)
          woff[static_cast<std::size_t>(ci * nj + v)] =
              cols_w[static_cast<std::size_t>(lc[static_cast<std::size_t>(ci)])][static_cast<std::size_t>(v)].second *
              klen;
      std::int64_t m = item.n0 + item.row0 / (la * lb), ai = item.row0 / lb % la, ci = item.row0 % lb;
      for (std::int64_t q = 0; q < nr; ++q) {
        out[static_cast<std::size_t>(q)] =
            dst + ((m * oh + lr[static_cast<std::size_t>(ai)]) * ow + lc[static_cast<std::size_t>(ci)]) * nout;
        const T* base = src + m * src_h * src_w * klen;
        const std::int64_t* h = hoff.data() + ai * ni;
        const std::int64_t* w = woff.data() + ci * nj;
        const T** slot = ind.data() + (q / MR) * steps * MR + q % MR;
        for (std::int64_t u = 0; u < ni; ++u, slot += nj * MR) {
          const T* bu = base + h[u];
          for (std::int64_t v = 0; v < nj; ++v) slot[v * MR] = bu + w[v];
        }
        if (++ci == lb) {
          ci = 0;
          if (++ai == la) ai = 0, ++m;
        }
      }
      if (steps == 0) {
        for (T* o : out) std::fill(o, o + nout, T(0));
        for (T* o : out) finish(o);
        continue;
      }
      // Padding rows of the last tile read the first row's pointers (their results are dropped).
      for (std::int64_t q = nr; q < padded; ++q) {
        const T** slot = ind.data() + (q / MR) * steps * MR + q % MR;
        for (std::int64_t st = 0; st < steps; ++st) slot[st * MR] = ind[static_cast<std::size_t>(st * MR)];
      }
      igemm_rows(nr, steps, group, ind.data(), boff.data(), klen, packed.data(), k_panel, nout, out.data());
      for (T* o : out) finish(o);
    }
  });
}

}  // namespace

// y [N, Ho, Wo, F] = conv2d(x, filter): A row = an output pixel, step = a filter tap inside the
// image (C values of x), B = the filter as [taps * C, F].
template <class T>
void conv2d_igemm(const T* x, const T* filter, T* y, const Conv2DGeometry& g, const ConvEpilogue<T>& epilogue,
                  NeededLines need) {
  const std::int64_t k = g.kh * g.kw * g.c;
  const std::vector<T> packed = pack_panels<T>(k, g.f, [&](std::int64_t r, std::int64_t j) { return filter[r * g.f + j]; });
  auto lines = [](std::int64_t out, std::int64_t in, std::int64_t kk, std::int64_t st, std::int64_t pad, std::int64_t d) {
    std::vector<TapLine> l(static_cast<std::size_t>(out));
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < kk; ++i)
        if (const std::int64_t src = o * st - pad + i * d; src >= 0 && src < in) l[static_cast<std::size_t>(o)].push_back({i, src});
    return l;
  };
  igemm_conv(g.n, lines(g.ho, g.h, g.kh, g.sh, g.pad_top, g.dh), lines(g.wo, g.w, g.kw, g.sw, g.pad_left, g.dw), g.kw, x,
             g.h, g.w, g.c, packed, y, g.f, [&](T* row) { apply_epilogue(row, 1, g.f, epilogue); }, need);
}


// dx [N, H, W, C] = the gradient of conv2d w.r.t. x: A row = a dx pixel, step = a filter tap that
// reaches it (with strides: only the taps of its phase), reading dy at the output pixel the tap
// connects it to (F values); B = the filter as [taps * F, C] (row (s, f) = filter[s, :, f]). Every dx
// element is one sum: no col2im and no zeroing.
template <class T>
void conv2d_backprop_input_igemm(const T* filter, const T* dy, T* dx, const Conv2DGeometry& g) {
  const std::int64_t k = g.kh * g.kw * g.f;
  const std::vector<T> packed = pack_panels<T>(
      k, g.c, [&](std::int64_t r, std::int64_t j) { return filter[((r / g.f) * g.c + j) * g.f + r % g.f]; });
  // Taps that read dy's all-zero trailing lines are left out: each dx element is one FMA chain from
  // 0, to which a zero product adds exactly nothing, so the values are the same bits. Not with a
  // non-finite filter value, where 0 * inf must still give NaN.
  const bool finite = all_finite(filter, g.patch_size() * g.f);
  const auto [rows, cols] = finite ? nonzero_extent(dy, g) : std::pair<std::int64_t, std::int64_t>{g.ho, g.wo};
  auto lines = [](std::int64_t in, std::int64_t out, std::int64_t kk, std::int64_t st, std::int64_t pad, std::int64_t d) {
    std::vector<TapLine> l(static_cast<std::size_t>(in));
    for (std::int64_t x = 0; x < in; ++x)
      for (std::int64_t i = 0; i < kk; ++i)
        if (const std::int64_t v = x + pad - i * d; v >= 0 && v % st == 0 && v / st < out)
          l[static_cast<std::size_t>(x)].push_back({i, v / st});
    return l;
  };
  igemm_conv(g.n, lines(g.h, rows, g.kh, g.sh, g.pad_top, g.dh), lines(g.w, cols, g.kw, g.sw, g.pad_left, g.dw), g.kw,
             dy, g.ho, g.wo, g.f, packed, dx, g.c, [](T*) {});
}

#define TAPEFLOW_INSTANTIATE(T)                                                                                     \
  template void igemm_rows<T>(std::int64_t, std::int64_t, std::int64_t, const T* const*, const std::int64_t*,       \
                              std::int64_t, const T*, std::int64_t, std::int64_t, T* const*);                       \
  template void conv2d_igemm<T>(const T*, const T*, T*, const Conv2DGeometry&, const ConvEpilogue<T>&,            \
                                NeededLines);                                                                      \
  template void conv2d_backprop_input_igemm<T>(const T*, const T*, T*, const Conv2DGeometry&);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
