// The convolution entry points of conv.h (per-level copies, namespace isa_<level>; conv/dispatch.cc
// picks one per call): the one place that chooses the algorithm per op and shape. In order:
//   conv2d:                 direct (C <= kDirectMaxChannels) | pointwise GEMM | indirect GEMM
//   conv2d_backprop_input:  pointwise GEMM | indirect GEMM (C >= kIgemmMinOutChannels) | im2col
//   conv2d_backprop_filter: Winograd F(3x3, 2x2) | packed GEMM in place | direct | im2col
//   conv2d_max_pool2d:      direct rows pooled in cache | Winograd F(2x2, 3x3) | indirect GEMM or
//                           conv2d, then max_pool2d_with_argmax
// The algorithms live one per file beside this one (conv/algorithms.h). A benchmark or test can force
// one instead (conv/internal/forced_algorithm.h): each entry point asks its *_algorithm() below,
// which returns the forced algorithm (checked) or the shape rule's, and runs that.
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv/internal/algorithms.h"
#include "tape/kernels/conv/internal/direct.h"
#include "tape/kernels/conv/internal/forced_algorithm.h"
#include "tape/kernels/conv/internal/igemm.h"
#include "tape/kernels/internal/pool_windows.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

using internal::ConvAlgorithm;
using internal::throw_forced_conv_algorithm;

