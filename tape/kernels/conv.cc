// Convolution and pooling kernels: im2col tiles + kernels::matmul, direct kernels for <= 4 input
// channels, max pooling in packets (see conv.h for the schemes).
#include "tape/kernels/conv.h"

#include <Eigen/Core>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "tape/kernels/matmul.h"
#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {

WindowDim window_dim(const char* op, const std::string& padding, std::int64_t in, std::int64_t k, std::int64_t s,
                     std::int64_t d, std::int64_t explicit_before, std::int64_t explicit_after) {
  auto bad = [&](const std::string& what) {
    return std::invalid_argument(std::string(op) + ": " + what + " (input size " + std::to_string(in) +
                                 ", window " + std::to_string(k) + ", stride " + std::to_string(s) + ", dilation " +
                                 std::to_string(d) + ", padding " + padding + ")");
  };
  if (in < 0 || k < 1 || s < 1 || d < 1) throw bad("window, stride and dilation must be positive");
  std::int64_t eff = 0, padded = 0, spare = 0;
  if (__builtin_mul_overflow(k - 1, d, &eff) || __builtin_add_overflow(eff, 1, &eff) ||
      __builtin_add_overflow(in, s - 1, &spare) || __builtin_add_overflow(in, explicit_before, &padded) ||
      __builtin_add_overflow(padded, explicit_after, &padded))
    throw bad("sizes overflow int64");
  WindowDim r;
  if (padding == "VALID") {
    r.out = in >= eff ? (in - eff) / s + 1 : 0;
  } else if (padding == "SAME") {
    r.out = spare / s;
    const std::int64_t total = std::max<std::int64_t>(eff - (in - (r.out - 1) * s), 0);  // in - (out-1)s is in (0, s]
    r.pad_before = total / 2;
    r.pad_after = total - r.pad_before;
  } else if (padding == "EXPLICIT") {
    if (explicit_before < 0 || explicit_after < 0) throw bad("explicit paddings must be >= 0");
    r.out = padded >= eff ? (padded - eff) / s + 1 : 0;
    r.pad_before = explicit_before;
    r.pad_after = explicit_after;
  } else {
    throw std::invalid_argument(std::string(op) + ": padding must be \"VALID\", \"SAME\" or explicit, got \"" +
                                padding + "\"");
  }
  if (r.out < 1) throw bad("computed output size " + std::to_string(r.out) + " is not positive");
  return r;
}

namespace {

// Output pixels per tile: the patch tile stays under `bytes`, in whole GEMM row tiles (a multiple
// of 6 rows: a 20-row tile ran its last 2 rows through the 2-row kernel at a fraction of the speed).
template <class T>
std::int64_t tile_rows(const Conv2DGeometry& g, std::int64_t bytes) {
  const std::int64_t k = std::max<std::int64_t>(g.patch_size(), 1), mr = kConvTileRowMultiple;
  return std::clamp<std::int64_t>(bytes / (k * static_cast<std::int64_t>(sizeof(T))) / mr * mr, mr, 1 << 16);
}

bool pointwise(const Conv2DGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pad_top == 0 && g.pad_left == 0 && g.ho == g.h &&
         g.wo == g.w;
}

// Patch rows of output pixels [p0, p1): row (p - p0) holds x at the window of p in (i, j, c) order
// (the filter's [kh, kw, C] flattening), zeros where the window lies in the padding.
template <class T>
void im2col(const T* x, const Conv2DGeometry& g, std::int64_t p0, std::int64_t p1, T* buf) {
  const std::int64_t k = g.patch_size(), hw = g.ho * g.wo;
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t n = p / hw, oh = (p % hw) / g.wo, ow = p % g.wo;
    T* row = buf + (p - p0) * k;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const std::int64_t ih = oh * g.sh - g.pad_top + i * g.dh;
      T* dst = row + i * g.kw * g.c;
      if (ih < 0 || ih >= g.h) {
        std::fill(dst, dst + g.kw * g.c, T(0));
        continue;
      }
      const T* src_row = x + (n * g.h + ih) * g.w * g.c;
      const std::int64_t iw0 = ow * g.sw - g.pad_left;
      if (g.dw == 1) {  // the row's kw taps are contiguous in x: one copy between the padded ends
        const std::int64_t j0 = std::clamp<std::int64_t>(-iw0, 0, g.kw), j1 = std::clamp<std::int64_t>(g.w - iw0, j0, g.kw);
        std::fill(dst, dst + j0 * g.c, T(0));
        if (j1 > j0) std::copy_n(src_row + (iw0 + j0) * g.c, (j1 - j0) * g.c, dst + j0 * g.c);
        std::fill(dst + j1 * g.c, dst + g.kw * g.c, T(0));
        continue;
      }
      for (std::int64_t j = 0; j < g.kw; ++j, dst += g.c) {
        const std::int64_t iw = iw0 + j * g.dw;
        if (iw < 0 || iw >= g.w)
          std::fill(dst, dst + g.c, T(0));
        else
          std::copy_n(src_row + iw * g.c, g.c, dst);
      }
    }
  }
}

