// Convolution and pooling kernels: indirect GEMMs (conv2d, conv2d_backprop_input), the packed GEMM
// fed from x or im2col tiles (the filter gradient), direct kernels for <= 4 input channels, max
// pooling in packets (see conv.h for the schemes).
// Compiled once per instruction-set level (tape/CMakeLists.txt: tapeflow_per_isa_sources), into
// kernels::isa_<level> (TAPEFLOW_KERNEL_ISA); conv_dispatch.cc picks a copy per call. In the AVX2
// copy every inline function and template instantiated from a header outside that namespace (std,
// Eigen, oneTBB, project headers) is renamed after compiling (cmake/isa_localize.cmake), so the
// linker cannot hand its AVX2 code to baseline callers (the ODR hazard of per-file ISA flags).
#ifndef TAPEFLOW_KERNEL_ISA
#error "conv.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv.h"

#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <immintrin.h>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <tbb/scalable_allocator.h>

#include "tape/kernels/internal/conv_isa.h"
#include "tape/kernels/internal/gemm_avx2.h"
#include "tape/kernels/internal/simd512.h"
#include "tape/kernels/matmul.h"
#include "tape/kernels/nn.h"
#include "tape/kernels/parallel.h"
#include "tape/kernels/reduce.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

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

constexpr std::int64_t kDirectPixels = 6;  // output pixels per register block
constexpr std::int64_t kDirectTaps = 6;    // filter taps per register block in the filter gradient
// Fixed tile count of the filter gradient's output rows (partials added in tile order: results
// do not depend on the thread count).
constexpr std::int64_t kDirectFilterTiles = 32;

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

// Keeps two packets in registers: GCC otherwise folds their load into every FMA that uses them,
// which doubles the loads per tap of the direct kernels (load-bound on Zen 3 at 2 x 256-bit loads
// per cycle).
template <class P>
inline void pin(P& a, P& b) {
  asm("" : "+x"(a), "+x"(b));
}

// Whether an output of `bytes` at `out`, written in whole packets at multiples of the packet size,
// should bypass the caches (stream_packet): at least kConvStreamBytes, far past L2, which the next
// op reads from memory anyway; streaming skips the read-for-ownership of every line (W8's pool1
// gradient, 11 MB: 1.5-1.7 -> 1.2-1.3 ms inside the step).
template <class T>
bool stream_output(const T* out, std::int64_t bytes) {
  constexpr std::size_t P = sizeof(typename ei::packet_traits<T>::type);
  return bytes >= kConvStreamBytes && reinterpret_cast<std::uintptr_t>(out) % P == 0;
}

// Orders a task's streaming stores before whatever follows it (they are weakly ordered).
struct StreamFence {
  bool active;
  explicit StreamFence(bool a) : active(a) {}
  StreamFence(const StreamFence&) = delete;
  StreamFence& operator=(const StreamFence&) = delete;
  ~StreamFence() {
    if (active) _mm_sfence();
  }
};

// Non-temporal store of a packet to a packet-aligned address (a plain aligned store without AVX).
template <class T, class P>
void stream_packet(T* p, const P& v) {
#if defined(__AVX__)
  if constexpr (sizeof(P) == 32 && std::is_same_v<T, float>) {
    _mm256_stream_ps(p, v);
    return;
  } else if constexpr (sizeof(P) == 32 && std::is_same_v<T, double>) {
    _mm256_stream_pd(p, v);
    return;
  }
#endif
  ei::pstore(p, v);
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

// Channels (columns) of the AVX-512 float tiles and blocks (simd512.h): two zmm registers.
constexpr std::int64_t kWide = 32;

#if TAPEFLOW_HAVE_AVX512_KERNELS
// The direct kernels' register blocks for floats on AVX-512: kWide channels per block instead of
// 16; per element the same FMA chain, so the same bits.

// Forward: kDirectPixels pixels (panel values x0 + p * step + tap offset) x 32 channels of the
// padded filter (fq, row stride fp) over the k taps, then the epilogue (bias: its 32 values for
// these channels, or null; relu), stored at y + p * ldy. The epilogue is apply_epilogue's: the
// chain's sum + bias, then v > 0 ? v : 0.
TAPEFLOW_AVX512 void direct_block_512(const float* x0, std::int64_t step, const std::int64_t* tap_offset,
                                      std::int64_t k, const float* fq, std::int64_t fp, float* y, std::int64_t ldy,
                                      const float* bias, bool relu) {
  constexpr std::int64_t PX = kDirectPixels;
  __m512 acc[PX][2];
#pragma GCC unroll 6
  for (std::int64_t p = 0; p < PX; ++p) acc[p][0] = acc[p][1] = _mm512_setzero_ps();
  for (std::int64_t t = 0; t < k; ++t, fq += fp) {
    const float* xt = x0 + tap_offset[t];
    const __m512 w0 = _mm512_loadu_ps(fq), w1 = _mm512_loadu_ps(fq + 16);
#pragma GCC unroll 6
    for (std::int64_t p = 0; p < PX; ++p) {
      const __m512 v = _mm512_set1_ps(xt[p * step]);
      acc[p][0] = _mm512_fmadd_ps(v, w0, acc[p][0]);
      acc[p][1] = _mm512_fmadd_ps(v, w1, acc[p][1]);
    }
  }
  if (bias) {
    const __m512 b0 = _mm512_loadu_ps(bias), b1 = _mm512_loadu_ps(bias + 16);
#pragma GCC unroll 6
    for (std::int64_t p = 0; p < PX; ++p) {
      acc[p][0] = _mm512_add_ps(acc[p][0], b0);
      acc[p][1] = _mm512_add_ps(acc[p][1], b1);
    }
  }
  if (relu) {
    const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 6
    for (std::int64_t p = 0; p < PX; ++p) {
      acc[p][0] = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(zero, acc[p][0], _CMP_LT_OQ), acc[p][0]);
      acc[p][1] = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(zero, acc[p][1], _CMP_LT_OQ), acc[p][1]);
    }
  }
#pragma GCC unroll 6
  for (std::int64_t p = 0; p < PX; ++p) {
    _mm512_storeu_ps(y + p * ldy, acc[p][0]);
    _mm512_storeu_ps(y + p * ldy + 16, acc[p][1]);
  }
}

// Filter gradient: kDirectTaps taps (offsets off) x 32 channels of one output row's dy (d_row, row
// stride fp) summed over its wo pixels from 0, then added to part (row stride fp) for the first nq taps.
TAPEFLOW_AVX512 void direct_filter_block_512(const float* panel, std::int64_t step, const std::int64_t* off,
                                             std::int64_t wo, const float* d_row, std::int64_t fp, float* part,
                                             std::int64_t nq) {
  constexpr std::int64_t TB = kDirectTaps;
  __m512 acc[TB][2];
#pragma GCC unroll 6
  for (std::int64_t q = 0; q < TB; ++q) acc[q][0] = acc[q][1] = _mm512_setzero_ps();
  for (std::int64_t ow = 0; ow < wo; ++ow) {
    const float* xp = panel + ow * step;
    const __m512 d0 = _mm512_loadu_ps(d_row + ow * fp), d1 = _mm512_loadu_ps(d_row + ow * fp + 16);
#pragma GCC unroll 6
    for (std::int64_t q = 0; q < TB; ++q) {
      const __m512 v = _mm512_set1_ps(xp[off[q]]);
      acc[q][0] = _mm512_fmadd_ps(v, d0, acc[q][0]);
      acc[q][1] = _mm512_fmadd_ps(v, d1, acc[q][1]);
    }
  }
#pragma GCC unroll 6
  for (std::int64_t q = 0; q < TB; ++q) {
    if (q >= nq) continue;
    float* out = part + q * fp;
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), acc[q][0]));
    _mm512_storeu_ps(out + 16, _mm512_add_ps(_mm512_loadu_ps(out + 16), acc[q][1]));
  }
}
#endif

// The direct forward kernel, one output row at a time (conv2d_direct, and conv2d_max_pool2d's
// fused path, which pools pairs of rows while they are in cache).
template <class T>
class DirectConv {
 public:
  using P = typename ei::packet_traits<T>::type;
  static constexpr std::int64_t L = ei::packet_traits<T>::size, FB = 2 * L, PX = kDirectPixels;

