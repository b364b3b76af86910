// Helpers shared by the convolution algorithms (tape/kernels/conv/*.cc) and the pooling kernels,
// compiled into each per-level copy (namespace isa_<level>, TAPEFLOW_KERNEL_ISA): output tiles,
// panels, the epilogue, the nonzero extent of a gradient (streaming stores: ukernels/internal/stream.h).
#pragma once
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <tbb/scalable_allocator.h>

#include "tape/kernels/conv.h"
#include "tape/kernels/gemm/internal/packed.h"
#include "tape/kernels/internal/simd512.h"
#include "tape/kernels/matmul.h"
#include "tape/kernels/nn.h"
#include "tape/kernels/parallel.h"
#include "tape/kernels/ukernels/internal/stream.h"
#include "tape/kernels/reduce.h"
#include "tape/kernels/internal/conv_isa.h"
#include "tape/kernels/ukernels/internal/ukernels.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

// Output pixels per tile: the patch tile stays under `bytes`, in whole GEMM row tiles (a multiple
// of 6 rows: a 20-row tile ran its last 2 rows through the 2-row kernel at a fraction of the speed).
template <class T>
std::int64_t tile_rows(const Conv2DGeometry& g, std::int64_t bytes) {
  const std::int64_t k = std::max<std::int64_t>(g.patch_size(), 1), mr = kConvTileRowMultiple;
  return std::clamp<std::int64_t>(bytes / (k * static_cast<std::int64_t>(sizeof(T))) / mr * mr, mr, 1 << 16);
}

inline bool pointwise(const Conv2DGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pad_top == 0 && g.pad_left == 0 && g.ho == g.h &&
         g.wo == g.w;
}


// ---- Direct kernels for few input channels (g.c <= kDirectMaxChannels) ----
// With K = kh*kw*C of 9 or 25, a GEMM tile does 9-25 FMA steps per load/store of its 6x16 output
// block, and im2col copies C values (one float) per call: W8's conv1 ran at 9-13 GFLOP/s that way.
// Here each output row reads a zero-padded copy of the kh input rows it needs (the "panel"), and
// register blocks of kDirectPixels pixels x 2 packets of output channels accumulate over the taps.

namespace ei = Eigen::internal;
using ukernel_shapes::kDirectPixels;
using ukernel_shapes::kDirectTaps;
using ukernel_shapes::kIgemmMR;
using ukernel_shapes::kWide;
using ukernel_shapes::filter_tile_begin;
using ukernel_shapes::filter_tiles;

// Whether the AVX-512 tiles (kWide columns: isa_avx512::uk) serve this copy's T: floats on a CPU
// running kAvx512, in the AVX2 + FMA copy (internal/simd512.h: the same bits as its own tiles).
template <class T>
bool wide_tiles() {
  return TAPEFLOW_HAVE_AVX512_KERNELS && internal::avx512_tiles<T>();
}

// The direct block (ukernels.h: direct_block) of this copy's level, or the AVX-512 one when wide.
template <class T>
void run_direct_block(bool wide, const T* x0, std::int64_t step, const std::int64_t* tap_offset, std::int64_t k,
                      const T* fq, std::int64_t fp, T* y, std::int64_t ldy, const T* bias, bool relu) {
#if TAPEFLOW_HAVE_AVX512_KERNELS
  if constexpr (std::is_same_v<T, float>)
    if (wide) return isa_avx512::uk::direct_block(x0, step, tap_offset, k, fq, fp, y, ldy, bias, relu);
#endif
  uk::direct_block(x0, step, tap_offset, k, fq, fp, y, ldy, bias, relu);
}
// The direct filter-gradient block (ukernels.h: direct_filter_block) of this level, or AVX-512's.
template <class T>
void run_direct_filter_block(bool wide, const T* panel, std::int64_t step, const std::int64_t* off, std::int64_t wo,
                             const T* d_row, std::int64_t fp, T* part, std::int64_t nq) {
#if TAPEFLOW_HAVE_AVX512_KERNELS
  if constexpr (std::is_same_v<T, float>)
    if (wide) return isa_avx512::uk::direct_filter_block(panel, step, off, wo, d_row, fp, part, nq);
#endif
  uk::direct_filter_block(panel, step, off, wo, d_row, fp, part, nq);
}

// Fixed tile count of the filter gradient's output rows (partials added in tile order: results
// do not depend on the thread count).
inline constexpr std::int64_t kDirectFilterTiles = 32;

inline std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