// dx (image of pixel p) += patch row of p, for pixels [p0, p1) (in order).
template <class T>
void col2im(const T* buf, const Conv2DGeometry& g, std::int64_t p0, std::int64_t p1, T* dx) {
  const std::int64_t k = g.patch_size(), hw = g.ho * g.wo;
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t n = p / hw, oh = (p % hw) / g.wo, ow = p % g.wo;
    const T* row = buf + (p - p0) * k;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const std::int64_t ih = oh * g.sh - g.pad_top + i * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      T* dst_row = dx + (n * g.h + ih) * g.w * g.c;
      const T* src = row + i * g.kw * g.c;
      for (std::int64_t j = 0; j < g.kw; ++j, src += g.c) {
        const std::int64_t iw = ow * g.sw - g.pad_left + j * g.dw;
        if (iw < 0 || iw >= g.w) continue;
        T* dst = dst_row + iw * g.c;
        for (std::int64_t c = 0; c < g.c; ++c) dst[c] += src[c];
      }
    }
  }
}

// ---- Direct kernels for few input channels (g.c <= kDirectMaxChannels) ----
// With K = kh*kw*C of 9 or 25, a GEMM tile does 9-25 FMA steps per load/store of its 6x16 output
// block, and im2col copies C values (one float) per call: W8's conv1 ran at 9-13 GFLOP/s that way.
// Here each output row reads a zero-padded copy of the kh input rows it needs (the "panel"), and
// register blocks of kDirectPixels pixels x 2 packets of output channels accumulate over the taps.

namespace ei = Eigen::internal;

constexpr std::int64_t kDirectPixels = 4;  // output pixels per register block
constexpr std::int64_t kDirectTaps = 6;    // filter taps per register block in the filter gradient
// Fixed tile count of the filter gradient's output rows (partials added in tile order: results
// do not depend on the thread count).
constexpr std::int64_t kDirectFilterTiles = 32;

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

// panel[i][q][c] = x[n, oh*sh - pad_top + i*dh, q - pad_left, c] for q < width, 0 in the padding.
template <class T>
void fill_panel(const T* x, const Conv2DGeometry& g, std::int64_t n, std::int64_t oh, std::int64_t width, T* panel) {
  const std::int64_t row_len = width * g.c;
  const std::int64_t cols = std::clamp<std::int64_t>(width - g.pad_left, 0, g.w);  // input columns in the panel
  std::fill(panel, panel + g.kh * row_len, T(0));
  for (std::int64_t i = 0; i < g.kh; ++i) {
    const std::int64_t ih = oh * g.sh - g.pad_top + i * g.dh;
    if (ih >= 0 && ih < g.h) std::copy_n(x + (n * g.h + ih) * g.w * g.c, cols * g.c, panel + i * row_len + g.pad_left * g.c);
  }
}

// Panel offset of tap t = (i, j, c) (the filter's flattening) at output column 0, for t < k; 0 for
// t in [k, count).
std::vector<std::int64_t> panel_tap_offsets(const Conv2DGeometry& g, std::int64_t width, std::int64_t count) {
  std::vector<std::int64_t> off(static_cast<std::size_t>(count), 0);
  for (std::int64_t t = 0; t < std::min(count, g.patch_size()); ++t)
    off[static_cast<std::size_t>(t)] = ((t / (g.kw * g.c)) * width + ((t / g.c) % g.kw) * g.dw) * g.c + t % g.c;
  return off;
}

// Rows [rows, f] copied into dst [rows, fp] (row stride fp; columns f..fp are left as they are:
// zero-initialised by the callers, so every block loads whole packets).
template <class T>
void copy_padded_rows(const T* src, std::int64_t rows, std::int64_t f, std::int64_t fp, T* dst) {
  for (std::int64_t r = 0; r < rows; ++r) std::copy_n(src + r * f, f, dst + r * fp);
}
template <class T>
std::vector<T> pad_columns(const T* filter, std::int64_t k, std::int64_t f, std::int64_t fp) {
  std::vector<T> out(static_cast<std::size_t>(k * fp), T(0));
  copy_padded_rows(filter, k, f, fp, out.data());
  return out;
}