namespace {

// The algorithm of each entry point below: the forced one when a test or benchmark forced one
// (checked here: refused with a message naming the kernel), else the shape rule. Each entry point
// then runs what its rule returned; forcing replaces only the choice.

// conv2d: direct (C <= kDirectMaxChannels) | pointwise GEMM | indirect GEMM.
ConvAlgorithm forward_rule(const Conv2DGeometry& g) {
  return direct(g) ? ConvAlgorithm::kDirect : pointwise(g) ? ConvAlgorithm::kPointwise : ConvAlgorithm::kIgemm;
}
ConvAlgorithm forward_algorithm(const Conv2DGeometry& g) {
  const ConvAlgorithm a = internal::forced_conv_algorithm();
  if (a == ConvAlgorithm::kAuto) return forward_rule(g);
  if (a != ConvAlgorithm::kDirect && a != ConvAlgorithm::kIgemm)
    throw_forced_conv_algorithm("conv2d", "is not a forward algorithm (direct, igemm)");
  return a;
}

// conv2d_backprop_input: pointwise GEMM | indirect GEMM (C >= kIgemmMinOutChannels) | im2col.
ConvAlgorithm input_algorithm(const Conv2DGeometry& g) {
  const ConvAlgorithm a = internal::forced_conv_algorithm();
  if (a == ConvAlgorithm::kAuto)
    return pointwise(g) ? ConvAlgorithm::kPointwise
                        : g.c >= kIgemmMinOutChannels ? ConvAlgorithm::kIgemm : ConvAlgorithm::kIm2col;
  if (a != ConvAlgorithm::kIgemm && a != ConvAlgorithm::kIm2col)
    throw_forced_conv_algorithm("conv2d_backprop_input", "is not an input-gradient algorithm (igemm, im2col)");
  return a;
}

// conv2d_backprop_filter without Winograd: the packed GEMM in place (not pointwise: that case
// takes the GEMM on x itself in im2col) | direct | im2col.
template <class T>
ConvAlgorithm filter_rule_after_winograd(const Conv2DGeometry& g) {
#if TAPEFLOW_GEMM_AVX2
  if (!pointwise(g) && filter_packed<T>(g)) return ConvAlgorithm::kFilterGemm;
#endif
  return direct(g) ? ConvAlgorithm::kDirect : ConvAlgorithm::kIm2col;
}
// conv2d_backprop_filter: Winograd F(3x3, 2x2) (float, the AVX2 copy; it also needs dy's nonzero
// extent even: see the entry point) | the rule above.
template <class T>
ConvAlgorithm filter_algorithm(const Conv2DGeometry& g) {
  constexpr const char* kKernel = "conv2d_backprop_filter";
  const ConvAlgorithm a = internal::forced_conv_algorithm();
  switch (a) {
    case ConvAlgorithm::kAuto:
#if TAPEFLOW_GEMM_AVX2
      if constexpr (std::is_same_v<T, float>)
        if (winograd_filter<T>(g)) return ConvAlgorithm::kWinograd;
#endif
      return filter_rule_after_winograd<T>(g);
    case ConvAlgorithm::kWinograd:
    case ConvAlgorithm::kFilterGemm:
#if TAPEFLOW_GEMM_AVX2
      if (a == ConvAlgorithm::kFilterGemm && !filter_packed<T>(g))
        throw_forced_conv_algorithm(kKernel, "does not take this shape (C, F)");
      if (a == ConvAlgorithm::kWinograd && !std::is_same_v<T, float>) throw_forced_conv_algorithm(kKernel, "is for float only");
      return a;
#else
      throw_forced_conv_algorithm(kKernel, "needs the AVX2 copy (cpu_isa() >= avx2)");
#endif
    case ConvAlgorithm::kDirect:
    case ConvAlgorithm::kIm2col:
      return a;
    default:
      throw_forced_conv_algorithm(kKernel, "is not a filter-gradient algorithm (winograd, filter_gemm, direct, im2col)");
  }
}

// conv2d_max_pool2d: direct rows pooled in cache (C <= kDirectMaxChannels, a 2x2 stride-2 pool) |
// Winograd F(2x2, 3x3) fused with the pool | conv2d's own rule, then max_pool2d_with_argmax.
template <class T>
ConvAlgorithm pooled_algorithm(const Conv2DGeometry& g, const Conv2DGeometry& pool) {
  constexpr const char* kKernel = "conv2d_max_pool2d";
  const bool fused = direct(g) && pool_2x2(pool), winograd = std::is_same_v<T, float> && winograd_pool<T>(g, pool);
  switch (internal::forced_conv_algorithm()) {
    case ConvAlgorithm::kAuto:
      return fused ? ConvAlgorithm::kPoolFused : winograd ? ConvAlgorithm::kWinograd : forward_rule(g);
    case ConvAlgorithm::kPoolFused:
      if (!fused) throw_forced_conv_algorithm(kKernel, "does not take this shape (C <= 4, a 2x2 stride-2 pool)");
      return ConvAlgorithm::kPoolFused;
    case ConvAlgorithm::kWinograd:
      if (!winograd) throw_forced_conv_algorithm(kKernel, "does not take this shape (float 3x3 VALID, C and F packets)");
      return ConvAlgorithm::kWinograd;
    case ConvAlgorithm::kDirect:
      return ConvAlgorithm::kDirect;
    case ConvAlgorithm::kIgemm:
      return ConvAlgorithm::kIgemm;
    default:
      throw_forced_conv_algorithm(kKernel, "is not a pooled-forward algorithm (pool_fused, winograd, direct, igemm)");
  }
}

// conv2d's products by algorithm (kDirect, kPointwise or kIgemm).
template <class T>
void run_forward(ConvAlgorithm a, const T* x, const T* filter, T* y, const Conv2DGeometry& g,
                 const ConvEpilogue<T>& epilogue) {
  if (a == ConvAlgorithm::kDirect) {
    conv2d_direct(x, filter, y, g, epilogue);
  } else if (a == ConvAlgorithm::kPointwise) {
    const std::int64_t rows = g.out_pixels();
    matmul(x, filter, y, 1, rows, g.patch_size(), g.f, false, false, 0, 0);
    if (epilogue.bias || epilogue.relu)
      parallel_for(rows, std::max<std::int64_t>(1, (1 << 15) / g.f), [&](std::int64_t b, std::int64_t e) {
        apply_epilogue(y + b * g.f, e - b, g.f, epilogue);
      });
  } else {
    conv2d_igemm(x, filter, y, g, epilogue);
  }
}

}  // namespace

template <class T>
void conv2d(const T* x, const T* filter, T* y, const Conv2DGeometry& g, ConvEpilogue<T> epilogue) {
  if (g.out_pixels() == 0 || g.f == 0) return;
  run_forward(forward_algorithm(g), x, filter, y, g, epilogue);
}

template <class T>
void conv2d_backprop_input(const T* filter, const T* dy, T* dx, const Conv2DGeometry& g) {
  const std::int64_t rows = g.out_pixels(), k = g.patch_size();
  if (rows == 0 || g.f == 0) {
    std::fill(dx, dx + g.n * g.h * g.w * g.c, T(0));
    return;
  }
  switch (input_algorithm(g)) {
    case ConvAlgorithm::kPointwise:
      matmul(dy, filter, dx, 1, rows, g.f, k, false, true, 0, 0);
      return;
    case ConvAlgorithm::kIgemm:
      conv2d_backprop_input_igemm(filter, dy, dx, g);
      return;
    default:
      conv2d_backprop_input_im2col(filter, dy, dx, g);
  }
}