  DirectConv(const T* x, const T* filter, const Conv2DGeometry& g)
      : x_(x), g_(g), k_(g.patch_size()), fp_(round_up(g.f, FB)),
        width_((round_up(g.wo, PX) - 1) * g.sw + (g.kw - 1) * g.dw + 1), fpad_(pad_columns(filter, k_, g.f, fp_)),
        tap_offset_(panel_tap_offsets(g, width_, k_)), wide_(internal::avx512_tiles<T>()) {}
  // Scratch one thread passes to row().
  std::vector<T> panel() const { return std::vector<T>(static_cast<std::size_t>(g_.kh * width_ * g_.c)); }
  // Output rows per task of a parallel sweep (~64k multiply-adds).
  std::int64_t grain() const {
    return std::max<std::int64_t>(1, (1 << 16) / std::max<std::int64_t>(g_.wo * k_ * g_.f, 1));
  }
  // Output row r (image r / ho, row r % ho) into y_row [wo, f], then the epilogue.
  void row(std::int64_t r, T* y_row, std::vector<T>& panel, const ConvEpilogue<T>& epilogue) const {
    const Conv2DGeometry& g = g_;
    const std::int64_t step = g.sw * g.c;  // panel values between neighbouring pixels
    T tail[PX * FB];
    // Floats whose channels are all in wide blocks (F a multiple of 32): the epilogue is applied
    // in the blocks, in registers, instead of in a pass over the row.
    const bool fused = wide_ && g.f % kWide == 0;
    fill_panel(x_, g, r / g.ho, r % g.ho, width_, panel.data());
    for (std::int64_t ow0 = 0; ow0 < g.wo; ow0 += PX)
      for (std::int64_t f0 = 0; f0 < fp_; f0 += FB) {
#if TAPEFLOW_HAVE_AVX512_KERNELS
        if constexpr (std::is_same_v<T, float>)
          if (wide_ && f0 + kWide <= fp_) {
            const std::int64_t np = std::min(PX, g.wo - ow0);
            const float* x0 = panel.data() + ow0 * step;
            const float* bias = fused && epilogue.bias ? epilogue.bias + f0 : nullptr;
            const bool relu = fused && epilogue.relu;
            if (np == PX && f0 + kWide <= g.f) {
              direct_block_512(x0, step, tap_offset_.data(), k_, fpad_.data() + f0, fp_, y_row + ow0 * g.f + f0, g.f,
                               bias, relu);
            } else {
              float wide_tail[PX * kWide];
              direct_block_512(x0, step, tap_offset_.data(), k_, fpad_.data() + f0, fp_, wide_tail, kWide, bias, relu);
              const std::int64_t nf = std::min(kWide, g.f - f0);
              for (std::int64_t p = 0; p < np; ++p)
                std::copy_n(wide_tail + p * kWide, nf, y_row + (ow0 + p) * g.f + f0);
            }
            f0 += kWide - FB;  // the loop adds the other FB
            continue;
          }
#endif
        P acc[PX][2];
#pragma GCC unroll 6
        for (std::int64_t p = 0; p < PX; ++p) acc[p][0] = acc[p][1] = ei::pset1<P>(T(0));
        const T* x0 = panel.data() + ow0 * step;
        const T* fq = fpad_.data() + f0;
        for (std::int64_t t = 0; t < k_; ++t, fq += fp_) {
          const T* xt = x0 + tap_offset_[static_cast<std::size_t>(t)];
          P w0 = ei::ploadu<P>(fq), w1 = ei::ploadu<P>(fq + L);
          pin(w0, w1);
#pragma GCC unroll 6
          for (std::int64_t p = 0; p < PX; ++p) {
            const P v = ei::pset1<P>(xt[p * step]);
            acc[p][0] = ei::pmadd(v, w0, acc[p][0]);
            acc[p][1] = ei::pmadd(v, w1, acc[p][1]);
          }
        }
        const std::int64_t np = std::min(PX, g.wo - ow0), nf = std::min(FB, g.f - f0);
        if (np == PX && nf == FB) {
#pragma GCC unroll 6
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
    if (!fused) apply_epilogue(y_row, g.wo, g.f, epilogue);
  }

 private:
  const T* x_;
  const Conv2DGeometry& g_;
  std::int64_t k_, fp_, width_;
  std::vector<T> fpad_;
  std::vector<std::int64_t> tap_offset_;
  bool wide_;  // floats: 32-channel AVX-512 blocks (direct_block_512)
};

template <class T>
void conv2d_direct(const T* x, const T* filter, T* y, const Conv2DGeometry& g, const ConvEpilogue<T>& epilogue) {
  const DirectConv<T> conv(x, filter, g);
  parallel_for(g.n * g.ho, conv.grain(), [&](std::int64_t b, std::int64_t e) {
    std::vector<T> panel = conv.panel();
    for (std::int64_t r = b; r < e; ++r) conv.row(r, y + r * g.wo * g.f, panel, epilogue);
  });
}

// Output rows per fixed tile of the direct filter gradient (one task runs a tile's rows in order).
std::int64_t direct_filter_rows_per_tile(const Conv2DGeometry& g) {
  return std::max<std::int64_t>(1, (g.n * g.ho + kDirectFilterTiles - 1) / kDirectFilterTiles);
}

// dfilter[i, j, c, :] = sum over output pixels of x at tap (i, j, c) times dy[pixel, :]. Output
// rows in kDirectFilterTiles fixed tiles; per row, register blocks of kDirectTaps taps x 2
// packets of channels run along the row, then add into the tile's partial. Adds into dfilter
// (zeroed by the caller). dy_rows() makes, per task, a callable that gives output row r of dy
// ([wo, f] values): a pointer into dy, or into a buffer of its own that it fills; it is called
// once per row, a tile's rows in order.
template <class T, class DyRows>
void conv2d_backprop_filter_direct(const T* x, DyRows&& dy_rows, T* dfilter, const Conv2DGeometry& g) {
  using P = typename ei::packet_traits<T>::type;
  constexpr std::int64_t L = ei::packet_traits<T>::size, FB = 2 * L, TB = kDirectTaps;
  const std::int64_t k = g.patch_size(), fp = round_up(g.f, FB), kfp = k * fp;
  const std::int64_t width = (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1, step = g.sw * g.c;
  const std::int64_t rows = g.n * g.ho, per_tile = direct_filter_rows_per_tile(g);
  const std::int64_t tiles = (rows + per_tile - 1) / per_tile;
  // Taps past k read offset 0 and are dropped.
  const std::vector<std::int64_t> tap_offset = panel_tap_offsets(g, width, round_up(k, TB));
  std::vector<T> partial(static_cast<std::size_t>(tiles * kfp), T(0));
  [[maybe_unused]] const bool wide = internal::avx512_tiles<T>();  // 32-channel blocks (direct_filter_block_512)
  parallel_for(tiles, 1, [&](std::int64_t b, std::int64_t e) {
    std::vector<T> panel(static_cast<std::size_t>(g.kh * width * g.c));
    std::vector<T> dy_pad(g.f == fp ? 0 : static_cast<std::size_t>(g.wo * fp), T(0));
    auto dy_row = dy_rows();
    for (std::int64_t t = b; t < e; ++t) {
      T* part = partial.data() + t * kfp;
      for (std::int64_t r = t * per_tile; r < std::min(rows, (t + 1) * per_tile); ++r) {
        fill_panel(x, g, r / g.ho, r % g.ho, width, panel.data());
        const T* d_row = dy_row(r);
        if (g.f != fp) {  // channels padded with zeros to whole blocks
          copy_padded_rows(d_row, g.wo, g.f, fp, dy_pad.data());
          d_row = dy_pad.data();
        }
        for (std::int64_t f0 = 0; f0 < fp; f0 += FB) {
#if TAPEFLOW_HAVE_AVX512_KERNELS
          if constexpr (std::is_same_v<T, float>)
            if (wide && f0 + kWide <= fp) {
              for (std::int64_t t0 = 0; t0 < k; t0 += TB)
                direct_filter_block_512(panel.data(), step, tap_offset.data() + t0, g.wo, d_row + f0, fp,
                                        part + t0 * fp + f0, std::min(TB, k - t0));
              f0 += kWide - FB;  // the loop adds the other FB
              continue;
            }
#endif
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

// ---- Indirect GEMM (XNNPACK's indirection-buffer scheme) for more than kDirectMaxChannels channels ----
// A convolution is a GEMM whose A rows are gathered: row p, step s (a filter tap that reaches
// pixel p) is C contiguous values at a pointer into x. Tiles of kIgemmMR rows x 2 packets keep 12
// accumulators in registers over all the taps (on AVX-512, two row tiles x 32 columns at once:
// 24), read A straight from x through a table of pointers built per task (no im2col copy, no A
// packing) and B from panels packed once per call.

constexpr std::int64_t kIgemmMR = 6;
// Bytes of one B micro-panel (K rows x 2 packets) that should stay in L1 while the row tiles of a
// task stream past it: taps are grouped so that a group's K rows fit.
constexpr std::int64_t kIgemmPanelBytes = 24 * 1024;
// Output rows per work item: its pointer table stays under kIgemmChunkRows x taps pointers (about
// 19 KB for a 3x3 filter, 52 KB for 5x5) whatever the image size, and one image splits into
// several items.
constexpr std::int64_t kIgemmChunkRows = 264;

// B [k, n] (b(r, j)) packed into panels of 2 packets of columns: panel jp holds rows 0..k-1 of
// columns [jp*NB, jp*NB + NB), zeros past n, at jp * k * NB.
template <class T, class B>
std::vector<T> pack_panels(std::int64_t k, std::int64_t n, B b) {
  constexpr std::int64_t NB = 2 * ei::packet_traits<T>::size;
  const std::int64_t panels = (n + NB - 1) / NB;
  std::vector<T> out(static_cast<std::size_t>(panels * k * NB), T(0));
  for (std::int64_t jp = 0; jp < panels; ++jp)
    for (std::int64_t r = 0; r < k; ++r)
      for (std::int64_t j = jp * NB; j < std::min(n, jp * NB + NB); ++j)
        out[static_cast<std::size_t>((jp * k + r) * NB + j - jp * NB)] = b(r, j);
  return out;
}

// Tile [MR, NB] whose row q starts at c[q] = (accumulate ? tile : 0) + sum over steps s and
// p < klen of a[s*MR + q][p] * bp[boff[s] + p*NB + :]: one FMA chain per element, steps and p
// ascending.
template <class T>
void igemm_tile(std::int64_t steps, const T* const* a, const std::int64_t* boff, std::int64_t klen, const T* bp,
                T* const* c, bool accumulate) {
  using P = typename ei::packet_traits<T>::type;
  constexpr std::int64_t L = ei::packet_traits<T>::size, MR = kIgemmMR;
  P acc[MR][2];
  if (accumulate) {
#pragma GCC unroll 6
    for (std::int64_t q = 0; q < MR; ++q) {
      acc[q][0] = ei::ploadu<P>(c[q]);
      acc[q][1] = ei::ploadu<P>(c[q] + L);
    }
  } else {
#pragma GCC unroll 6
    for (std::int64_t q = 0; q < MR; ++q) {
      acc[q][0] = acc[q][1] = ei::pset1<P>(T(0));
      // The tile is written at the end: fetch its lines while the loop runs (as the GEMM does).
      __builtin_prefetch(c[q], 1);
      __builtin_prefetch(c[q] + 2 * L - 1, 1);
    }
  }
  for (std::int64_t s = 0; s < steps; ++s, a += MR) {
    const T *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    const T* b = bp + boff[s];
#pragma GCC unroll 4
    for (std::int64_t p = 0; p < klen; ++p, b += 2 * L) {
      const P b0 = ei::ploadu<P>(b), b1 = ei::ploadu<P>(b + L);
      P v;
      v = ei::pset1<P>(a0[p]); acc[0][0] = ei::pmadd(v, b0, acc[0][0]); acc[0][1] = ei::pmadd(v, b1, acc[0][1]);
      v = ei::pset1<P>(a1[p]); acc[1][0] = ei::pmadd(v, b0, acc[1][0]); acc[1][1] = ei::pmadd(v, b1, acc[1][1]);
      v = ei::pset1<P>(a2[p]); acc[2][0] = ei::pmadd(v, b0, acc[2][0]); acc[2][1] = ei::pmadd(v, b1, acc[2][1]);
      v = ei::pset1<P>(a3[p]); acc[3][0] = ei::pmadd(v, b0, acc[3][0]); acc[3][1] = ei::pmadd(v, b1, acc[3][1]);
      v = ei::pset1<P>(a4[p]); acc[4][0] = ei::pmadd(v, b0, acc[4][0]); acc[4][1] = ei::pmadd(v, b1, acc[4][1]);
      v = ei::pset1<P>(a5[p]); acc[5][0] = ei::pmadd(v, b0, acc[5][0]); acc[5][1] = ei::pmadd(v, b1, acc[5][1]);
    }
  }
#pragma GCC unroll 6
  for (std::int64_t q = 0; q < MR; ++q) {
    ei::pstoreu(c[q], acc[q][0]);
    ei::pstoreu(c[q] + L, acc[q][1]);
  }
}

#if TAPEFLOW_HAVE_AVX512_KERNELS
// igemm_tile for floats over two adjacent B panels (bp and bq, 32 columns: c[q] .. c[q] + 32), in
// zmm registers: per element the same FMA chain as igemm_tile's, so the same bits (simd512.h).
// TILES consecutive row tiles (TILES * kIgemmMR rows, tile u's pointers at a + u * a_stride) share
// each pair of B loads: 12 rows x 32 columns keep 24 zmm accumulators.
template <int TILES>
TAPEFLOW_AVX512 void igemm_tile_512_rows(std::int64_t steps, const float* const* a, std::int64_t a_stride,
                                         const std::int64_t* boff, std::int64_t klen, const float* bp, const float* bq,
                                         float* const* c, bool accumulate) {
  constexpr std::int64_t MR = kIgemmMR * TILES, NB = 16;
  __m512 acc[MR][2];
  if (accumulate) {
#pragma GCC unroll 12
    for (std::int64_t q = 0; q < MR; ++q) {
      acc[q][0] = _mm512_loadu_ps(c[q]);
      acc[q][1] = _mm512_loadu_ps(c[q] + NB);
    }
  } else {
#pragma GCC unroll 12
    for (std::int64_t q = 0; q < MR; ++q) {
      acc[q][0] = acc[q][1] = _mm512_setzero_ps();
      __builtin_prefetch(c[q], 1);
      __builtin_prefetch(c[q] + 2 * NB - 1, 1);
    }
  }
  for (std::int64_t s = 0; s < steps; ++s, a += kIgemmMR) {
    const float* rows[MR];
#pragma GCC unroll 12
    for (std::int64_t q = 0; q < MR; ++q) rows[q] = a[q / kIgemmMR * a_stride + q % kIgemmMR];
    const float* b = bp + boff[s];
    const float* d = bq + boff[s];
#pragma GCC unroll 2
    for (std::int64_t p = 0; p < klen; ++p, b += NB, d += NB) {
      const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(d);
#pragma GCC unroll 12
      for (std::int64_t q = 0; q < MR; ++q) {
        const __m512 v = _mm512_set1_ps(rows[q][p]);
        acc[q][0] = _mm512_fmadd_ps(v, b0, acc[q][0]);
        acc[q][1] = _mm512_fmadd_ps(v, b1, acc[q][1]);
      }
    }
  }
#pragma GCC unroll 12
  for (std::int64_t q = 0; q < MR; ++q) {
    _mm512_storeu_ps(c[q], acc[q][0]);
    _mm512_storeu_ps(c[q] + NB, acc[q][1]);
  }
}
TAPEFLOW_AVX512 void igemm_tile_512(std::int64_t steps, const float* const* a, const std::int64_t* boff,
                                    std::int64_t klen, const float* bp, const float* bq, float* const* c,
                                    bool accumulate) {
  igemm_tile_512_rows<1>(steps, a, 0, boff, klen, bp, bq, c, accumulate);
}
#endif

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
  alignas(64) T tmp[MR * NB];
  T* crow[MR];
  // Floats on AVX-512: row tiles over two full panels at once (simd512.h).
  const bool wide = internal::avx512_tiles<T>();
  for (std::int64_t s0 = 0; s0 < steps; s0 += group) {
    const std::int64_t ns = std::min(group, steps - s0);
    const bool acc = s0 > 0;
    for (std::int64_t jp = 0; jp < panels; ++jp) {
      const T* bp = packed + jp * k_panel * NB;
      const std::int64_t j0 = jp * NB, nc = std::min(NB, n - j0);
      const bool pair = wide && n - j0 >= 2 * NB;
      for (std::int64_t r0 = 0; r0 < rows; r0 += MR) {
        const T* const* a = ind + (r0 / MR * steps + s0) * MR;
        const std::int64_t nr = std::min(MR, rows - r0);
#if TAPEFLOW_HAVE_AVX512_KERNELS
        if constexpr (std::is_same_v<T, float>)
          if (pair) {
            if (rows - r0 >= 2 * MR) {  // two full row tiles at once
              T* crow2[2 * MR];
              for (std::int64_t q = 0; q < 2 * MR; ++q) crow2[q] = out[r0 + q] + j0;
              igemm_tile_512_rows<2>(ns, a, steps * MR, boff + s0, klen, bp, bp + k_panel * NB, crow2, acc);
              r0 += MR;  // the loop adds the other MR
              continue;
            }
            if (nr == MR) {
              for (std::int64_t q = 0; q < MR; ++q) crow[q] = out[r0 + q] + j0;
              igemm_tile_512(ns, a, boff + s0, klen, bp, bp + k_panel * NB, crow, acc);
              continue;
            }
            // A short last row tile (border classes): through a tile on the stack.
            alignas(64) float wide_tmp[MR * 2 * NB];
            for (std::int64_t q = 0; q < MR; ++q) crow[q] = wide_tmp + q * 2 * NB;
            if (acc)
              for (std::int64_t q = 0; q < nr; ++q) std::copy_n(out[r0 + q] + j0, 2 * NB, wide_tmp + q * 2 * NB);
            igemm_tile_512(ns, a, boff + s0, klen, bp, bp + k_panel * NB, crow, acc);
            for (std::int64_t q = 0; q < nr; ++q) std::copy_n(wide_tmp + q * 2 * NB, 2 * NB, out[r0 + q] + j0);
            continue;
          }
#endif
        if (nr == MR && nc == NB) {
          for (std::int64_t q = 0; q < MR; ++q) crow[q] = out[r0 + q] + j0;
          igemm_tile(ns, a, boff + s0, klen, bp, crow, acc);
          continue;
        }
        for (std::int64_t q = 0; q < MR; ++q) crow[q] = tmp + q * NB;
        if (acc)
          for (std::int64_t q = 0; q < nr; ++q) std::copy_n(out[r0 + q] + j0, nc, tmp + q * NB);
        igemm_tile(ns, a, boff + s0, klen, bp, crow, acc);
        for (std::int64_t q = 0; q < nr; ++q) std::copy_n(tmp + q * NB, nc, out[r0 + q] + j0);
      }
      if (pair) ++jp;  // its second panel is done
    }
  }
}

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
inline LineClasses line_classes(const std::vector<TapLine>& per_line, std::int64_t limit) {
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
struct NeededLines {
  std::int64_t h = std::numeric_limits<std::int64_t>::max(), w = std::numeric_limits<std::int64_t>::max();
};
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

// y [N, Ho, Wo, F] = conv2d(x, filter): A row = an output pixel, step = a filter tap inside the
// image (C values of x), B = the filter as [taps * C, F].
template <class T>
void conv2d_igemm(const T* x, const T* filter, T* y, const Conv2DGeometry& g, const ConvEpilogue<T>& epilogue,
                  NeededLines need = {}) {
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
  conv2d_igemm(x, filter, y, g, epilogue);
}

template <class T>
void conv2d_backprop_input(const T* filter, const T* dy, T* dx, const Conv2DGeometry& g) {
  const std::int64_t rows = g.out_pixels(), k = g.patch_size();
  if (rows == 0 || g.f == 0) {
    std::fill(dx, dx + g.n * g.h * g.w * g.c, T(0));
    return;
  }
  if (pointwise(g)) {
    matmul(dy, filter, dx, 1, rows, g.f, k, false, true, 0, 0);
    return;
  }
  if (g.c >= kIgemmMinOutChannels) {
    conv2d_backprop_input_igemm(filter, dy, dx, g);
    return;
  }
  // Few input channels (an image): the indirect GEMM would fill a 2-packet tile with g.c columns.
  // Here dpatch = dy @ filterᵀ ([R, F] x [F, kh*kw*C], wide enough for the GEMM), folded back
  // (col2im). Tiles never straddle images, so images (which own disjoint parts of dx) run in
  // parallel.
  std::fill(dx, dx + g.n * g.h * g.w * g.c, T(0));
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

// Rows of one im2col tile of the filter gradient: within kConvGradTileBytes, and at least
// kFilterWave tiles (from the shape alone), so few-channel layers still split across threads.
template <class T>
std::int64_t filter_tile_rows(const Conv2DGeometry& g) {
  return std::max<std::int64_t>(
      std::min(tile_rows<T>(g, kConvGradTileBytes), (g.out_pixels() + kFilterWave - 1) / kFilterWave), 6);
}

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

#if TAPEFLOW_GEMM_AVX2
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

#if TAPEFLOW_HAVE_AVX512_KERNELS
// Rows of dfilterᵀ per tile of the in-place filter gradient: 28 zmm accumulators (31 registers in
// all), each pair of x loads (from L2) feeding 28 FMAs (6-row tiles: W9 convT1's filter gradient
// 57-63 ms, 12: 49-54; W8 conv2's tiles of 14, 14, 14, 11, 11 rows against 12 x 5 + 4: 6% less
// time in the tiles).
constexpr std::int64_t kFilterInPlaceRows = 14;
// Pixels ahead that filter_tile_512 prefetches (24 measured best of 8-32 on W9's convT1).
constexpr std::int64_t kFilterInPlacePrefetch = 24;

// Row tiles of filter_tile_512 over `rows` rows: kFilterInPlaceRows each, the last two splitting the
// rest evenly (no short last tile). Tile t starts at row filter_tile_begin(rows, t), t <= tiles.
constexpr std::int64_t filter_tiles(std::int64_t rows) { return (rows + kFilterInPlaceRows - 1) / kFilterInPlaceRows; }
constexpr std::int64_t filter_tile_begin(std::int64_t rows, std::int64_t t) {
  const std::int64_t tiles = filter_tiles(rows), full = tiles >= 2 ? tiles - 2 : 0;
  const std::int64_t last = tiles >= 2 ? (rows - full * kFilterInPlaceRows + 1) / 2 : rows;
  return t <= full ? t * kFilterInPlaceRows : std::min(rows, full * kFilterInPlaceRows + (t - full) * last);
}
static_assert(filter_tile_begin(64, 4) == 53 && filter_tile_begin(64, 5) == 64 && filter_tile_begin(14, 1) == 14);

// The filter gradient's tile on AVX-512 with both operands read in place: rows f0.. f0 + R of
// dfilterᵀ (dy's channels, broadcast from dy row dp[p] + f0) by 32 columns (one tap's 32 input
// channels: x at xp[p], or zeros where the tap lies in the padding), summed over the np pixels of
// one run as one FMA chain per element from 0, then stored to out (row stride ldo) or, for a later
// run, added to it: conv2d_backprop_filter_packed's GEMM arithmetic, the same bits, with no patch
// or dy packing.
template <int R>
TAPEFLOW_AVX512 void filter_tile_512(std::int64_t np, const float* const* xp, const float* const* dp,
                                     std::int64_t f0, float* out, std::int64_t ldo, bool add) {
  __m512 acc[R][2];
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  // The pixels' x and dy lines are fetched kFilterInPlacePrefetch pixels ahead: the hardware
  // prefetchers miss the dy lines of wide layers (W9 convT1, 1 KB rows: its filter gradient
  // 40-42 -> 33 ms at 2T; W8 unchanged).
  constexpr std::int64_t pf = kFilterInPlacePrefetch;
#pragma GCC unroll 2
  for (std::int64_t p = 0; p < np; ++p) {
    if (p + pf < np) {
      _mm_prefetch(reinterpret_cast<const char*>(xp[p + pf]), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(xp[p + pf] + 16), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(dp[p + pf] + f0), _MM_HINT_T0);
    }
    const __m512 b0 = _mm512_loadu_ps(xp[p]), b1 = _mm512_loadu_ps(xp[p] + 16);
    const float* d = dp[p] + f0;
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i) {
      const __m512 v = _mm512_set1_ps(d[i]);
      acc[i][0] = _mm512_fmadd_ps(v, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(v, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) {
    float* o = out + i * ldo;
    if (add) {
      _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), acc[i][0]));
      _mm512_storeu_ps(o + 16, _mm512_add_ps(_mm512_loadu_ps(o + 16), acc[i][1]));
    } else {
      _mm512_storeu_ps(o, acc[i][0]);
      _mm512_storeu_ps(o + 16, acc[i][1]);
    }
  }
}

TAPEFLOW_AVX512 void filter_tile_512_rows(std::int64_t rows, std::int64_t np, const float* const* xp,
                                          const float* const* dp, std::int64_t f0, float* out, std::int64_t ldo,
                                          bool add) {
  switch (rows) {
    case 14: return filter_tile_512<14>(np, xp, dp, f0, out, ldo, add);
    case 13: return filter_tile_512<13>(np, xp, dp, f0, out, ldo, add);
    case 12: return filter_tile_512<12>(np, xp, dp, f0, out, ldo, add);
    case 11: return filter_tile_512<11>(np, xp, dp, f0, out, ldo, add);
    case 10: return filter_tile_512<10>(np, xp, dp, f0, out, ldo, add);
    case 9: return filter_tile_512<9>(np, xp, dp, f0, out, ldo, add);
    case 8: return filter_tile_512<8>(np, xp, dp, f0, out, ldo, add);
    case 7: return filter_tile_512<7>(np, xp, dp, f0, out, ldo, add);
    case 6: return filter_tile_512<6>(np, xp, dp, f0, out, ldo, add);
    case 5: return filter_tile_512<5>(np, xp, dp, f0, out, ldo, add);
    case 4: return filter_tile_512<4>(np, xp, dp, f0, out, ldo, add);
    case 3: return filter_tile_512<3>(np, xp, dp, f0, out, ldo, add);
    case 2: return filter_tile_512<2>(np, xp, dp, f0, out, ldo, add);
    default: return filter_tile_512<1>(np, xp, dp, f0, out, ldo, add);
  }
}
#endif

// Whether conv2d_backprop_filter_packed takes g: whole B panels per tap and at least one full row
// tile of dfilterᵀ.
template <class T>
bool filter_packed(const Conv2DGeometry& g) {
  return g.c % internal::kGemmNR<T> == 0 && g.f >= internal::kGemmMR;
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

// The output rows and columns of dy the filter gradient reads: nonzero_extent's, or all of them
// when x holds an inf or NaN that the dropped pixels read (0 * inf must still give NaN).
template <class T>
std::pair<std::int64_t, std::int64_t> filter_kept_extent(const T* x, const T* dy, const Conv2DGeometry& g) {
  const auto [keep_h, keep_w] = nonzero_extent(dy, g);
  if ((keep_h < g.ho || keep_w < g.wo) && !finite_from(x, g, keep_h * g.sh - g.pad_top, keep_w * g.sw - g.pad_left))
    return {g.ho, g.wo};
  return {keep_h, keep_w};
}

// ---- The filter gradient by Winograd F(3x3, 2x2) (Lavin & Gray 2016) ----
// dfilter[i, j] = sum over output pixels of x at (p + i, q + j) times dy at (p, q): over each 2x2
// block of dy (pixels 2ty.., 2tx..) that is a 3x3 correlation of the 4x4 block of x under it with
// the 2x2 block of dy, F(3, 2) in each direction. Per block V = Bᵀ x B (per channel c) and
// W = G dy Gᵀ (per channel f); S_k = sum over blocks of V_k W_kᵀ (16 products [C, blocks] x
// [blocks, F]: 16 FMAs per block and (c, f) where the direct sum takes 36); then dfilter = Aᵀ S A
// per (c, f). Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 -1 0 1], G = [1 0; .5 .5; .5 -.5; 0 1],
// Aᵀ = [1 1 1 0; 0 1 -1 0; 0 1 1 1].
// The blocks run in fixed units of whole images; per unit and k one FMA chain per element of S_k
// from 0 (filter_tile_512 on AVX-512, gemm_avx2 otherwise: the same chain), added in unit order
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
                filter_tile_512_rows(filter_tile_begin(C, t + 1) - c0, blocks, wp.data(), vp.data(), c0, sk + c0 * F + col,
                                     F, !first);
              }
            }
            continue;
          }
#endif
        internal::gemm_avx2<T>(C, F, blocks, vq, C, true, wq, F, false, first ? sk : part, F);
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
      // Same runs, same chains as the GEMM below, both operands read in place (filter_tile_512).
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
              filter_tile_512_rows(tile_begin(tile + 1) - f0, kr, xp.data(), dp.data() + k0, f0, t.get() + f0 * k + col,
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
            internal::gemm_avx2<T>(g.f, n, kr, dy, g.f, kept_rows.data() + k0, pack_patches<T>, &src, out, ldc);
          else
            internal::gemm_avx2<T>(g.f, n, kr, dy + k0 * g.f, g.f, true, pack_patches<T>, &src, out, ldc);
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
#endif

}  // namespace

template <class T>
void conv2d_backprop_filter(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g) {
  const std::int64_t rows = g.out_pixels(), k = g.patch_size(), kf = k * g.f;
  const bool pw = pointwise(g);
#if TAPEFLOW_GEMM_AVX2
  if constexpr (std::is_same_v<T, float>)
    if (rows > 0 && winograd_filter<T>(g)) {
      const auto [kh, kw] = filter_kept_extent(x, dy, g);
      if (kh % 2 == 0 && kw % 2 == 0 && kh > 0 && kw > 0 && conv2d_backprop_filter_winograd(x, dy, dfilter, g, kh, kw))
        return;
    }
  // Writes every element (C >= 16 here, so never the direct case): no zeroing first.
  if (rows > 0 && !pw && filter_packed<T>(g)) {
    conv2d_backprop_filter_packed(x, dy, dfilter, g);
    return;
  }
#endif
  std::fill(dfilter, dfilter + kf, T(0));
  if (rows == 0 || kf == 0) return;
  if (direct(g)) {
    conv2d_backprop_filter_direct(
        x, [&] { return [&](std::int64_t r) { return dy + r * g.wo * g.f; }; }, dfilter, g);
    return;
  }
  const std::int64_t r = filter_tile_rows<T>(g);
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

// Disjoint 2x2 windows (2x2 stride 2, no padding): the usual CNN pool. Its kernels below fix the
// four taps (no offset table, no tap loop): W8's pool gradient ran at 8 GB/s on one thread through
// the general kernel, under the memory's 11 GB/s.
bool pool_2x2(const Conv2DGeometry& g) {
  return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.pad_top == 0 && g.pad_left == 0 && g.ho == g.h / 2 &&
         g.wo == g.w / 2;
}

// f(n, oh, r0, r1, out) for pooled rows [b, e) of the batch (n * ho rows): the image and row, the
// two input rows of its windows (pointers into the [N, H, W, C] tensor `base`; window ow starts at
// offset 2 * ow * C of each) and the offset of the pooled row in the [N, Ho, Wo, C] output.
template <class T, class F>
void for_pool_2x2_rows(const Conv2DGeometry& g, std::int64_t b, std::int64_t e, T* base, F&& f) {
  for (std::int64_t r = b; r < e; ++r) {
    const std::int64_t n = r / g.ho, oh = r % g.ho;
    T* r0 = base + (n * g.h + 2 * oh) * g.w * g.c;
    f(n, oh, r0, r0 + g.w * g.c, r * g.wo * g.c);
  }
}

// Rows of pooled output per task (~32k input elements).
std::int64_t pool_row_grain(const Conv2DGeometry& g) {
  return std::max<std::int64_t>(1, (1 << 15) / std::max<std::int64_t>(4 * g.wo * g.c, 1));
}

// Per channel of one 2x2 window (taps a, b, c, d in window order): the maximum and the masks of
// the first position holding it (strict <, as WindowMax: NaN never replaces, ties keep the first).
template <class T>
struct Max2x2 {
  using P = typename ei::packet_traits<T>::type;
  P best, m1, m2, m3;  // m_t: the maximum moved to tap t (later taps override earlier ones)
  Max2x2(P a, P b, P c, P d) {
    m1 = ei::pcmp_lt(a, b);
    best = ei::pselect(m1, b, a);
    m2 = ei::pcmp_lt(best, c);
    best = ei::pselect(m2, c, best);
    m3 = ei::pcmp_lt(best, d);
    best = ei::pselect(m3, d, best);
  }
  // v at the argmax, 0 at the other three taps.
  void scatter(P v, P& at0, P& at1, P& at2, P& at3) const {
    at3 = ei::pand(m3, v);
    const P before3 = ei::pandnot(v, m3);  // v where the maximum is not at tap 3
    at2 = ei::pand(m2, before3);
    const P before2 = ei::pandnot(before3, m2);
    at1 = ei::pand(m1, before2);
    at0 = ei::pandnot(before2, m1);
  }
};

// Whether the windows tile the input exactly (each element in exactly one window).
bool windows_tile_input(const Conv2DGeometry& g) {
  return g.sh == g.kh && g.sw == g.kw && g.pad_top == 0 && g.pad_left == 0 && g.ho * g.kh == g.h &&
         g.wo * g.kw == g.w;
}

// One 2x2 window of the pool gradient's sweep: its tap 0 as an offset into the [N, H, W, C] tensor
// (`at`) and within its image (`in_image`), the offset of its second row (`below`, one image row
// further) and of its pooled element in the [N, Ho, Wo, C] tensor (`pooled`), all at channel 0.
struct Window2x2 {
  std::int64_t at, in_image, below, pooled;
};

// One pooled row of the 2x2 pool gradient's sweep (pool_2x2): image n, pooled row oh; o0 and o1
// receive the dx values of its two input rows (g.w x C each; past 2 * wo, zeros). masks(window, c,
// dy packet, &t0..&t3) fills the packets of channels [c, c + L); tap(window, c) is the argmax tap
// (0-3, window order) of one channel, for the channels past the last whole packet. The window
// offsets (Window2x2) are those of dx; o0, o1 may point elsewhere (a row buffer).
template <class T, class Masks, class Tap>
void scatter_2x2_row(const T* dy, const Conv2DGeometry& g, std::int64_t n, std::int64_t oh, T* o0, T* o1, bool stream,
                     Masks&& masks, Tap&& tap) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  const std::int64_t image = g.h * g.w * g.c, C = g.c;
  const std::int64_t row0 = (n * g.h + 2 * oh) * g.w * C, out = (n * g.ho + oh) * g.wo * C;
  for (std::int64_t ow = 0; ow < g.wo; ++ow) {
    const std::int64_t q = 2 * ow * C;
    const Window2x2 w{row0 + q, row0 - n * image + q, row0 + g.w * C + q, out + ow * C};
    const T* d = dy + w.pooled;
    std::int64_t c = 0;
    for (; c + L <= C; c += L) {
      P t0, t1, t2, t3;
      masks(w, c, ei::ploadu<P>(d + c), t0, t1, t2, t3);
      if (stream) {
        stream_packet(o0 + q + c, t0);
        stream_packet(o0 + q + C + c, t1);
        stream_packet(o1 + q + c, t2);
        stream_packet(o1 + q + C + c, t3);
        continue;
      }
      ei::pstoreu(o0 + q + c, t0);
      ei::pstoreu(o0 + q + C + c, t1);
      ei::pstoreu(o1 + q + c, t2);
      ei::pstoreu(o1 + q + C + c, t3);
    }
    for (; c < C; ++c) {
      const int at = tap(w, c);
      T* dst[4] = {o0 + q + c, o0 + q + C + c, o1 + q + c, o1 + q + C + c};
      for (int t = 0; t < 4; ++t) *dst[t] = t == at ? d[c] : T(0);
    }
  }
  // An odd width leaves the last column outside every window.
  if (g.w % 2) {
    std::fill(o0 + 2 * g.wo * C, o0 + g.w * C, T(0));
    std::fill(o1 + 2 * g.wo * C, o1 + g.w * C, T(0));
  }
}

// The 2x2 pool gradient's sweep (pool_2x2) over all of dx: scatter_2x2_row per pooled row.
// Outputs of kConvStreamBytes or more are written with streaming stores.
template <class T, class Masks, class Tap>
void scatter_2x2(const T* dy, T* dx, const Conv2DGeometry& g, Masks&& masks, Tap&& tap) {
  constexpr std::int64_t L = WindowMax<T>::L;
  const std::int64_t image = g.h * g.w * g.c, C = g.c;
  // Packets land on packet-aligned addresses when C is a whole number of packets.
  const bool stream = C % L == 0 && stream_output(dx, g.n * image * static_cast<std::int64_t>(sizeof(T)));
  parallel_for(g.n * g.ho, pool_row_grain(g), [&](std::int64_t b, std::int64_t e) {
    const StreamFence fence(stream);
    for_pool_2x2_rows(g, b, e, dx, [&](std::int64_t n, std::int64_t oh, T* o0, T* o1, std::int64_t) {
      scatter_2x2_row(dy, g, n, oh, o0, o1, stream, masks, tap);
      // An odd height leaves the last row outside every window.
      if (g.h % 2 && oh == g.ho - 1) std::fill(dx + (n * g.h + g.h - 1) * g.w * C, dx + (n + 1) * image, T(0));
    });
  });
}

// The first maximum's tap (0-3, window order) of one 2x2 window's channel: the scalar Max2x2.
template <class T>
int max_tap_2x2(const T (&v)[4]) {
  int at = 0;
  for (int t = 1; t < 4; ++t)
    if (v[at] < v[t]) at = t;
  return at;
}

}  // namespace

template <class T>
void max_pool2d(const T* x, T* y, const Conv2DGeometry& g) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  if (pool_2x2(g)) {
    const std::int64_t C = g.c;
    parallel_for(g.n * g.ho, pool_row_grain(g), [&](std::int64_t b, std::int64_t e) {
      for_pool_2x2_rows(g, b, e, x, [&](auto, auto, const T* r0, const T* r1, std::int64_t out) {
        for (std::int64_t ow = 0; ow < g.wo; ++ow) {
          const T *a = r0 + 2 * ow * C, *d = r1 + 2 * ow * C;
          T* o = y + out + ow * C;
          std::int64_t c = 0;
          for (; c + L <= C; c += L)
            ei::pstoreu(o + c, Max2x2<T>(ei::ploadu<P>(a + c), ei::ploadu<P>(a + C + c), ei::ploadu<P>(d + c),
                                         ei::ploadu<P>(d + C + c)).best);
          for (; c < C; ++c) {
            T m = a[c];
            for (T v : {a[C + c], d[c], d[C + c]}) m = m < v ? v : m;
            o[c] = m;
          }
        }
      });
    });
    return;
  }
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
  if (pool_2x2(g)) {
    const std::int64_t C = g.c;
    scatter_2x2(
        dy, dx, g,
        [&](const Window2x2& w, std::int64_t c, const P& d, P& t0, P& t1, P& t2, P& t3) {
          const T *r0 = x + w.at + c, *r1 = x + w.below + c;
          Max2x2<T>(ei::ploadu<P>(r0), ei::ploadu<P>(r0 + C), ei::ploadu<P>(r1), ei::ploadu<P>(r1 + C))
              .scatter(d, t0, t1, t2, t3);
        },
        [&](const Window2x2& w, std::int64_t c) {
          const T v[4] = {x[w.at + c], x[w.at + C + c], x[w.below + c], x[w.below + C + c]};
          return max_tap_2x2(v);
        });
    return;
  }
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

namespace {

// Flat in-image index of argmax (h * W + w) * C + c, int32 (the op checks that images fit).
using ArgmaxIndex = std::int32_t;

// Packets of int32 indices as wide as T's packets (float on AVX2; Eigen 3.4's packet_traits<int>
// stays on SSE's 4 lanes, so named here), else none: the index work then runs per channel. Not
// when AVX-512F is on for the whole file (clang -march=native: float packets are Packet16f, and
// Eigen 3.4 declares but never defines preinterpret<Packet16f>(Packet8i), so nothing linked).
template <class T>
struct IndexPacket {
  static constexpr bool kOn = false;
};
#if defined(__AVX2__) && !defined(__AVX512F__)
template <>
struct IndexPacket<float> {
  static constexpr bool kOn = true;
  using type = ei::Packet8i;
};
#endif
template <class T>
constexpr bool kIndexPackets = IndexPacket<T>::kOn;
// Lane numbers, loaded as an index packet (channel offsets within a packet).
alignas(64) constexpr ArgmaxIndex kIndexLanes[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// Pools one pair of rows r0, r1 ([>= 2 wo, C] each, r0 starting at flat in-image index idx0, r1 one
// image row of w x C below) into out [wo, C] and its argmax, as max_pool2d's 2x2 path and
// max_pool2d_grad's tap rule.
template <class T>
void pool_2x2_row_with_argmax(const T* r0, const T* r1, const Conv2DGeometry& g, std::int64_t idx0, T* out,
                              ArgmaxIndex* argmax) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  const std::int64_t C = g.c, WC = g.w * g.c;
  for (std::int64_t ow = 0; ow < g.wo; ++ow) {
    const T *a = r0 + 2 * ow * C, *d = r1 + 2 * ow * C;
    const std::int64_t base = idx0 + 2 * ow * C;
    std::int64_t c = 0;
    if constexpr (kIndexPackets<T>) {
      using PI = typename IndexPacket<T>::type;
      const PI lanes = ei::ploadu<PI>(kIndexLanes);
      // The taps' offsets from tap 0 as bit patterns in T's packets, so that the masks select them.
      const P off1 = ei::preinterpret<P>(ei::pset1<PI>(static_cast<ArgmaxIndex>(C)));
      const P off2 = ei::preinterpret<P>(ei::pset1<PI>(static_cast<ArgmaxIndex>(WC)));
      const P off3 = ei::preinterpret<P>(ei::pset1<PI>(static_cast<ArgmaxIndex>(WC + C)));
      const P zero = ei::pset1<P>(T(0));
      for (; c + L <= C; c += L) {
        const Max2x2<T> m(ei::ploadu<P>(a + c), ei::ploadu<P>(a + C + c), ei::ploadu<P>(d + c),
                          ei::ploadu<P>(d + C + c));
        ei::pstoreu(out + ow * C + c, m.best);
        const P off = ei::pselect(m.m3, off3, ei::pselect(m.m2, off2, ei::pselect(m.m1, off1, zero)));
        const PI idx = ei::padd(ei::preinterpret<PI>(off),
                                ei::padd(lanes, ei::pset1<PI>(static_cast<ArgmaxIndex>(base + c))));
        ei::pstoreu(argmax + ow * C + c, idx);
      }
    }
    for (; c < C; ++c) {
      const T v[4] = {a[c], a[C + c], d[c], d[C + c]};
      const int at = max_tap_2x2(v);
      out[ow * C + c] = v[at];
      argmax[ow * C + c] = static_cast<ArgmaxIndex>(base + c + (at & 1) * C + (at >> 1) * WC);
    }
  }
}

// Whether flat in-image index idx lies in the window of pooled element i (in-image) and has its channel.
bool in_window(const Conv2DGeometry& g, std::int64_t i, std::int64_t idx) {
  const std::int64_t c = i % g.c, ow = i / g.c % g.wo, oh = i / (g.c * g.wo);
  if (idx < 0 || idx % g.c != c) return false;
  const std::int64_t h = idx / (g.c * g.w), w = idx / g.c % g.w;
  const std::int64_t h0 = oh * g.sh - g.pad_top, w0 = ow * g.sw - g.pad_left;
  return h < g.h && h >= std::max<std::int64_t>(h0, 0) && h < h0 + g.kh && w >= std::max<std::int64_t>(w0, 0) &&
         w < w0 + g.kw;
}

}  // namespace

template <class T>
void max_pool2d_with_argmax(const T* x, T* y, ArgmaxIndex* argmax, const Conv2DGeometry& g) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  const std::int64_t image = g.h * g.w * g.c;
  if (pool_2x2(g)) {
    parallel_for(g.n * g.ho, pool_row_grain(g), [&](std::int64_t b, std::int64_t e) {
      for_pool_2x2_rows(g, b, e, x, [&](std::int64_t n, auto, const T* r0, const T* r1, std::int64_t out) {
        pool_2x2_row_with_argmax(r0, r1, g, (r0 - x) - n * image, y + out, argmax + out);
      });
    });
    return;
  }
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int64_t> off(static_cast<std::size_t>(g.kh * g.kw));
    for_windows(g, b, e, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
      const std::int64_t o = ((n * g.ho + oh) * g.wo + ow) * g.c;
      const WindowMax<T> w{x, off.data(), window_taps(g, n, i0, i1, j0, j1, off.data())};
      std::int64_t c = 0;
      for (; c + L <= g.c; c += L) {
        P best, pos;
        w.packet(c, best, pos);
        ei::pstoreu(y + o + c, best);
        T at[L];
        ei::pstoreu(at, pos);
        for (std::int64_t l = 0; l < L; ++l)
          argmax[o + c + l] =
              static_cast<ArgmaxIndex>(off[static_cast<std::size_t>(at[l])] - n * image + c + l);
      }
      for (; c < g.c; ++c)
        argmax[o + c] = static_cast<ArgmaxIndex>(off[static_cast<std::size_t>(w.scalar(c, y[o + c]))] - n * image + c);
    });
  });
}

namespace {

// The masks and tap callbacks of scatter_2x2 (and scatter_2x2_row) from an argmax instead of x:
// each channel's argmax must be one of its window's four taps with its own channel, else `bad` is
// set (and the channel gets tap 4: nothing).
template <class T>
struct ArgmaxTaps2x2 {
  using P = typename WindowMax<T>::P;
  const ArgmaxIndex* argmax;
  const Conv2DGeometry& g;
  std::atomic<bool>* bad;
  // The argmax's tap (0-3) in its window, 4 if it is none of them.
  int operator()(const Window2x2& w, std::int64_t c) const {
    const std::int64_t rel = argmax[w.pooled + c] - (w.in_image + c), C = g.c, WC = g.w * g.c;
    const int t = rel == 0 ? 0 : rel == C ? 1 : rel == WC ? 2 : rel == WC + C ? 3 : 4;
    if (t == 4) bad->store(true, std::memory_order_relaxed);
    return t;
  }
  void operator()(const Window2x2& w, std::int64_t c, const P& d, P& t0, P& t1, P& t2, P& t3) const {
    const std::int64_t C = g.c, WC = g.w * g.c;
    if constexpr (kIndexPackets<T>) {
      using PI = typename IndexPacket<T>::type;
      const PI idx = ei::ploadu<PI>(argmax + w.pooled + c);
      const PI rel = ei::psub(idx, ei::padd(ei::ploadu<PI>(kIndexLanes),
                                            ei::pset1<PI>(static_cast<ArgmaxIndex>(w.in_image + c))));
      const auto mask = [&](std::int64_t o) {
        return ei::preinterpret<P>(ei::pcmp_eq(rel, ei::pset1<PI>(static_cast<ArgmaxIndex>(o))));
      };
      const P m0 = mask(0), m1 = mask(C), m2 = mask(WC), m3 = mask(WC + C);
      // Every lane's index is one of the four taps.
      if (ei::predux_any(ei::pandnot(ei::ptrue(m0), ei::por(ei::por(m0, m1), ei::por(m2, m3)))))
        bad->store(true, std::memory_order_relaxed);
      t0 = ei::pand(m0, d);
      t1 = ei::pand(m1, d);
      t2 = ei::pand(m2, d);
      t3 = ei::pand(m3, d);
    } else {
      T v[WindowMax<T>::L], out[4][WindowMax<T>::L];
      ei::pstoreu(v, d);
      for (std::int64_t l = 0; l < WindowMax<T>::L; ++l) {
        const int k = (*this)(w, c + l);
        for (int t = 0; t < 4; ++t) out[t][l] = t == k ? v[l] : T(0);
      }
      t0 = ei::ploadu<P>(out[0]);
      t1 = ei::ploadu<P>(out[1]);
      t2 = ei::ploadu<P>(out[2]);
      t3 = ei::ploadu<P>(out[3]);
    }
  }
};

// ArgmaxTaps2x2 fed relu_grad(dy, y) instead of dy: a channel with y <= 0 (or NaN) gets no tap.
template <class T>
struct ReluArgmaxTaps2x2 {
  using P = typename WindowMax<T>::P;
  const ArgmaxTaps2x2<T>& taps;
  const T* y;
  int operator()(const Window2x2& w, std::int64_t c) const {
    const int t = taps(w, c);  // (checks the index either way)
    return y[w.pooled + c] > T(0) ? t : 4;
  }
  void operator()(const Window2x2& w, std::int64_t c, const P& d, P& t0, P& t1, P& t2, P& t3) const {
    const P live = ei::pcmp_lt(ei::pset1<P>(T(0)), ei::ploadu<P>(y + w.pooled + c));
    taps(w, c, ei::pand(live, d), t0, t1, t2, t3);
  }
};

}  // namespace

// As max_pool2d_grad, the taps found from argmax instead of x: the same values in the same order.
template <class T>
bool max_pool2d_grad_with_argmax(const T* dy, const ArgmaxIndex* argmax, T* dx, const Conv2DGeometry& g) {
  const std::int64_t image = g.h * g.w * g.c, pooled = g.ho * g.wo * g.c;
  std::atomic<bool> bad{false};
  if (pool_2x2(g)) {
    const ArgmaxTaps2x2<T> taps{argmax, g, &bad};
    scatter_2x2(dy, dx, g, taps, taps);
    return !bad.load();
  }
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) {
      T* d = dx + n * image;
      std::fill(d, d + image, T(0));
      const ArgmaxIndex* am = argmax + n * pooled;
      for (std::int64_t i = 0; i < pooled; ++i) {
        if (!in_window(g, i, am[i])) {
          bad.store(true, std::memory_order_relaxed);
          return;
        }
        d[am[i]] += dy[n * pooled + i];
      }
    }
  });
  return !bad.load();
}