// The epilogue on rows [0, rows) of y [rows, f] (conv.h: ConvEpilogue), in packets.
template <class T>
void apply_epilogue(T* y, std::int64_t rows, std::int64_t f, const ConvEpilogue<T>& e) {
  using P = typename ei::packet_traits<T>::type;
  constexpr std::int64_t L = ei::packet_traits<T>::size;
  if (!e.bias && !e.relu) return;
  const P zero = ei::pset1<P>(T(0));
  for (std::int64_t r = 0; r < rows; ++r) {
    T* row = y + r * f;
    std::int64_t c = 0;
    for (; c + L <= f; c += L) {
      P v = ei::ploadu<P>(row + c);
      if (e.bias) v = ei::padd(v, ei::ploadu<P>(e.bias + c));
      if (e.relu) v = ei::pselect(ei::pcmp_lt(zero, v), v, zero);
      ei::pstoreu(row + c, v);
    }
    for (; c < f; ++c) {
      T v = row[c];
      if (e.bias) v = v + e.bias[c];
      if (e.relu) v = v > T(0) ? v : T(0);
      row[c] = v;
    }
  }
}

template <class T>
void conv2d_direct(const T* x, const T* filter, T* y, const Conv2DGeometry& g, const ConvEpilogue<T>& epilogue) {
  using P = typename ei::packet_traits<T>::type;
  constexpr std::int64_t L = ei::packet_traits<T>::size, FB = 2 * L, PX = kDirectPixels;
  const std::int64_t k = g.patch_size(), fp = round_up(g.f, FB);
  const std::int64_t width = (round_up(g.wo, PX) - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  const std::vector<T> fpad = pad_columns(filter, k, g.f, fp);
  const std::vector<std::int64_t> tap_offset = panel_tap_offsets(g, width, k);
  const std::int64_t rows = g.n * g.ho, step = g.sw * g.c;  // panel values between neighbouring pixels
  const std::int64_t grain = std::max<std::int64_t>(1, (1 << 16) / std::max<std::int64_t>(g.wo * k * g.f, 1));
  parallel_for(rows, grain, [&](std::int64_t b, std::int64_t e) {
    std::vector<T> panel(static_cast<std::size_t>(g.kh * width * g.c));
    T tail[PX * FB];
    for (std::int64_t r = b; r < e; ++r) {
      fill_panel(x, g, r / g.ho, r % g.ho, width, panel.data());
      T* y_row = y + r * g.wo * g.f;
      for (std::int64_t ow0 = 0; ow0 < g.wo; ow0 += PX)
        for (std::int64_t f0 = 0; f0 < fp; f0 += FB) {
          P acc[PX][2];
#pragma GCC unroll 4
          for (std::int64_t p = 0; p < PX; ++p) acc[p][0] = acc[p][1] = ei::pset1<P>(T(0));
          const T* x0 = panel.data() + ow0 * step;
          const T* fq = fpad.data() + f0;
          for (std::int64_t t = 0; t < k; ++t, fq += fp) {
            const T* xt = x0 + tap_offset[static_cast<std::size_t>(t)];
            const P w0 = ei::ploadu<P>(fq), w1 = ei::ploadu<P>(fq + L);
#pragma GCC unroll 4
            for (std::int64_t p = 0; p < PX; ++p) {
              const P v = ei::pset1<P>(xt[p * step]);
              acc[p][0] = ei::pmadd(v, w0, acc[p][0]);
              acc[p][1] = ei::pmadd(v, w1, acc[p][1]);
            }
          }
          const std::int64_t np = std::min(PX, g.wo - ow0), nf = std::min(FB, g.f - f0);
          if (np == PX && nf == FB) {
#pragma GCC unroll 4
            for (std::int64_t p = 0; p < PX; ++p) {
              ei::pstoreu(y_row + (ow0 + p) * g.f + f0, acc[p][0]);
              ei::pstoreu(y_row + (ow0 + p) * g.f + f0 + L, acc[p][1]);
            }
          } else {
            for (std::int64_t p = 0; p < PX; ++p) {
              ei::pstoreu(tail + p * FB, acc[p][0]);
              ei::pstoreu(tail + p * FB + L, acc[p][1]);
            }
            for (std::int64_t p = 0; p < np; ++p) std::copy_n(tail + p * FB, nf, y_row + (ow0 + p) * g.f + f0);
          }
        }
      apply_epilogue(y_row, g.wo, g.f, epilogue);
    }
  });
}

// dfilter[i, j, c, :] = sum over output pixels of x at tap (i, j, c) times dy[pixel, :]. Output
// rows in kDirectFilterTiles fixed tiles; per row, register blocks of kDirectTaps taps x 2
// packets of channels run along the row, then add into the tile's partial.
template <class T>
void conv2d_backprop_filter_direct(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g) {
  using P = typename ei::packet_traits<T>::type;
  constexpr std::int64_t L = ei::packet_traits<T>::size, FB = 2 * L, TB = kDirectTaps;
  const std::int64_t k = g.patch_size(), fp = round_up(g.f, FB), kfp = k * fp;
  const std::int64_t width = (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1, step = g.sw * g.c;
  const std::int64_t rows = g.n * g.ho, per_tile = (rows + kDirectFilterTiles - 1) / kDirectFilterTiles;
  const std::int64_t tiles = (rows + per_tile - 1) / per_tile;
  // Taps past k read offset 0 and are dropped.
  const std::vector<std::int64_t> tap_offset = panel_tap_offsets(g, width, round_up(k, TB));
  std::vector<T> partial(static_cast<std::size_t>(tiles * kfp), T(0));
  parallel_for(tiles, 1, [&](std::int64_t b, std::int64_t e) {
    std::vector<T> panel(static_cast<std::size_t>(g.kh * width * g.c));
    std::vector<T> dy_pad(g.f == fp ? 0 : static_cast<std::size_t>(g.wo * fp), T(0));
    for (std::int64_t t = b; t < e; ++t) {
      T* part = partial.data() + t * kfp;
      for (std::int64_t r = t * per_tile; r < std::min(rows, (t + 1) * per_tile); ++r) {
        fill_panel(x, g, r / g.ho, r % g.ho, width, panel.data());
        const T* d_row = dy + r * g.wo * g.f;
        if (g.f != fp) {  // channels padded with zeros to whole blocks
          copy_padded_rows(d_row, g.wo, g.f, fp, dy_pad.data());
          d_row = dy_pad.data();
        }
        for (std::int64_t f0 = 0; f0 < fp; f0 += FB)
          for (std::int64_t t0 = 0; t0 < k; t0 += TB) {
            const std::int64_t* off = tap_offset.data() + t0;
            P acc[TB][2];
#pragma GCC unroll 6
            for (std::int64_t q = 0; q < TB; ++q) acc[q][0] = acc[q][1] = ei::pset1<P>(T(0));
            for (std::int64_t ow = 0; ow < g.wo; ++ow) {
              const T* xp = panel.data() + ow * step;
              const P d0 = ei::ploadu<P>(d_row + ow * fp + f0), d1 = ei::ploadu<P>(d_row + ow * fp + f0 + L);
#pragma GCC unroll 6
              for (std::int64_t q = 0; q < TB; ++q) {
                const P v = ei::pset1<P>(xp[off[q]]);
                acc[q][0] = ei::pmadd(v, d0, acc[q][0]);
                acc[q][1] = ei::pmadd(v, d1, acc[q][1]);
              }
            }
            // acc indexed by constants only: a runtime index made GCC keep acc in memory and
            // store all 12 accumulators on every pixel (half the kernel's time).
            const std::int64_t nq = std::min(TB, k - t0);
#pragma GCC unroll 6
            for (std::int64_t q = 0; q < TB; ++q) {
              if (q >= nq) continue;
              T* out = part + (t0 + q) * fp + f0;
              ei::pstoreu(out, ei::padd(ei::ploadu<P>(out), acc[q][0]));
              ei::pstoreu(out + L, ei::padd(ei::ploadu<P>(out + L), acc[q][1]));
            }
          }
      }
    }
  });
  for (std::int64_t t = 0; t < tiles; ++t)
    for (std::int64_t r = 0; r < k; ++r) {
      const T* src = partial.data() + t * kfp + r * fp;
      T* dst = dfilter + r * g.f;
      for (std::int64_t o = 0; o < g.f; ++o) dst[o] += src[o];
    }
}

bool direct(const Conv2DGeometry& g) { return g.c <= kDirectMaxChannels && !pointwise(g); }

}  // namespace

template <class T>
void conv2d(const T* x, const T* filter, T* y, const Conv2DGeometry& g, ConvEpilogue<T> epilogue) {
  const std::int64_t rows = g.out_pixels(), k = g.patch_size();
  if (rows == 0 || g.f == 0) return;
  if (direct(g)) {
    conv2d_direct(x, filter, y, g, epilogue);
    return;
  }
  if (pointwise(g)) {
    matmul(x, filter, y, 1, rows, k, g.f, false, false, 0, 0);
    if (epilogue.bias || epilogue.relu)
      parallel_for(rows, std::max<std::int64_t>(1, (1 << 15) / g.f), [&](std::int64_t b, std::int64_t e) {
        apply_epilogue(y + b * g.f, e - b, g.f, epilogue);
      });
    return;
  }
  const std::int64_t r = tile_rows<T>(g, kConvTileBytes), tiles = (rows + r - 1) / r;
  const MatmulRhs<T> rhs(filter, k, g.f, false);  // packed once, not per tile
  parallel_for(tiles, 1, [&](std::int64_t b, std::int64_t e) {
    std::vector<T> buf(static_cast<std::size_t>(std::min(r, rows) * k));
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t p0 = t * r, p1 = std::min(rows, p0 + r);
      im2col(x, g, p0, p1, buf.data());
      rhs.multiply(buf.data(), p1 - p0, y + p0 * g.f);
      apply_epilogue(y + p0 * g.f, p1 - p0, g.f, epilogue);
    }
  });
}

