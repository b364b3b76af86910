// The convolutions on im2col patch tiles and the packed GEMM (conv/algorithms.h): the input
// gradient for few input channels (dy @ filterᵀ folded back by col2im) and the filter gradient
// where neither the Winograd, the in-place packed nor the direct scheme takes the shape.
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv/internal/algorithms.h"
#include "tape/kernels/conv/internal/common.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

namespace {

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

}  // namespace

template <class T>
void conv2d_backprop_input_im2col(const T* filter, const T* dy, T* dx, const Conv2DGeometry& g) {
  const std::int64_t k = g.patch_size();
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

template <class T>
void conv2d_backprop_filter_im2col(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g) {
  const std::int64_t rows = g.out_pixels(), k = g.patch_size(), kf = k * g.f;
  const bool pw = pointwise(g);
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

#define TAPEFLOW_INSTANTIATE(T)                                                                 \
  template void conv2d_backprop_input_im2col<T>(const T*, const T*, T*, const Conv2DGeometry&); \
  template void conv2d_backprop_filter_im2col<T>(const T*, const T*, T*, const Conv2DGeometry&);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