template <class T>
void conv2d_backprop_filter(const T* x, const T* dy, T* dfilter, const Conv2DGeometry& g) {
  const std::int64_t kf = g.patch_size() * g.f;
  if (g.out_pixels() == 0 || kf == 0) {
    std::fill(dfilter, dfilter + kf, T(0));
    return;
  }
  ConvAlgorithm a = filter_algorithm<T>(g);
#if TAPEFLOW_GEMM_AVX2
  if constexpr (std::is_same_v<T, float>)
    if (a == ConvAlgorithm::kWinograd) {
      // Over dy's nonzero extent, which must be even: forced, another extent is refused; from the
      // rule, it takes the next algorithm. An inf or NaN in the product: the next algorithm too.
      const bool forced = internal::forced_conv_algorithm() == ConvAlgorithm::kWinograd;
      const auto [kh, kw] = winograd_filter<T>(g) ? filter_kept_extent(x, dy, g) : std::pair<std::int64_t, std::int64_t>{1, 1};
      const bool even = kh % 2 == 0 && kw % 2 == 0 && kh > 0 && kw > 0;
      if (!even && forced) throw_forced_conv_algorithm("conv2d_backprop_filter", "does not take this shape (or dy's nonzero extent is odd)");
      if (even && conv2d_backprop_filter_winograd(x, dy, dfilter, g, kh, kw)) return;
      a = filter_rule_after_winograd<T>(g);
    }
  if (a == ConvAlgorithm::kFilterGemm) {  // writes every element: no zeroing first
    conv2d_backprop_filter_packed(x, dy, dfilter, g);
    return;
  }
#endif
  std::fill(dfilter, dfilter + kf, T(0));
  if (a == ConvAlgorithm::kDirect)
    conv2d_backprop_filter_direct(x, dy, dfilter, g);
  else
    conv2d_backprop_filter_im2col(x, dy, dfilter, g);
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
  ConvAlgorithm a = pooled_algorithm<T>(g, pool);
  if (a == ConvAlgorithm::kPoolFused) {
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
  if (a == ConvAlgorithm::kWinograd) {  // an inf or NaN in the product: conv2d's rule, then the pool
    if constexpr (std::is_same_v<T, float>)
      if (conv2d_max_pool2d_winograd(x, filter, bias, y, argmax, g, pool, relu)) return;
    a = forward_rule(g);
  }
  // From TBB's allocator, as tensors are: it keeps large blocks mapped between calls (operator new
  // went to mmap and paid ~1000 page faults per call for W8's conv2).
  const std::unique_ptr<T, void (*)(void*)> z(
      static_cast<T*>(scalable_aligned_malloc(static_cast<std::size_t>(g.out_pixels() * g.f) * sizeof(T), 64)),
      scalable_aligned_free);
  if (!z) throw std::bad_alloc();
  if (a == ConvAlgorithm::kIgemm) {
    // Only the rows and columns some window reads: a VALID pool drops W8's conv2's last row and
    // column (11 -> 5), a sixth of the product.
    const NeededLines need{std::min(g.ho, (pool.ho - 1) * pool.sh - pool.pad_top + pool.kh),
                           std::min(g.wo, (pool.wo - 1) * pool.sw - pool.pad_left + pool.kw)};
    conv2d_igemm(x, filter, z.get(), g, epilogue, need);
  } else {
    run_forward(a, x, filter, z.get(), g, epilogue);
  }
  max_pool2d_with_argmax(z.get(), y, argmax, pool);
  if (relu)
    parallel_for(pool.n * pool.ho, pool_row_grain(pool), [&](std::int64_t b, std::int64_t e) {
      apply_epilogue(y + b * pool.wo * pool.c, (e - b) * pool.wo, pool.c, activation);
    });
}

#define TAPEFLOW_INSTANTIATE(T)                                                                    \
  template void conv2d<T>(const T*, const T*, T*, const Conv2DGeometry&, ConvEpilogue<T>);         \
  template void conv2d_backprop_input<T>(const T*, const T*, T*, const Conv2DGeometry&);           \
  template void conv2d_backprop_filter<T>(const T*, const T*, T*, const Conv2DGeometry&);          \
  template void conv2d_max_pool2d<T>(const T*, const T*, const T*, T*, std::int32_t*, const Conv2DGeometry&, \
                                     const Conv2DGeometry&, bool);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
