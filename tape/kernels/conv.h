// 2-D convolution and pooling kernels, NHWC activations and HWIO filters (TensorFlow/Keras layout).
// Shapes:   x [N, H, W, C], filter [kh, kw, C, F], y [N, Ho, Wo, F] (see Conv2DGeometry).
//           Pooling: x [N, H, W, C] -> y [N, Ho, Wo, C] with F == C and the window kh x kw.
// DTypes:   float, double.
// Facts:    conv2d and conv2d_backprop_input are indirect GEMMs (XNNPACK's indirection-buffer
//           scheme): an output pixel's row of the product reads, per filter tap, the C (or F)
//           contiguous input values of that tap straight from x (or dy) through a table of
//           pointers, so nothing is unfolded (no im2col) and the A side is never packed; the
//           filter is packed once per call into panels of 2 packets of columns. Register tiles of
//           6 pixels x 2 packets accumulate over all taps. Pixels are grouped by the filter taps
//           that reach them (border pixels under padding, and with strides the phase of a dx pixel),
//           so no tile multiplies padding or a structural zero of the transposed convolution.
//           Extra memory per task: its pointer table (pixels x taps pointers) and the packed
//           filter (kh*kw*C x F rounded up to 16 / 8 columns), shared. conv2d_backprop_input with
//           fewer than kIgemmMinOutChannels input channels instead multiplies per image tiles
//           dpatch = dy [R, F] @ filterᵀ and folds them back (col2im); images in parallel.
//           conv2d_backprop_filter:
//           with C a multiple of 16 (float) / 8 (double) and F >= 6 (with AVX2 + FMA),
//           dfilterᵀ = gᵀ @ patches on the packed GEMM, the patch matrix packed
//           block by block straight from x (never unfolded), threads owning column ranges of
//           kh*kw*C, partial sums over fixed runs of pixels (the im2col tiles' below
//           kFilterWideChannels, chunks of kFilterWideChunkBytes of one tap's rows from there on)
//           added in order; extra memory 2 x kh*kw*C*F + 3 int64 per output pixel + per thread
//           its GEMM blocks;
//           otherwise, per fixed tile an im2col patch tile (R * kh*kw*C values under
//           kConvGradTileBytes) and a partial patchesᵀ @ g, partials added in tile order (waves of
//           kFilterWave tiles in parallel), extra memory kFilterWave x (tile + kh*kw*C*F).
//           Inputs with C <= kDirectMaxChannels (images: 1 or 3 channels) skip im2col and the
//           GEMM in conv2d and conv2d_backprop_filter: direct kernels accumulate blocks of 6
//           output pixels x 2 packets of channels (forward) or 6 taps x 2 packets (filter
//           gradient, per fixed tile of output rows) in registers over a zero-padded copy of the
//           kh input rows each output row reads; extra memory per task kh x (padded row) x C.
//           At cpu_isa() kAvx512 (kernels/ukernels/; TAPEFLOW_MAX_CPU_ISA=avx2 caps it),
//           float tiles are twice as wide (32 channels: the indirect GEMM's, the packed GEMM's,
//           the direct kernels' blocks), and conv2d_backprop_filter with C a multiple of 32
//           reads both operands in place (tiles of up to 14 rows of dfilterᵀ x one tap's 32
//           channels, dy broadcast from its rows, x loaded at the tap, zeros in the padding: no
//           packing; extra memory one pointer per output pixel and per task one per pixel of a run).
//           Every element is the same FMA chain as on the AVX2 tiles: the same bits either way.
//           Winograd (Lavin & Gray 2016, float only, 3x3 stride-1 undilated VALID, C and F whole
//           packets >= 16): conv2d_backprop_filter when the part of dy it reads (nonzero_extent:
//           a 2x2 max pool's gradient leaves W8's conv2 10 x 10 of 11 x 11) has even sides runs
//           F(3x3, 2x2) (16 FMAs per 2x2 block and (c, f) instead of 36; units of >= 48 blocks
//           in up to 4 fixed groups, each thread reading only its groups' x and dy; extra memory
//           per thread about 16 x (C + F) values per block of a unit, 16 C F per group), and
//           conv2d_max_pool2d under a 2x2 pool runs F(2x2, 3x3); both within rounding of the
//           direct products (relative ~1e-6), the same bits on the AVX2 and AVX-512 tiles and for
//           any thread count; an inf or NaN among the results sends the call to the direct
//           product (the transforms' differences would turn inf into NaN).
//           Deterministic: every partition depends on the shape only, each output element sums in
//           one fixed order, so results are bitwise identical for any thread count.
//           Pooling: max pooling ignores padded positions (TF's -inf padding); average pooling
//           divides by the number of unpadded elements in each window (TF's SAME rule). Ties in
//           max pooling: the gradient goes to the first maximum in window order (row-major over
//           the window), as TF's CPU kernel. Parallel over images (or output rows), deterministic.
// Ref:      tf.nn.conv2d, tf.raw_ops.Conv2DBackpropInput/Conv2DBackpropFilter, tf.nn.max_pool2d,
//           tf.nn.avg_pool2d, tensorflow/core/framework/kernel_shape_util.cc
#pragma once

