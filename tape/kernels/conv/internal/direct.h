// The direct convolution for few input channels (C <= kDirectMaxChannels; conv.h): a zero-padded
// panel of the kh input rows per output row, register blocks of kDirectPixels pixels x 2 packets of
// output channels over the taps (kWide channels in the AVX-512 blocks, ukernels/direct.cc).
// DirectConv and the filter gradient are templates here because the pool-fused kernels
// (conv/conv.cc, conv/pool_fused.cc) drive them row by row with their own callbacks.
#pragma once
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv/internal/common.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

// The direct forward kernel, one output row at a time (conv2d_direct, and conv2d_max_pool2d's
// fused path, which pools pairs of rows while they are in cache).
template <class T>
class DirectConv {
 public:
  static constexpr std::int64_t FB = 2 * ei::packet_traits<T>::size, PX = kDirectPixels;

  DirectConv(const T* x, const T* filter, const Conv2DGeometry& g)
      : x_(x), g_(g), k_(g.patch_size()), fp_(round_up(g.f, FB)),
        width_((round_up(g.wo, PX) - 1) * g.sw + (g.kw - 1) * g.dw + 1), fpad_(pad_columns(filter, k_, g.f, fp_)),
        tap_offset_(panel_tap_offsets(g, width_, k_)), wide_(wide_tiles<T>()) {}
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
    T tail[PX * kWide];
    // Floats whose channels are all in wide blocks (F a multiple of 32): the epilogue is applied
    // in the blocks, in registers, instead of in a pass over the row.
    const bool fused = wide_ && g.f % kWide == 0;
    fill_panel(x_, g, r / g.ho, r % g.ho, width_, panel.data());
    for (std::int64_t ow0 = 0; ow0 < g.wo; ow0 += PX)
      for (std::int64_t f0 = 0; f0 < fp_;) {
        const bool wide = wide_ && f0 + kWide <= fp_;  // an AVX-512 block (kWide channels)
        const std::int64_t nb = wide ? kWide : FB, np = std::min(PX, g.wo - ow0), nf = std::min(nb, g.f - f0);
        const T* bias = fused && epilogue.bias ? epilogue.bias + f0 : nullptr;
        const bool whole = np == PX && nf == nb;  // else through a block on the stack
        run_direct_block(wide, panel.data() + ow0 * step, step, tap_offset_.data(), k_, fpad_.data() + f0, fp_,
                         whole ? y_row + ow0 * g.f + f0 : tail, whole ? g.f : nb, bias, fused && epilogue.relu);
        if (!whole)
          for (std::int64_t p = 0; p < np; ++p) std::copy_n(tail + p * nb, nf, y_row + (ow0 + p) * g.f + f0);
        f0 += nb;
      }
    if (!fused) apply_epilogue(y_row, g.wo, g.f, epilogue);
  }

 private:
  const T* x_;
  const Conv2DGeometry& g_;
  std::int64_t k_, fp_, width_;
  std::vector<T> fpad_;
  std::vector<std::int64_t> tap_offset_;
  bool wide_;  // floats: kWide-channel AVX-512 blocks (wide_tiles)
};

// Output rows per fixed tile of the direct filter gradient (one task runs a tile's rows in order).
inline std::int64_t direct_filter_rows_per_tile(const Conv2DGeometry& g) {
  return std::max<std::int64_t>(1, (g.n * g.ho + kDirectFilterTiles - 1) / kDirectFilterTiles);
}

// dfilter[i, j, c, :] = sum over output pixels of x at tap (i, j, c) times dy[pixel, :]. Output
// rows in kDirectFilterTiles fixed tiles; per row, register blocks of kDirectTaps taps x 2
// packets of channels run along the row, then add into the tile's partial. Adds into dfilter
// (zeroed by the caller). dy_rows() makes, per task, a callable that gives output row r of dy
// ([wo, f] values): a pointer into dy, or into a buffer of its own that it fills; it is called
// once per row, a tile's rows in order.
template <class T, class DyRows>
void conv2d_backprop_filter_direct_rows(const T* x, DyRows&& dy_rows, T* dfilter, const Conv2DGeometry& g) {
  constexpr std::int64_t FB = 2 * ei::packet_traits<T>::size, TB = kDirectTaps;
  const std::int64_t k = g.patch_size(), fp = round_up(g.f, FB), kfp = k * fp;
  const std::int64_t width = (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1, step = g.sw * g.c;
  const std::int64_t rows = g.n * g.ho, per_tile = direct_filter_rows_per_tile(g);
  const std::int64_t tiles = (rows + per_tile - 1) / per_tile;
  // Taps past k read offset 0 and are dropped.
  const std::vector<std::int64_t> tap_offset = panel_tap_offsets(g, width, round_up(k, TB));
  std::vector<T> partial(static_cast<std::size_t>(tiles * kfp), T(0));
  const bool wide = wide_tiles<T>();  // kWide-channel AVX-512 blocks
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
        for (std::int64_t f0 = 0; f0 < fp;) {
          const bool w = wide && f0 + kWide <= fp;  // an AVX-512 block (kWide channels)
          for (std::int64_t t0 = 0; t0 < k; t0 += TB)
            run_direct_filter_block(w, panel.data(), step, tap_offset.data() + t0, g.wo, d_row + f0, fp,
                                    part + t0 * fp + f0, std::min(TB, k - t0));
          f0 += w ? kWide : FB;
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

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