template <class T>
void conv2d_backprop_input(const T* filter, const T* dy, T* dx, const Conv2DGeometry& g) {
  const std::int64_t rows = g.out_pixels(), k = g.patch_size();
  std::fill(dx, dx + g.n * g.h * g.w * g.c, T(0));
  if (rows == 0 || g.f == 0) return;
  if (pointwise(g)) {
    matmul(dy, filter, dx, 1, rows, g.f, k, false, true, 0, 0);
    return;
  }
  // Tiles never straddle images, so images (which own disjoint parts of dx) run in parallel.
  const std::int64_t hw = g.ho * g.wo, r = std::min(tile_rows<T>(g, kConvGradTileBytes), hw), per_image = (hw + r - 1) / r;
  const MatmulRhs<T> rhs(filter, g.f, k, true);  // filterᵀ, packed once
  parallel_for(g.n, 1, [&](std::int64_t b, std::int64_t e) {
    std::vector<T> buf(static_cast<std::size_t>(r * k));
    for (std::int64_t n = b; n < e; ++n)
      for (std::int64_t t = 0; t < per_image; ++t) {
        const std::int64_t p0 = n * hw + t * r, p1 = std::min(n * hw + hw, p0 + r);
        rhs.multiply(dy + p0 * g.f, p1 - p0, buf.data());
        col2im(buf.data(), g, p0, p1, dx);
      }
  });
}