// Pairs of dz rows made from the argmax as scatter_2x2_row makes them in dx, on the fast path: no
// dz is materialised, each task makes the rows it needs in cache (W8's conv1: an 11 MB dz written
// once and read twice per step otherwise). Rows are summed for the bias as reduce_sum sums dz.
template <class T>
bool conv2d_backprop_filter_bias_with_argmax(const T* x, const T* dy, const ArgmaxIndex* argmax, T* dfilter,
                                             T* dbias, const Conv2DGeometry& g, const Conv2DGeometry& pool,
                                             const T* relu_y) {
  if (pool.n != g.n || pool.h != g.ho || pool.w != g.wo || pool.c != g.f)
    throw std::logic_error("conv2d_backprop_filter_bias_with_argmax: the pool's input " + std::to_string(pool.h) +
                           "x" + std::to_string(pool.w) + "x" + std::to_string(pool.c) +
                           " is not the convolution's output " + std::to_string(g.ho) + "x" + std::to_string(g.wo) +
                           "x" + std::to_string(g.f));
  const std::int64_t pixels = g.out_pixels(), F = g.f, WF = g.wo * g.f;
  if (pixels * F == 0 || g.patch_size() == 0) {
    std::fill(dfilter, dfilter + g.patch_size() * F, T(0));
    std::fill(dbias, dbias + F, T(0));
    return true;
  }
  if (!direct(g) || !pool_2x2(pool) || F == 1) {
    const std::unique_ptr<T, void (*)(void*)> z(
        static_cast<T*>(scalable_aligned_malloc(static_cast<std::size_t>(pixels * F) * sizeof(T), 64)),
        scalable_aligned_free);
    if (!z) throw std::bad_alloc();
    std::vector<T> masked(relu_y ? static_cast<std::size_t>(pool.out_pixels() * F) : 0);
    if (relu_y) {
      relu_grad(dy, relu_y, masked.data(), pool.out_pixels() * F);
      dy = masked.data();
    }
    if (!max_pool2d_grad_with_argmax(dy, argmax, z.get(), pool)) return false;
    conv2d_backprop_filter(x, z.get(), dfilter, g);
    reduce_sum(z.get(), Shape{pixels, F}, 1u, dbias);
    return true;
  }
  std::atomic<bool> bad{false};
  const ArgmaxTaps2x2<T> taps{argmax, pool, &bad};
  const ReluArgmaxTaps2x2<T> relu_taps{taps, relu_y};
  // Per task: a buffer of two rows (the pooled row made last) and a row of zeros (an odd height's
  // last row, in no window).
  const auto dz_rows = [&] {
    return [&, buf = std::vector<T>(static_cast<std::size_t>(3 * WF), T(0)),
            made = std::int64_t{-1}](std::int64_t r) mutable -> const T* {
      const std::int64_t n = r / g.ho, oh = r % g.ho, ph = oh / 2;
      if (ph >= pool.ho) return buf.data() + 2 * WF;
      if (const std::int64_t pair = n * pool.ho + ph; pair != made) {
        if (relu_y)
          scatter_2x2_row(dy, pool, n, ph, buf.data(), buf.data() + WF, false, relu_taps, relu_taps);
        else
          scatter_2x2_row(dy, pool, n, ph, buf.data(), buf.data() + WF, false, taps, taps);
        made = pair;
      }
      return buf.data() + (oh % 2) * WF;
    };
  };
  // The bias: per partial of `per` pixels, the pixels' rows summed in order from 0; then the
  // partials in order (reduce_sum's order over [pixels, F]). A partial whose rows all lie in one
  // tile of the filter gradient is summed there, as the rows are made; the others (at most one
  // per tile boundary) afterwards, their rows made again.
  const std::int64_t per = reduce_sum_rows_per_partial(1, pixels, F), chunks = (pixels + per - 1) / per;
  const std::int64_t per_tile = direct_filter_rows_per_tile(g);
  std::vector<T> part(static_cast<std::size_t>(chunks * F), T(0));
  const auto in_one_tile = [&](std::int64_t c) {
    return c * per / g.wo / per_tile == (std::min(pixels, (c + 1) * per) - 1) / g.wo / per_tile;
  };
  // Adds the pixels of row r (values `row`) that lie in partial c: per channel the same adds in
  // pixel order, a packet of channels held in a register along the row (adding through memory
  // stalled on a store-to-load round trip per pixel).
  const auto add_row = [&](const T* row, std::int64_t r, std::int64_t c) {
    using P = typename ei::packet_traits<T>::type;
    constexpr std::int64_t L = ei::packet_traits<T>::size;
    T* pr = part.data() + c * F;
    const std::int64_t p0 = std::max(r * g.wo, c * per), p1 = std::min({(r + 1) * g.wo, (c + 1) * per, pixels});
    const T *first = row + (p0 - r * g.wo) * F, *end = row + (p1 - r * g.wo) * F;
    std::int64_t j = 0;
    for (; j + L <= F; j += L) {
      P acc = ei::ploadu<P>(pr + j);
      for (const T* v = first + j; v < end; v += F) acc = ei::padd(acc, ei::ploadu<P>(v));
      ei::pstoreu(pr + j, acc);
    }
    for (; j < F; ++j) {
      T acc = pr[j];
      for (const T* v = first + j; v < end; v += F) acc = acc + *v;
      pr[j] = acc;
    }
  };
  const auto partials_of = [&](std::int64_t r) {
    return std::pair<std::int64_t, std::int64_t>{r * g.wo / per, ((r + 1) * g.wo - 1) / per};
  };
  std::fill(dfilter, dfilter + g.patch_size() * F, T(0));
  conv2d_backprop_filter_direct(
      x,
      [&] {
        return [&, make = dz_rows()](std::int64_t r) mutable -> const T* {
          const T* row = make(r);
          const auto [c0, c1] = partials_of(r);
          for (std::int64_t c = c0; c <= c1; ++c)
            if (in_one_tile(c)) add_row(row, r, c);
          return row;
        };
      },
      dfilter, g);
  std::vector<std::int64_t> rest;
  for (std::int64_t c = 0; c < chunks; ++c)
    if (!in_one_tile(c)) rest.push_back(c);
  parallel_for(static_cast<std::int64_t>(rest.size()), 1, [&](std::int64_t b, std::int64_t e) {
    auto row = dz_rows();
    for (std::int64_t i = b; i < e; ++i) {
      const std::int64_t c = rest[static_cast<std::size_t>(i)], last = (std::min(pixels, (c + 1) * per) - 1) / g.wo;
      for (std::int64_t r = c * per / g.wo; r <= last; ++r) add_row(row(r), r, c);
    }
  });
  std::fill(dbias, dbias + F, T(0));
  for (std::int64_t c = 0; c < chunks; ++c)
    for (std::int64_t j = 0; j < F; ++j) dbias[j] = dbias[j] + part[static_cast<std::size_t>(c * F + j)];
  return !bad.load();
}