// Whether an output of `bytes` at `out`, written in whole packets at multiples of the packet size,
// should bypass the caches (stream_packet): at least kConvStreamBytes, far past L2, which the next
// op reads from memory anyway; streaming skips the read-for-ownership of every line (W8's pool1
// gradient, 11 MB: 1.5-1.7 -> 1.2-1.3 ms inside the step).
template <class T>
bool stream_output(const T* out, std::int64_t bytes) {
  constexpr std::size_t P = sizeof(typename ei::packet_traits<T>::type);
  return bytes >= kConvStreamBytes && reinterpret_cast<std::uintptr_t>(out) % P == 0;
}

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
inline std::vector<std::int64_t> panel_tap_offsets(const Conv2DGeometry& g, std::int64_t width, std::int64_t count) {
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


inline bool direct(const Conv2DGeometry& g) { return g.c <= kDirectMaxChannels && !pointwise(g); }

// Whether pred(n) holds for every image n < count, images in parallel (chunks of 16; a chunk
// stops at its first failure, the others at their next image).
template <class Pred>
bool all_images(std::int64_t count, Pred pred) {
  std::atomic<bool> fails{false};
  parallel_for(count, 16, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e && !fails.load(std::memory_order_relaxed); ++n)
      if (!pred(n)) fails.store(true, std::memory_order_relaxed);
  });
  return !fails.load();
}

// dy's rows and columns that can hold a nonzero: (rows, cols) such that dy[n, a, b, :] is zero
// for every a >= rows or b >= cols, found from the last row (column) backwards. A max pool's
// gradient is zero on the lines no window reads (W8's conv2: its last row and column, a sixth of
// the product); other gradients stop at the first nonzero value.
template <class T>
std::pair<std::int64_t, std::int64_t> nonzero_extent(const T* dy, const Conv2DGeometry& g) {
  // The OR of the values' bits but the sign's (+0 and -0 are zero, NaN is not): a loop GCC
  // vectorises, where a test per element with an early exit ran at a few ns per value.
  // Images in parallel: in a training step dy comes from memory, and a strided scan on one thread
  // took 0.1-0.2 ms of W8's conv2 gradients.
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  const auto zero_line = [&](std::int64_t a0, std::int64_t a1, std::int64_t b0, std::int64_t b1) {
    return all_images(g.n, [&](std::int64_t n) {
      U bits = 0;
      for (std::int64_t a = a0; a < a1; ++a) {
        const T* p = dy + ((n * g.ho + a) * g.wo + b0) * g.f;
        for (std::int64_t i = 0; i < (b1 - b0) * g.f; ++i) bits |= std::bit_cast<U>(p[i]);
      }
      return static_cast<U>(bits << 1) == 0;
    });
  };
  std::int64_t rows = g.ho, cols = g.wo;
  while (rows > 0 && zero_line(rows - 1, rows, 0, g.wo)) --rows;
  while (cols > 0 && rows > 0 && zero_line(0, rows, cols - 1, cols)) --cols;
  return {rows, cols};
}

// Whether p[0, count) holds no inf or NaN: no value with all exponent bits set (a loop GCC
// vectorises; std::isfinite per value ran at a few ns each).
template <class T>
bool all_finite(const T* p, std::int64_t count) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr U kExponent = static_cast<U>(sizeof(T) == 4 ? 0x7F800000ull : 0x7FF0000000000000ull);
  U special = 0;
  for (std::int64_t i = 0; i < count; ++i) special |= (std::bit_cast<U>(p[i]) & kExponent) == kExponent;
  return special == 0;
}

// Whether x [N, H, W, C] is finite on its rows from row0 on and its columns from col0 on (the part
// that output pixels past nonzero_extent's rows / columns read).
template <class T>
bool finite_from(const T* x, const Conv2DGeometry& g, std::int64_t row0, std::int64_t col0) {
  row0 = std::clamp<std::int64_t>(row0, 0, g.h);
  col0 = std::clamp<std::int64_t>(col0, 0, g.w);
  return all_images(g.n, [&](std::int64_t n) {
    const T* img = x + n * g.h * g.w * g.c;
    for (std::int64_t i = 0; i < row0; ++i)
      if (!all_finite(img + (i * g.w + col0) * g.c, (g.w - col0) * g.c)) return false;
    return all_finite(img + row0 * g.w * g.c, (g.h - row0) * g.w * g.c);
  });
}

// dx [N, H, W, C] = the gradient of conv2d w.r.t. x: A row = a dx pixel, step = a filter tap that
// reaches it (with strides: only the taps of its phase), reading dy at the output pixel the tap
// connects it to (F values); B = the filter as [taps * F, C] (row (s, f) = filter[s, :, f]). Every dx

// Rows of one im2col tile of the filter gradient: within kConvGradTileBytes, and at least
// kFilterWave tiles (from the shape alone), so few-channel layers still split across threads.
template <class T>
std::int64_t filter_tile_rows(const Conv2DGeometry& g) {
  return std::max<std::int64_t>(
      std::min(tile_rows<T>(g, kConvGradTileBytes), (g.out_pixels() + kFilterWave - 1) / kFilterWave), 6);
}

// The output rows and columns of dy the filter gradient reads: nonzero_extent's, or all of them
// when x holds an inf or NaN that the dropped pixels read (0 * inf must still give NaN).
template <class T>
std::pair<std::int64_t, std::int64_t> filter_kept_extent(const T* x, const T* dy, const Conv2DGeometry& g) {
  const auto [keep_h, keep_w] = nonzero_extent(dy, g);
  if ((keep_h < g.ho || keep_w < g.wo) && !finite_from(x, g, keep_h * g.sh - g.pad_top, keep_w * g.sw - g.pad_left))
    return {g.ho, g.wo};
  return {keep_h, keep_w};
}

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