namespace {

// Rows of one tap chunk in conv2d_backprop_filter's per-tap scheme (the gathered [rows, C] block
// stays under kConvTapChunkBytes).
template <class T>
std::int64_t tap_chunk_rows(const Conv2DGeometry& g) {
  return std::max<std::int64_t>(kConvTapChunkBytes / (g.c * static_cast<std::int64_t>(sizeof(T))), 64);
}

// x at tap (i, j) of the windows of output pixels [p0, p1): row (p - p0) = x[n, ih, iw, :], zeros
// where the tap lies in the padding.
template <class T>
void gather_tap(const T* x, const Conv2DGeometry& g, std::int64_t i, std::int64_t j, std::int64_t p0,
                std::int64_t p1, T* buf) {
  const std::int64_t hw = g.ho * g.wo;
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t n = p / hw, oh = (p % hw) / g.wo, ow = p % g.wo;
    const std::int64_t ih = oh * g.sh - g.pad_top + i * g.dh, iw = ow * g.sw - g.pad_left + j * g.dw;
    T* dst = buf + (p - p0) * g.c;
    if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w)
      std::fill(dst, dst + g.c, T(0));
    else
      std::copy_n(x + ((n * g.h + ih) * g.w + iw) * g.c, g.c, dst);
  }
}

}  // namespace