template <class T>
bool max_pool2d_grad_grad_with_argmax(const T* ddx, const ArgmaxIndex* argmax, T* y, const Conv2DGeometry& g) {
  const std::int64_t image = g.h * g.w * g.c, pooled = g.ho * g.wo * g.c;
  std::atomic<bool> bad{false};
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n)
      for (std::int64_t i = 0; i < pooled; ++i) {
        const ArgmaxIndex a = argmax[n * pooled + i];
        if (!in_window(g, i, a)) {
          bad.store(true, std::memory_order_relaxed);
          return;
        }
        y[n * pooled + i] = ddx[n * image + a];
      }
  });
  return !bad.load();
}

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

// Disjoint 2x2 windows over a direct-kernel convolution: each task convolves the two rows of a
// pooled row into a scratch buffer (in L1/L2) and pools them from there, so the convolution's
// output is never written to memory nor read back (W8's conv1: 11 MB each way per step).
// Otherwise the convolution goes to a temporary and max_pool2d_with_argmax pools it.
template <class T>
void conv2d_max_pool2d(const T* x, const T* filter, const T* bias, T* y, ArgmaxIndex* argmax,
                       const Conv2DGeometry& g, const Conv2DGeometry& pool, bool relu) {
  if (pool.n * pool.ho * pool.wo * pool.c == 0) return;
  const ConvEpilogue<T> epilogue{bias, false}, activation{nullptr, relu};
  if (direct(g) && pool_2x2(pool)) {
    const DirectConv<T> conv(x, filter, g);
    const std::int64_t row = g.wo * g.f;
    parallel_for(pool.n * pool.ho, std::max<std::int64_t>(1, conv.grain() / 2), [&](std::int64_t b, std::int64_t e) {
      std::vector<T> panel = conv.panel(), rows(static_cast<std::size_t>(2 * row));
      for (std::int64_t r = b; r < e; ++r) {
        const std::int64_t n = r / pool.ho, ph = r % pool.ho;
        conv.row(n * g.ho + 2 * ph, rows.data(), panel, epilogue);
        conv.row(n * g.ho + 2 * ph + 1, rows.data() + row, panel, epilogue);
        pool_2x2_row_with_argmax(rows.data(), rows.data() + row, pool, 2 * ph * row,
                                 y + r * pool.wo * pool.c, argmax + r * pool.wo * pool.c);
        apply_epilogue(y + r * pool.wo * pool.c, pool.wo, pool.c, activation);
      }
    });
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    if (winograd_pool<T>(g, pool) && conv2d_max_pool2d_winograd(x, filter, bias, y, argmax, g, pool, relu)) return;
  // From TBB's allocator, as tensors are: it keeps large blocks mapped between calls (operator new
  // went to mmap and paid ~1000 page faults per call for W8's conv2).
  const std::unique_ptr<T, void (*)(void*)> z(
      static_cast<T*>(scalable_aligned_malloc(static_cast<std::size_t>(g.out_pixels() * g.f) * sizeof(T), 64)),
      scalable_aligned_free);
  if (!z) throw std::bad_alloc();
  if (!direct(g) && !pointwise(g)) {
    // Only the rows and columns some window reads: a VALID pool drops W8's conv2's last row and
    // column (11 -> 5), a sixth of the product.
    const NeededLines need{std::min(g.ho, (pool.ho - 1) * pool.sh - pool.pad_top + pool.kh),
                           std::min(g.wo, (pool.wo - 1) * pool.sw - pool.pad_left + pool.kw)};
    conv2d_igemm(x, filter, z.get(), g, epilogue, need);
  } else {
    conv2d(x, filter, z.get(), g, epilogue);
  }
  max_pool2d_with_argmax(z.get(), y, argmax, pool);
  if (relu)
    parallel_for(pool.n * pool.ho, pool_row_grain(pool), [&](std::int64_t b, std::int64_t e) {
      apply_epilogue(y + b * pool.wo * pool.c, (e - b) * pool.wo, pool.c, activation);
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
  template void max_pool2d_with_argmax<T>(const T*, T*, std::int32_t*, const Conv2DGeometry&); \
  template bool max_pool2d_grad_with_argmax<T>(const T*, const std::int32_t*, T*, const Conv2DGeometry&); \
  template bool max_pool2d_grad_grad_with_argmax<T>(const T*, const std::int32_t*, T*, const Conv2DGeometry&); \
  template bool conv2d_backprop_filter_bias_with_argmax<T>(const T*, const T*, const std::int32_t*, T*, T*, \
                                                            const Conv2DGeometry&, const Conv2DGeometry&,   \
                                                            const T*);                                      \
  template void conv2d_max_pool2d<T>(const T*, const T*, const T*, T*, std::int32_t*, const Conv2DGeometry&, \
                                     const Conv2DGeometry&, bool);                            \
  template void avg_pool2d<T>(const T*, T*, const Conv2DGeometry&);                      \
  template void avg_pool2d_grad<T>(const T*, T*, const Conv2DGeometry&);
TAPEFLOW_INSTANTIATE_CONV(float)
TAPEFLOW_INSTANTIATE_CONV(double)
#undef TAPEFLOW_INSTANTIATE_CONV

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