#include <cstdint>
#include <string>
#include "tape/kernels/window.h"

namespace tapeflow::kernels {

// conv2d and conv2d_backprop_filter use direct kernels (no im2col, no GEMM) when the input has at
// most this many channels: a patch of kh*kw*C <= 4*kh*kw values is too short for the GEMM.
inline constexpr std::int64_t kDirectMaxChannels = 4;
// conv2d_backprop_input runs as an indirect GEMM when x has at least this many channels (the
// columns of its product): below, most of a 2-packet register tile would be padding.
inline constexpr std::int64_t kIgemmMinOutChannels = 8;
// Tiles hold a multiple of this many output pixels (the GEMM's register tile rows).
inline constexpr std::int64_t kConvTileRowMultiple = 6;
// Patch-tile budget of one task in the two GEMM-based gradient schemes: their products are thin
// in one dimension (R rows of dpatch, or K = R for the filter partials), so large tiles pay
// (measured on W9's convolutions: 10-25% faster than 256 KiB).
inline constexpr std::int64_t kConvGradTileBytes = 1024 * 1024;
// Filter-gradient tiles reduced per parallel wave (fixed: results do not depend on threads).
inline constexpr std::int64_t kFilterWave = 8;
// conv2d_backprop_filter's partial sums (see conv/filter_gemm.cc, filter_partial_rows): from this many input
// channels on, runs of kFilterWideChunkBytes / (C * sizeof(T)) output pixels.
inline constexpr std::int64_t kFilterWideChannels = 128;
// Bytes of one tap's rows per partial sum of conv2d_backprop_filter from kFilterWideChannels on
// (a run is kFilterWideChunkBytes / (C * sizeof(T)) output pixels, at least 64).
inline constexpr std::int64_t kFilterWideChunkBytes = 1024 * 1024;
// Outputs of at least this many bytes are written with non-temporal stores where a kernel can
// (max_pool2d_grad's 2x2 path): far past L2, the next op reads them from memory anyway.
inline constexpr std::int64_t kConvStreamBytes = 8 << 20;

// Geometry of one 2-D convolution or pooling window sweep.
struct Conv2DGeometry {
  std::int64_t n = 0,  // input: images
      h = 0,           // input height
      w = 0,           // input width
      c = 0;           // input channels
  std::int64_t kh = 1,  // window (filter) height
      kw = 1,           // window (filter) width
      f = 0;            // output channels (pooling: f == c)
  std::int64_t sh = 1,  // stride along the height
      sw = 1,           // stride along the width
      dh = 1,           // dilation along the height
      dw = 1;           // dilation along the width
  std::int64_t pad_top = 0,  // zero rows before the first input row (after is implied by ho)
      pad_left = 0;          // zero columns before the first input column (after is implied by wo)
  std::int64_t ho = 0,  // output height
      wo = 0;           // output width
  // Values in one patch, kh · kw · c: the inner dimension of the convolution's product.
  std::int64_t patch_size() const { return kh * kw * c; }
  // Output pixels over the batch, n · ho · wo: the rows of the convolution's product.
  std::int64_t out_pixels() const { return n * ho * wo; }
};

// WindowDim / window_dim (the one TF output-size rule): tape/kernels/window.h.

// What conv2d applies to each output row (or tile) as soon as it is finished (still in cache):
// y = y + bias[f] (bias: g.f values; null: none), then y = y > 0 ? y : 0 when relu. The same
// float operations as the separate add and relu kernels, so the values are bit-identical to them
// (TF's _FusedConv2D with fused_ops [BiasAdd] / [BiasAdd, Relu]).
template <class T>
struct ConvEpilogue {
  const T* bias = nullptr;  // g.f values added to each output pixel's channels (null: no bias)
  bool relu = false;        // then y = y > 0 ? y : 0
};

// The kernels below exist once per instruction-set level (tape/core/cpu_isa.h; tape/kernels/conv/
// and pool.cc compiled per level into kernels::isa_<level>, internal/conv_isa.h); these dispatch each call to the copy
// of cpu_isa()'s level. The per-level copies do not see these declarations (argument-dependent
// lookup would find both).
#ifndef TAPEFLOW_KERNEL_ISA
// y = conv2d(x, filter), then the epilogue.
template <class T>
void conv2d(const T* x, const T* filter, T* y, const Conv2DGeometry& g, ConvEpilogue<T> epilogue = {});
// dx = the gradient of conv2d w.r.t. x for output gradient dy (overwrites dx).
template <class T>
void conv2d_backprop_input(const T* filter, const T* dy, T* dx, const Conv2DGeometry& g);
// dfilter = the gradient of conv2d w.r.t. the filter (overwrites dfilter).
template <class T>
void conv2d_backprop_filter(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g);

// Pooling (g.f == g.c; dilations 1).
template <class T>
void max_pool2d(const T* x, T* y, const Conv2DGeometry& g);
// dx[argmax of each window] += dy (overwrites dx).
template <class T>
void max_pool2d_grad(const T* x, const T* dy, T* dx, const Conv2DGeometry& g);
// y[window] = ddx[argmax of the window]: the gradient of max_pool2d_grad w.r.t. dy.
template <class T>
void max_pool2d_grad_grad(const T* x, const T* ddx, T* y, const Conv2DGeometry& g);
// Max pooling that also gives each output's argmax: the flat index within its image,
// (h * W + w) * C + c, of the window's first maximum in window order (the element max_pool2d_grad
// sends the gradient to). TF's MaxPoolWithArgmax with include_batch_in_index = false and int32
// indices (callers check that an image has fewer than 2^31 elements).
template <class T>
void max_pool2d_with_argmax(const T* x, T* y, std::int32_t* argmax, const Conv2DGeometry& g);
// dx[n, argmax] += dy (overwrites dx; g is the pool's geometry): max_pool2d_grad without x, the
// same values summed in the same order (TF's MaxPoolGradWithArgmax). Returns false (dx then
// unspecified, nothing written outside it) if an index is not in its own window with its own
// channel, which max_pool2d_with_argmax never gives.
template <class T>
bool max_pool2d_grad_with_argmax(const T* dy, const std::int32_t* argmax, T* dx, const Conv2DGeometry& g);
// y = ddx[n, argmax]: the gradient of max_pool2d_grad_with_argmax w.r.t. dy (TF's
// MaxPoolGradGradWithArgmax). Returns false on an index outside its window, as above.
template <class T>
bool max_pool2d_grad_grad_with_argmax(const T* ddx, const std::int32_t* argmax, T* y, const Conv2DGeometry& g);
// y, argmax = max_pool2d_with_argmax(conv2d(x, filter) + bias) (bias: conv.f values), pool being the
// pool's geometry over the convolution's output ([n, ho, wo, f]), then y = y > 0 ? y : 0 when relu
// (ConvEpilogue's, on each pooled row while in cache). For 2x2 stride-2 pools the convolution's
// output is never materialised:
//   - over a direct-kernel convolution (C <= kDirectMaxChannels): bit-identical to the kernels run
//     one after the other (extra memory per task: two output rows);
//   - float 3x3 stride-1 VALID convolutions with C and F whole packets (>= 16; W8's conv2): Winograd
//     F(2x2, 3x3) (Lavin & Gray 2016), each 2x2 output block being one pool window: 2.25x fewer
//     FMAs, values within rounding of the direct product's (relative ~1e-6: the transforms' sums),
//     the same bits on AVX2 and AVX-512 and for any thread count; the argmax can differ from the
//     direct product's only between values that close. Extra memory per task: about 64 tiles'
//     16 x (C + F) values. Any inf or NaN among the convolution's values (an inf or NaN in x or the
//     filter, or a sum overflowing) sends the call to the direct product instead, so non-finite
//     inputs give exactly the kernels' results (the transforms' differences would turn inf into NaN).
// Otherwise the convolution goes to a temporary of conv.out_pixels() x conv.f values.
template <class T>
void conv2d_max_pool2d(const T* x, const T* filter, const T* bias, T* y, std::int32_t* argmax,
                       const Conv2DGeometry& conv, const Conv2DGeometry& pool, bool relu = false);
// dfilter = conv2d_backprop_filter(x, dz) and dbias = the sum of dz over its pixels (conv.f values,
// summed in reduce_sum's order) for dz = max_pool2d_grad_with_argmax(dy', argmax) over the
// convolution's output (pool: the pool's geometry over [n, ho, wo, f]), dy' = relu_grad(dy, relu_y)
// if relu_y (the pooled relu's output) is given, else dy: bit for bit those kernels run one after
// the other (overwrites dfilter and dbias). For 2x2 stride-2 pools over a
// direct-kernel convolution dz is never materialised (extra memory per task: three output rows);
// otherwise it goes to a temporary of conv.out_pixels() x conv.f values. Returns false (outputs
// then unspecified) on an index outside its window, as max_pool2d_grad_with_argmax; throws
// std::logic_error if the pool's input is not the convolution's output.
template <class T>
bool conv2d_backprop_filter_bias_with_argmax(const T* x, const T* dy, const std::int32_t* argmax, T* dfilter,
                                             T* dbias, const Conv2DGeometry& conv, const Conv2DGeometry& pool,
                                             const T* relu_y = nullptr);
// y = the mean of each window's unpadded elements (TF's SAME rule for the divisor).
template <class T>
void avg_pool2d(const T* x, T* y, const Conv2DGeometry& g);
// dx[window] += dy / count(window) (overwrites dx).
template <class T>
void avg_pool2d_grad(const T* dy, T* dx, const Conv2DGeometry& g);

#endif  // TAPEFLOW_KERNEL_ISA

}  // namespace tapeflow::kernels