template <class T>
void conv2d_backprop_filter(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g) {
  const std::int64_t rows = g.out_pixels(), k = g.patch_size(), kf = k * g.f;
  std::fill(dfilter, dfilter + kf, T(0));
  if (rows == 0 || kf == 0) return;
  if (direct(g)) {
    conv2d_backprop_filter_direct(x, dy, dfilter, g);
    return;
  }
  const bool pw = pointwise(g);
  if (!pw && g.c >= kFilterPerTapChannels) {
    // Per tap (i, j): dfilter[i, j] [C, F] = x_tapᵀ [C, rows] @ dy [rows, F], the rows in chunks
    // added in order. The products are long in K and reuse one packed dy chunk, where the
    // patch-tile scheme below would run thin K = R products into kh*kw*C*F partials.
    // The dy chunk is the B operand of every tap's product: packed once per chunk, not per tap.
    const std::int64_t taps = g.kh * g.kw, cf = g.c * g.f, chunk = tap_chunk_rows<T>(g);
    for (std::int64_t p0 = 0; p0 < rows; p0 += chunk) {
      const std::int64_t p1 = std::min(rows, p0 + chunk);
      const MatmulRhs<T> rhs(dy + p0 * g.f, p1 - p0, g.f, false);
      parallel_for(taps, 1, [&](std::int64_t b, std::int64_t e) {
        std::vector<T> buf(static_cast<std::size_t>((p1 - p0) * g.c)), part(static_cast<std::size_t>(cf));
        for (std::int64_t t = b; t < e; ++t) {
          T* out = dfilter + t * cf;
          gather_tap(x, g, t / g.kw, t % g.kw, p0, p1, buf.data());
          rhs.multiply(buf.data(), g.c, p0 == 0 ? out : part.data(), true);
          if (p0 != 0)
            for (std::int64_t q = 0; q < cf; ++q) out[q] += part[q];
        }
      });
    }
    return;
  }
  // At least kFilterWave tiles (from the shape alone), so few-channel layers still split across threads.
  const std::int64_t r = std::max<std::int64_t>(
      std::min(tile_rows<T>(g, kConvGradTileBytes), (rows + kFilterWave - 1) / kFilterWave), 6);
  const std::int64_t tiles = (rows + r - 1) / r;
  const std::int64_t wave = std::min(kFilterWave, tiles);
  std::vector<T> partial(static_cast<std::size_t>(wave * kf));
  for (std::int64_t w0 = 0; w0 < tiles; w0 += wave) {
    const std::int64_t w1 = std::min(tiles, w0 + wave);
    parallel_for(w1 - w0, 1, [&](std::int64_t b, std::int64_t e) {
      std::vector<T> buf(pw ? 0 : static_cast<std::size_t>(std::min(r, rows) * k));
      for (std::int64_t i = b; i < e; ++i) {
        const std::int64_t p0 = (w0 + i) * r, p1 = std::min(rows, p0 + r);
        const T* patches = x + p0 * k;
        if (!pw) {
          im2col(x, g, p0, p1, buf.data());
          patches = buf.data();
        }
        matmul(patches, dy + p0 * g.f, partial.data() + i * kf, 1, k, p1 - p0, g.f, true, false, 0, 0);
      }
    });
    for (std::int64_t i = 0; i < w1 - w0; ++i) {
      const T* src = partial.data() + i * kf;
      for (std::int64_t j = 0; j < kf; ++j) dfilter[j] += src[j];
    }
  }
}

namespace {

// Calls f(n, oh, ow, i0, i1, j0, j1) for each output pixel in images [b, e): the window's rows
// [i0, i1) and columns [j0, j1) of the input, clipped to the unpadded image (never empty).
template <class F>
void for_windows(const Conv2DGeometry& g, std::int64_t b, std::int64_t e, F&& f) {
  for (std::int64_t n = b; n < e; ++n)
    for (std::int64_t oh = 0; oh < g.ho; ++oh) {
      const std::int64_t h0 = oh * g.sh - g.pad_top;
      const std::int64_t i0 = std::max<std::int64_t>(h0, 0), i1 = std::min(h0 + g.kh, g.h);
      for (std::int64_t ow = 0; ow < g.wo; ++ow) {
        const std::int64_t w0 = ow * g.sw - g.pad_left;
        const std::int64_t j0 = std::max<std::int64_t>(w0, 0), j1 = std::min(w0 + g.kw, g.w);
        f(n, oh, ow, i0, i1, j0, j1);
      }
    }
}

// Grain in images so that a task does at least ~32k window elements.
std::int64_t image_grain(const Conv2DGeometry& g) {
  const std::int64_t per_image = std::max<std::int64_t>(g.ho * g.wo * g.c * g.kh * g.kw, 1);
  return std::max<std::int64_t>(1, (1 << 15) / per_image);
}

// Offsets in x of a window's taps, in window order (row-major; a tap's index is its window
// position). Returns the count.
std::int64_t window_taps(const Conv2DGeometry& g, std::int64_t n, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                         std::int64_t j1, std::int64_t* off) {
  std::int64_t t = 0;
  for (std::int64_t i = i0; i < i1; ++i)
    for (std::int64_t j = j0; j < j1; ++j) off[t++] = ((n * g.h + i) * g.w + j) * g.c;
  return t;
}

// Max pooling's kernels run per window with channels in packets outermost and the taps inside, so
// the running maximum, its position and the output stay in registers. Per channel: the first
// maximum in window order (strict >, so NaN never replaces and ties keep the first, as TF's CPU
// kernel); its position is held as a T (exact: windows are far smaller than 2^24) so that value and
// position update under one packet select. Explicit packets: GCC turns scalar selects into masked
// stores, which are microcoded and slow on AMD.
template <class T>
struct WindowMax {
  using P = typename ei::packet_traits<T>::type;
  static constexpr std::int64_t L = ei::packet_traits<T>::size;
  const T* x;
  const std::int64_t* off;
  std::int64_t taps;
  // Maximum and its position for the packet of channels at c.
  void packet(std::int64_t c, P& best, P& pos) const {
    best = ei::ploadu<P>(x + off[0] + c);
    pos = ei::pset1<P>(T(0));
    for (std::int64_t t = 1; t < taps; ++t) {
      const P v = ei::ploadu<P>(x + off[t] + c), gt = ei::pcmp_lt(best, v);
      best = ei::pselect(gt, v, best);
      pos = ei::pselect(gt, ei::pset1<P>(static_cast<T>(t)), pos);
    }
  }
  // The same for one channel.
  std::int64_t scalar(std::int64_t c, T& best) const {
    std::int64_t at = 0;
    best = x[off[0] + c];
    for (std::int64_t t = 1; t < taps; ++t)
      if (x[off[t] + c] > best) best = x[off[t] + c], at = t;
    return at;
  }
};

// Whether the windows tile the input exactly (each element in exactly one window).
bool windows_tile_input(const Conv2DGeometry& g) {
  return g.sh == g.kh && g.sw == g.kw && g.pad_top == 0 && g.pad_left == 0 && g.ho * g.kh == g.h &&
         g.wo * g.kw == g.w;
}

}  // namespace

template <class T>
void max_pool2d(const T* x, T* y, const Conv2DGeometry& g) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int64_t> off(static_cast<std::size_t>(g.kh * g.kw));
    for_windows(g, b, e, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
      T* out = y + ((n * g.ho + oh) * g.wo + ow) * g.c;
      const WindowMax<T> w{x, off.data(), window_taps(g, n, i0, i1, j0, j1, off.data())};
      std::int64_t c = 0;
      for (; c + L <= g.c; c += L) {
        P best, pos;
        w.packet(c, best, pos);
        ei::pstoreu(out + c, best);
      }
      for (; c < g.c; ++c) w.scalar(c, out[c]);
    });
  });
}

// dx gets each window's dy at its argmax, through a select per tap (no per-channel offsets or
// scattered writes). When the windows tile the input (2x2 stride 2 on an even image) every element
// is written once and dx needs no zeroing; otherwise an image's dx is zeroed just before its
// windows add into it, while it is in cache.
template <class T>
void max_pool2d_grad(const T* x, const T* dy, T* dx, const Conv2DGeometry& g) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  const std::int64_t image = g.h * g.w * g.c;
  const bool assign = windows_tile_input(g);
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int64_t> off(static_cast<std::size_t>(g.kh * g.kw));
    const P zero = ei::pset1<P>(T(0));
    for (std::int64_t m = b; m < e; ++m) {
      if (!assign) std::fill(dx + m * image, dx + (m + 1) * image, T(0));
      for_windows(g, m, m + 1, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
        const T* d = dy + ((n * g.ho + oh) * g.wo + ow) * g.c;
        const WindowMax<T> w{x, off.data(), window_taps(g, n, i0, i1, j0, j1, off.data())};
        std::int64_t c = 0;
        for (; c + L <= g.c; c += L) {
          P best, pos;
          w.packet(c, best, pos);
          const P dv = ei::ploadu<P>(d + c);
          for (std::int64_t t = 0; t < w.taps; ++t) {
            T* o = dx + off[static_cast<std::size_t>(t)] + c;
            const P v = ei::pselect(ei::pcmp_eq(pos, ei::pset1<P>(static_cast<T>(t))), dv, zero);
            ei::pstoreu(o, assign ? v : ei::padd(ei::ploadu<P>(o), v));
          }
        }
        for (; c < g.c; ++c) {
          T best;
          const std::int64_t at = w.scalar(c, best);
          for (std::int64_t t = 0; t < w.taps; ++t) {
            T& o = dx[off[static_cast<std::size_t>(t)] + c];
            const T v = t == at ? d[c] : T(0);
            o = assign ? v : o + v;
          }
        }
      });
    }
  });
}

// y[window] = ddx at the window's argmax.
template <class T>
void max_pool2d_grad_grad(const T* x, const T* ddx, T* y, const Conv2DGeometry& g) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int64_t> off(static_cast<std::size_t>(g.kh * g.kw));
    for_windows(g, b, e, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
      T* out = y + ((n * g.ho + oh) * g.wo + ow) * g.c;
      const WindowMax<T> w{x, off.data(), window_taps(g, n, i0, i1, j0, j1, off.data())};
      std::int64_t c = 0;
      for (; c + L <= g.c; c += L) {
        P best, pos, r = ei::pset1<P>(T(0));
        w.packet(c, best, pos);
        for (std::int64_t t = 0; t < w.taps; ++t)
          r = ei::pselect(ei::pcmp_eq(pos, ei::pset1<P>(static_cast<T>(t))),
                          ei::ploadu<P>(ddx + off[static_cast<std::size_t>(t)] + c), r);
        ei::pstoreu(out + c, r);
      }
      for (; c < g.c; ++c) {
        T best;
        out[c] = ddx[off[static_cast<std::size_t>(w.scalar(c, best))] + c];
      }
    });
  });
}

template <class T>
void avg_pool2d(const T* x, T* y, const Conv2DGeometry& g) {
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    for_windows(g, b, e, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
      T* out = y + ((n * g.ho + oh) * g.wo + ow) * g.c;
      std::fill(out, out + g.c, T(0));
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = j0; j < j1; ++j) {
          const T* in = x + ((n * g.h + i) * g.w + j) * g.c;
          for (std::int64_t c = 0; c < g.c; ++c) out[c] += in[c];
        }
      const T count = static_cast<T>((i1 - i0) * (j1 - j0));
      for (std::int64_t c = 0; c < g.c; ++c) out[c] /= count;
    });
  });
}

template <class T>
void avg_pool2d_grad(const T* dy, T* dx, const Conv2DGeometry& g) {
  std::fill(dx, dx + g.n * g.h * g.w * g.c, T(0));
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    for_windows(g, b, e, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
      const T* d = dy + ((n * g.ho + oh) * g.wo + ow) * g.c;
      const T count = static_cast<T>((i1 - i0) * (j1 - j0));
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = j0; j < j1; ++j) {
          T* out = dx + ((n * g.h + i) * g.w + j) * g.c;
          for (std::int64_t c = 0; c < g.c; ++c) out[c] += d[c] / count;
        }
    });
  });
}

#define TAPEFLOW_INSTANTIATE_CONV(T)                                                    \
  template void conv2d<T>(const T*, const T*, T*, const Conv2DGeometry&, ConvEpilogue<T>); \
  template void conv2d_backprop_input<T>(const T*, const T*, T*, const Conv2DGeometry&); \
  template void conv2d_backprop_filter<T>(const T*, const T*, T*, const Conv2DGeometry&); \
  template void max_pool2d<T>(const T*, T*, const Conv2DGeometry&);                      \
  template void max_pool2d_grad<T>(const T*, const T*, T*, const Conv2DGeometry&);       \
  template void max_pool2d_grad_grad<T>(const T*, const T*, T*, const Conv2DGeometry&);  \
  template void avg_pool2d<T>(const T*, T*, const Conv2DGeometry&);                      \
  template void avg_pool2d_grad<T>(const T*, T*, const Conv2DGeometry&);
TAPEFLOW_INSTANTIATE_CONV(float)
TAPEFLOW_INSTANTIATE_CONV(double)
#undef TAPEFLOW_INSTANTIATE_CONV

}  // namespace tapeflow::kernels
