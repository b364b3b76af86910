// Convolution and pooling kernels against naive float64 loops; thread-count determinism.
#include "tape/kernels/conv.h"

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tape/kernels/conv/internal/forced_algorithm.h"
#include "tape/kernels/nn.h"
#include "tape/kernels/parallel.h"
#include "tape/kernels/reduce.h"
#include "tests/kernels/reference.h"

namespace tapeflow::kernels {
namespace {

using testref::random_vector;

struct Case {
  std::int64_t n, h, w, c, kh, kw, f, sh, sw, dh, dw;
  const char* padding;
  std::int64_t pads[4] = {0, 0, 0, 0};
};

Conv2DGeometry geometry(const Case& k) {
  Conv2DGeometry g{.n = k.n, .h = k.h, .w = k.w, .c = k.c, .kh = k.kh, .kw = k.kw, .f = k.f,
                   .sh = k.sh, .sw = k.sw, .dh = k.dh, .dw = k.dw};
  const WindowDim r = window_dim("test", k.padding, k.h, k.kh, k.sh, k.dh, k.pads[0], k.pads[1]);
  const WindowDim c = window_dim("test", k.padding, k.w, k.kw, k.sw, k.dw, k.pads[2], k.pads[3]);
  g.ho = r.out;
  g.wo = c.out;
  g.pad_top = r.pad_before;
  g.pad_left = c.pad_before;
  return g;
}

// Calls f(x_index or -1, y_index, filter_index without the output channel) over every tap.
template <class F>
void for_taps(const Conv2DGeometry& g, F&& f) {
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t oh = 0; oh < g.ho; ++oh)
      for (std::int64_t ow = 0; ow < g.wo; ++ow)
        for (std::int64_t i = 0; i < g.kh; ++i)
          for (std::int64_t j = 0; j < g.kw; ++j) {
            const std::int64_t ih = oh * g.sh - g.pad_top + i * g.dh, iw = ow * g.sw - g.pad_left + j * g.dw;
            if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
            for (std::int64_t c = 0; c < g.c; ++c)
              f(((n * g.h + ih) * g.w + iw) * g.c + c, ((n * g.ho + oh) * g.wo + ow), (i * g.kw + j) * g.c + c);
          }
}

std::vector<double> ref_conv(const std::vector<double>& x, const std::vector<double>& f, const Conv2DGeometry& g) {
  std::vector<double> y(g.out_pixels() * g.f, 0.0);
  for_taps(g, [&](auto xi, auto p, auto k) {
    for (std::int64_t o = 0; o < g.f; ++o) y[p * g.f + o] += x[xi] * f[k * g.f + o];
  });
  return y;
}
std::vector<double> ref_backprop_input(const std::vector<double>& f, const std::vector<double>& dy,
                                       const Conv2DGeometry& g) {
  std::vector<double> dx(g.n * g.h * g.w * g.c, 0.0);
  for_taps(g, [&](auto xi, auto p, auto k) {
    for (std::int64_t o = 0; o < g.f; ++o) dx[xi] += dy[p * g.f + o] * f[k * g.f + o];
  });
  return dx;
}
std::vector<double> ref_backprop_filter(const std::vector<double>& x, const std::vector<double>& dy,
                                        const Conv2DGeometry& g) {
  std::vector<double> df(g.patch_size() * g.f, 0.0);
  for_taps(g, [&](auto xi, auto p, auto k) {
    for (std::int64_t o = 0; o < g.f; ++o) df[k * g.f + o] += x[xi] * dy[p * g.f + o];
  });
  return df;
}

template <class T>
void expect_near(const std::vector<T>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(static_cast<double>(got[i]), want[i], tol * (1 + std::abs(want[i]))) << "at " << i;
}

const std::vector<Case> kCases = {
    {2, 5, 5, 2, 3, 3, 3, 1, 1, 1, 1, "VALID"},
    {1, 6, 5, 2, 4, 4, 2, 2, 2, 1, 1, "SAME"},       // even kernel, asymmetric SAME
    {1, 7, 6, 1, 3, 2, 2, 1, 1, 2, 2, "SAME"},       // dilation 2
    {2, 3, 3, 3, 1, 1, 2, 1, 1, 1, 1, "VALID"},      // 1x1 (pointwise path)
    {1, 5, 4, 2, 1, 1, 2, 2, 2, 1, 1, "SAME"},       // 1x1 strided
    {1, 5, 6, 2, 3, 3, 2, 2, 1, 1, 1, "EXPLICIT", {1, 0, 2, 1}},
    {3, 20, 20, 8, 3, 3, 5, 1, 1, 1, 1, "VALID"},    // several im2col tiles
    {4, 30, 30, 16, 3, 3, 4, 1, 1, 1, 1, "SAME"},    // filter gradient: > kFilterWave tiles
    {2, 9, 9, 3, 5, 5, 4, 2, 2, 1, 1, "SAME"},       // DCGAN-like 5x5 stride 2
    // 128 channels with 3 filters (the patch-tile filter gradient with a 1152-value patch), 2400
    // rows, taps in the padding
    {6, 20, 20, 128, 3, 3, 3, 1, 1, 1, 1, "SAME"},
    // direct kernels (C <= kDirectMaxChannels): 20 channels = a full register block and a tail,
    // 26 output columns (not a multiple of the 4-pixel block), 104 output rows (several tiles)
    {4, 28, 28, 1, 3, 3, 20, 1, 1, 1, 1, "VALID"},
    // direct at the channel limit: even kernel, dilation 2 across rows, stride 2 across columns,
    // explicit paddings on all four sides
    {2, 11, 9, kDirectMaxChannels, 2, 3, 17, 1, 2, 2, 1, "EXPLICIT", {2, 1, 0, 3}},
    // just above it (GEMM path), DCGAN's 5x5 stride 2 SAME on one channel (direct)
    {2, 9, 8, kDirectMaxChannels + 1, 3, 3, 6, 1, 1, 1, 1, "SAME"},
    {3, 28, 28, 1, 5, 5, 64, 2, 2, 1, 1, "SAME"},
    // im2col (GEMM path) with padding on every side, a window wider than the padded edge, and
    // dilation across columns
    {2, 9, 10, 6, 3, 4, 5, 2, 2, 1, 1, "EXPLICIT", {0, 2, 3, 1}},
    {1, 4, 3, 6, 2, 5, 3, 1, 1, 1, 1, "EXPLICIT", {1, 1, 3, 3}},
    {1, 9, 9, 8, 3, 3, 4, 1, 1, 2, 2, "SAME"},
    // 7x7 outputs (49 pixels: not a multiple of the GEMM's 6-row tile) over 7 images, with a
    // short (72) and a long (1600) patch
    {7, 7, 7, 8, 3, 3, 5, 1, 1, 1, 1, "SAME"},
    {7, 14, 14, 64, 5, 5, 3, 2, 2, 1, 1, "SAME"},
    // indirect GEMM (C >= kIgemmMinOutChannels): stride and dilation on different axes with
    // explicit paddings (border classes and phase classes together), and a 1x1 stride-2 kernel
    // whose odd dx pixels no tap reaches (zeroed, not left as they were)
    {2, 11, 9, kIgemmMinOutChannels, 2, 3, 17, 1, 2, 2, 1, "EXPLICIT", {2, 1, 0, 3}},
    {1, 5, 4, kIgemmMinOutChannels, 1, 1, 3, 2, 2, 1, 1, "SAME"},
    // one image whose interior class (38 x 38 pixels) spans several work items
    {1, 40, 40, kIgemmMinOutChannels, 3, 3, 8, 1, 1, 1, 1, "SAME"},
    // filter gradient from patches packed straight from x (C a multiple of the GEMM's 16 float
    // columns, F >= 6): 3600 rows (8 partial sums of 450 rows), a partial
    // 2-row tile of dfilterᵀ; 5x5 stride 2 with 2 panels per tap; dilation and stride on
    // different axes under explicit paddings
    {4, 30, 30, 16, 3, 3, 8, 1, 1, 1, 1, "SAME"},
    {3, 14, 14, 32, 5, 5, 7, 2, 2, 1, 1, "SAME"},
    {2, 13, 12, 16, 3, 3, 6, 1, 2, 2, 1, "EXPLICIT", {1, 2, 0, 3}},
};

template <class T>
void check_against_reference(double tol) {
  for (const Case& k : kCases) {
    SCOPED_TRACE(::testing::Message() << "case " << k.n << "x" << k.h << "x" << k.w << "x" << k.c << " k" << k.kh
                                      << "x" << k.kw << " s" << k.sh << " d" << k.dh << " " << k.padding);
    const Conv2DGeometry g = geometry(k);
    const auto x = random_vector<T>(g.n * g.h * g.w * g.c, 1);
    const auto f = random_vector<T>(g.patch_size() * g.f, 2);
    const auto dy = random_vector<T>(g.out_pixels() * g.f, 3);
    const std::vector<double> xd(x.begin(), x.end()), fd(f.begin(), f.end()), dyd(dy.begin(), dy.end());
    std::vector<T> y(g.out_pixels() * g.f), dx(x.size(), T(7)), df(f.size(), T(7));
    conv2d(x.data(), f.data(), y.data(), g);
    expect_near(y, ref_conv(xd, fd, g), tol);
    conv2d_backprop_input(f.data(), dy.data(), dx.data(), g);
    expect_near(dx, ref_backprop_input(fd, dyd, g), tol);
    conv2d_backprop_filter(x.data(), dy.data(), df.data(), g);
    expect_near(df, ref_backprop_filter(xd, dyd, g), tol);
  }
}

TEST(ConvKernel, DoubleMatchesNaiveLoops) { check_against_reference<double>(1e-12); }
TEST(ConvKernel, FloatMatchesNaiveLoops) { check_against_reference<float>(2e-5); }

TEST(ConvKernel, BitIdenticalAcrossThreadCounts) {
  for (const Case& k : {kCases[6], kCases[7], kCases[8], kCases[9], kCases[10], kCases[11], kCases[13], kCases[17],
                        kCases[18], kCases[19], kCases[21], kCases[22], kCases[23], kCases[24]}) {
    const Conv2DGeometry g = geometry(k);
    const auto x = random_vector<float>(g.n * g.h * g.w * g.c, 4);
    const auto f = random_vector<float>(g.patch_size() * g.f, 5);
    const auto dy = random_vector<float>(g.out_pixels() * g.f, 6);
    std::vector<float> out[2][3];
    for (int t = 0; t < 2; ++t) {
      const int previous = set_num_threads(t + 1);
      out[t][0].resize(g.out_pixels() * g.f);
      out[t][1].resize(x.size());
      out[t][2].resize(f.size());
      conv2d(x.data(), f.data(), out[t][0].data(), g);
      conv2d_backprop_input(f.data(), dy.data(), out[t][1].data(), g);
      conv2d_backprop_filter(x.data(), dy.data(), out[t][2].data(), g);
      set_num_threads(previous);
    }
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(0, std::memcmp(out[0][i].data(), out[1][i].data(), out[0][i].size() * sizeof(float))) << i;
  }
}

// conv2d_backprop_input's indirect GEMM sums each dx element as one multiply-add chain from 0, taps
// in (i, j) order and channels ascending: bit for bit the chain below, fused (std::fma) where the
// kernels' level fuses (AVX2 and up), a multiply then an add at the baseline level. With dy's last row and column zero
// (a max pool's gradient: no window reads them) it leaves those taps out, and the bits stay the
// same; a non-finite filter value keeps them (0 * inf is NaN).
template <class T>
void check_backprop_input_chain(bool zero_lines, bool inf_filter, bool lone_value = false) {
  const Conv2DGeometry g = geometry({3, 13, 13, 16, 3, 3, 24, 1, 1, 1, 1, "VALID"});  // dy 11 x 11
  auto f = random_vector<T>(g.patch_size() * g.f, 41);
  auto dy = random_vector<T>(g.out_pixels() * g.f, 42);
  if (inf_filter) f[5] = std::numeric_limits<T>::infinity();
  if (zero_lines)
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t a = 0; a < g.ho; ++a)
        for (std::int64_t b = 0; b < g.wo; ++b)
          if (a == g.ho - 1 || b == g.wo - 1) std::fill_n(dy.begin() + ((n * g.ho + a) * g.wo + b) * g.f, g.f, T(0));
  // One nonzero on those lines (2.0: a single exponent bit) and they must all be kept.
  if (lone_value) dy[static_cast<std::size_t>(((g.n * g.ho - 1) * g.wo + g.wo - 1) * g.f)] = T(2);
  std::vector<T> dx(g.n * g.h * g.w * g.c), want(dx.size());
  conv2d_backprop_input(f.data(), dy.data(), dx.data(), g);
  const bool fused = tapeflow::internal::cpu_isa_fuses_multiply_add(cpu_isa());
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t y = 0; y < g.h; ++y)
      for (std::int64_t x = 0; x < g.w; ++x)
        for (std::int64_t c = 0; c < g.c; ++c) {
          T acc = T(0);
          for (std::int64_t i = 0; i < g.kh; ++i)
            for (std::int64_t j = 0; j < g.kw; ++j) {
              const std::int64_t a = y - i, b = x - j;
              if (a < 0 || a >= g.ho || b < 0 || b >= g.wo) continue;
              for (std::int64_t o = 0; o < g.f; ++o) {
                const T u = dy[((n * g.ho + a) * g.wo + b) * g.f + o], v = f[((i * g.kw + j) * g.c + c) * g.f + o];
                acc = fused ? std::fma(u, v, acc) : acc + u * v;  // no FMA instruction at baseline to contract to
              }
            }
          want[((n * g.h + y) * g.w + x) * g.c + c] = acc;
        }
  EXPECT_EQ(0, std::memcmp(dx.data(), want.data(), dx.size() * sizeof(T)));
  if (inf_filter && zero_lines) {  // dx at dy's zero corner, channel 0, reads it through the inf
    EXPECT_TRUE(std::isnan(dx[static_cast<std::size_t>(((g.n * g.h - g.h + g.ho - 1) * g.w + g.wo - 1) * g.c)]));
  }
}

TEST(ConvKernel, BackpropInputIsOneChainAndSkipsZeroLinesExactly) {
  for (bool zero_lines : {false, true})
    for (bool inf_filter : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "zero lines " << zero_lines << ", inf filter " << inf_filter);
      check_backprop_input_chain<float>(zero_lines, inf_filter);
      check_backprop_input_chain<double>(zero_lines, inf_filter);
    }
  check_backprop_input_chain<float>(true, false, true);
  check_backprop_input_chain<double>(true, false, true);
}

// Float 3x3 VALID filter gradients whose read part of dy has even sides (a 2x2 pool's gradient
// leaves the last row and column zero) run Winograd F(3x3, 2x2): within rounding of the float64
// loops, the same bits on one thread as on two. An inf in x (one channel) falls back to the direct
// product: that channel's values are inf or NaN exactly where the loops' are (the transforms would
// turn inf into NaN), the others finite.
TEST(ConvKernel, FloatWinogradFilterGradientWithinRoundingAndExactFallback) {
  struct W {
    Case conv;
    bool zero_lines;
  };
  for (const W& k : {W{{9, 13, 13, 32, 3, 3, 64, 1, 1, 1, 1, "VALID"}, true},   // W8's conv2: 10 x 10 of 11 x 11, 3 units
                     W{{2, 10, 12, 16, 3, 3, 24, 1, 1, 1, 1, "VALID"}, false},  // 8 x 10: every pixel
                     W{{5, 9, 7, 24, 3, 3, 16, 1, 1, 1, 1, "VALID"}, true}})    // 6 x 4 of 7 x 5
    for (bool with_inf : {false, true}) {
      SCOPED_TRACE(::testing::Message() << k.conv.n << "x" << k.conv.h << "x" << k.conv.w << "x" << k.conv.c << " -> "
                                        << k.conv.f << (with_inf ? ", inf in x" : ""));
      const Conv2DGeometry g = geometry(k.conv);
      auto x = random_vector<float>(g.n * g.h * g.w * g.c, 61);
      auto dy = random_vector<float>(g.out_pixels() * g.f, 62);
      if (k.zero_lines)
        for (std::int64_t p = 0; p < g.out_pixels(); ++p)
          if (p % (g.ho * g.wo) / g.wo == g.ho - 1 || p % g.wo == g.wo - 1) std::fill_n(dy.begin() + p * g.f, g.f, 0.0f);
      const std::int64_t c_inf = 5;
      if (with_inf) x[static_cast<std::size_t>(((1 * g.h + 2) * g.w + 3) * g.c + c_inf)] = INFINITY;
      std::vector<float> got(static_cast<std::size_t>(g.patch_size() * g.f));
      conv2d_backprop_filter(x.data(), dy.data(), got.data(), g);
      std::vector<float> one_thread(got.size());  // threads own k's, not blocks: the same bits
      tbb::task_arena(1).execute([&] { conv2d_backprop_filter(x.data(), dy.data(), one_thread.data(), g); });
      EXPECT_EQ(0, std::memcmp(one_thread.data(), got.data(), got.size() * sizeof(float)));
      std::vector<double> want(got.size(), 0.0);
      for (std::int64_t n = 0; n < g.n; ++n)
        for (std::int64_t a = 0; a < g.ho; ++a)
          for (std::int64_t b = 0; b < g.wo; ++b)
            for (std::int64_t t = 0; t < 9; ++t)
              for (std::int64_t c = 0; c < g.c; ++c) {
                const double xv = x[static_cast<std::size_t>(((n * g.h + a + t / 3) * g.w + b + t % 3) * g.c + c)];
                for (std::int64_t f = 0; f < g.f; ++f)
                  want[static_cast<std::size_t>((t * g.c + c) * g.f + f)] +=
                      xv * double(dy[static_cast<std::size_t>(((n * g.ho + a) * g.wo + b) * g.f + f)]);
              }
      std::int64_t specials = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(want[i])) {
          ++specials;
          EXPECT_EQ(std::isnan(got[i]), std::isnan(want[i])) << i;
          EXPECT_EQ(std::isinf(got[i]) && got[i] > 0, std::isinf(want[i]) && want[i] > 0) << i;
          continue;
        }
        // Sums of N Ho Wo products of values in [-1, 1]: float rounding well under 2e-6 of that.
        ASSERT_NEAR(got[i], want[i], 2e-6 * static_cast<double>(g.n * g.ho * g.wo)) << i;
      }
      EXPECT_EQ(specials > 0, with_inf);
    }
}

// conv2d_backprop_filter (packed GEMM path: C a multiple of the panel width) leaves out the pixels
// on dy's all-zero last row and column, the same bits: against the same product with those pixels
// kept (an inf in x on one channel, read only by them, keeps them all; the other channels' sums are
// then the unskipped chains), and against the float64 loops.
template <class T>
void check_backprop_filter_zero_lines(double tol) {
  // dy 11 x 11, 363 pixels; 20 output channels, not whole packets, keep floats off the Winograd path.
  const Conv2DGeometry g = geometry({3, 13, 13, 16, 3, 3, 20, 1, 1, 1, 1, "VALID"});
  auto x = random_vector<T>(g.n * g.h * g.w * g.c, 51);
  auto dy = random_vector<T>(g.out_pixels() * g.f, 52);
  for (std::int64_t p = 0; p < g.out_pixels(); ++p)
    if (p % (g.ho * g.wo) / g.wo == g.ho - 1 || p % g.wo == g.wo - 1) std::fill_n(dy.begin() + p * g.f, g.f, T(0));
  std::vector<T> skipped(g.patch_size() * g.f), kept(skipped.size());
  conv2d_backprop_filter(x.data(), dy.data(), skipped.data(), g);
  const std::int64_t c_inf = 3;
  auto x_inf = x;
  x_inf[static_cast<std::size_t>(((0 * g.h + 12) * g.w + 5) * g.c + c_inf)] = std::numeric_limits<T>::infinity();
  conv2d_backprop_filter(x_inf.data(), dy.data(), kept.data(), g);
  std::int64_t nans = 0;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const std::int64_t c = static_cast<std::int64_t>(i) / g.f % g.c;
    if (c == c_inf) {
      nans += std::isnan(kept[i]);
      continue;
    }
    ASSERT_EQ(0, std::memcmp(&kept[i], &skipped[i], sizeof(T))) << i;
  }
  EXPECT_GT(nans, 0);  // 0 * inf: the zero pixels were kept there
  std::vector<double> want(skipped.size(), 0.0);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t a = 0; a < g.ho; ++a)
      for (std::int64_t b = 0; b < g.wo; ++b)
        for (std::int64_t t = 0; t < g.kh * g.kw; ++t)
          for (std::int64_t c = 0; c < g.c; ++c)
            for (std::int64_t f = 0; f < g.f; ++f)
              want[static_cast<std::size_t>((t * g.c + c) * g.f + f)] +=
                  static_cast<double>(x[static_cast<std::size_t>(((n * g.h + a + t / g.kw) * g.w + b + t % g.kw) * g.c + c)]) *
                  static_cast<double>(dy[static_cast<std::size_t>(((n * g.ho + a) * g.wo + b) * g.f + f)]);
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(static_cast<double>(skipped[i]), want[i], tol) << i;
}

TEST(ConvKernel, BackpropFilterSkipsZeroLinesExactly) {
  check_backprop_filter_zero_lines<float>(1e-4);
  check_backprop_filter_zero_lines<double>(1e-12);
}

TEST(WindowDim, TensorFlowRules) {
  // SAME: out = ceil(in / s); pad_total = max((out - 1) s + eff - in, 0), the extra pixel after.
  WindowDim d = window_dim("t", "SAME", 5, 4, 2, 1);
  EXPECT_EQ(d.out, 3);
  EXPECT_EQ(d.pad_before, 1);
  EXPECT_EQ(d.pad_after, 2);
  d = window_dim("t", "SAME", 28, 5, 2, 1);  // DCGAN: 28 -> 14, pads 1 / 2
  EXPECT_EQ(d.out, 14);
  EXPECT_EQ(d.pad_before, 1);
  EXPECT_EQ(d.pad_after, 2);
  d = window_dim("t", "SAME", 7, 3, 1, 2);  // dilated: eff 5, pads 2 / 2
  EXPECT_EQ(d.out, 7);
  EXPECT_EQ(d.pad_before, 2);
  d = window_dim("t", "VALID", 28, 3, 1, 1);
  EXPECT_EQ(d.out, 26);
  d = window_dim("t", "VALID", 11, 2, 2, 1);  // pooling floors: 11 -> 5
  EXPECT_EQ(d.out, 5);
  d = window_dim("t", "EXPLICIT", 5, 3, 2, 1, 1, 0);
  EXPECT_EQ(d.out, 2);
  EXPECT_THROW(window_dim("conv2d", "VALID", 2, 3, 1, 1), std::invalid_argument);
  EXPECT_THROW(window_dim("conv2d", "same", 5, 3, 1, 1), std::invalid_argument);
  EXPECT_THROW(window_dim("conv2d", "SAME", 5, 3, 0, 1), std::invalid_argument);
  EXPECT_THROW(window_dim("conv2d", "EXPLICIT", 5, 3, 1, 1, -1, 0), std::invalid_argument);
  // Window, stride or padding sizes whose arithmetic leaves int64 (signed overflow before).
  const std::int64_t big = std::int64_t{1} << 62;
  for (const char* padding : {"VALID", "SAME"}) {
    try {
      window_dim("conv2d", padding, 5, big, 1, 4);
      ADD_FAILURE() << padding << ": no error";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("sizes overflow int64"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(window_dim("conv2d", "SAME", big, 1, INT64_MAX, 1), std::invalid_argument);
  EXPECT_THROW(window_dim("conv2d", "EXPLICIT", big, 1, 1, 1, big, big), std::invalid_argument);
  try {
    window_dim("conv2d", "VALID", 2, 3, 1, 1);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("input size 2"), std::string::npos) << e.what();
  }
}

// Naive pooling references.
template <class F>
void for_pool_windows(const Conv2DGeometry& g, F&& f) {
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t oh = 0; oh < g.ho; ++oh)
      for (std::int64_t ow = 0; ow < g.wo; ++ow)
        for (std::int64_t c = 0; c < g.c; ++c) {
          std::vector<std::int64_t> taps;
          for (std::int64_t i = 0; i < g.kh; ++i)
            for (std::int64_t j = 0; j < g.kw; ++j) {
              const std::int64_t ih = oh * g.sh - g.pad_top + i, iw = ow * g.sw - g.pad_left + j;
              if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) taps.push_back(((n * g.h + ih) * g.w + iw) * g.c + c);
            }
          f(((n * g.ho + oh) * g.wo + ow) * g.c + c, taps);
        }
}

// Against the naive loops in double; float runs the 8-lane packets (the max-pool values and
// routing are exact in float too; averages to float rounding).
template <class T>
void check_pool_against_reference(double tol) {
  const std::vector<Case> cases = {{2, 6, 6, 3, 2, 2, 3, 2, 2, 1, 1, "VALID"},
                                   {1, 7, 5, 2, 3, 3, 2, 2, 2, 1, 1, "SAME"},
                                   {2, 5, 6, 2, 3, 2, 2, 1, 1, 1, 1, "SAME"},
                                   {1, 11, 11, 4, 2, 2, 4, 2, 2, 1, 1, "VALID"},
                                   // channels across whole packets and a tail; overlapping windows
                                   {2, 7, 7, 11, 2, 2, 11, 2, 2, 1, 1, "VALID"},
                                   {1, 6, 5, 9, 3, 3, 9, 1, 1, 1, 1, "SAME"},
                                   // windows that tile the input (the gradient assigns, no zeroing)
                                   {2, 8, 6, 19, 2, 2, 19, 2, 2, 1, 1, "VALID"},
                                   // 2x2 stride 2 (the fixed-tap kernels) with only the height, or
                                   // only the width, odd: that row or column gets no gradient
                                   {3, 5, 8, 8, 2, 2, 8, 2, 2, 1, 1, "VALID"},
                                   {2, 4, 9, 16, 2, 2, 16, 2, 2, 1, 1, "SAME"},
                                   // a gradient past kConvStreamBytes (written with streaming
                                   // stores) with an odd height (its last row zeroed as well)
                                   {16, 65, 64, 32, 2, 2, 32, 2, 2, 1, 1, "VALID"}};
  static_assert(16 * 65 * 64 * 32 * sizeof(float) >= kConvStreamBytes);
  for (const Case& k : cases) {
    SCOPED_TRACE(::testing::Message() << "case " << k.n << "x" << k.h << "x" << k.w << "x" << k.c << " k" << k.kh
                                      << "x" << k.kw << " s" << k.sh << " " << k.padding);
    const Conv2DGeometry g = geometry(k);
    const auto x = random_vector<T>(g.n * g.h * g.w * g.c, 8);
    const auto dy = random_vector<T>(g.out_pixels() * g.c, 9);
    const auto ddx = random_vector<T>(x.size(), 10);
    std::vector<T> max_y(dy.size()), avg_y(dy.size()), gg(dy.size());
    std::vector<double> want_max(dy.size()), want_avg(dy.size()), want_gg(dy.size());
    std::vector<T> max_dx(x.size(), T(7)), avg_dx(x.size());
    std::vector<double> want_max_dx(x.size(), 0.0), want_avg_dx(x.size(), 0.0);
    std::vector<std::int32_t> want_argmax(dy.size());
    for_pool_windows(g, [&](std::int64_t o, const std::vector<std::int64_t>& taps) {
      std::int64_t best = taps[0];
      double sum = 0;
      for (auto t : taps) {
        if (x[t] > x[best]) best = t;
        sum += x[t];
      }
      want_max[o] = x[best];
      want_argmax[o] = static_cast<std::int32_t>(best - o / (g.ho * g.wo * g.c) * g.h * g.w * g.c);
      want_gg[o] = ddx[best];
      want_max_dx[best] += dy[o];
      want_avg[o] = sum / static_cast<double>(taps.size());
      for (auto t : taps) want_avg_dx[t] += dy[o] / static_cast<double>(taps.size());
    });
    max_pool2d(x.data(), max_y.data(), g);
    avg_pool2d(x.data(), avg_y.data(), g);
    {
      // Into a packet-aligned buffer, as tensors are (the streaming stores need it).
      std::vector<T, Eigen::aligned_allocator<T>> aligned(max_dx.begin(), max_dx.end());
      max_pool2d_grad(x.data(), dy.data(), aligned.data(), g);
      std::copy(aligned.begin(), aligned.end(), max_dx.begin());
    }
    max_pool2d_grad_grad(x.data(), ddx.data(), gg.data(), g);
    avg_pool2d_grad(dy.data(), avg_dx.data(), g);
    expect_near(max_y, want_max, tol);
    expect_near(avg_y, want_avg, tol);
    expect_near(max_dx, want_max_dx, tol);
    expect_near(gg, want_gg, tol);
    expect_near(avg_dx, want_avg_dx, tol);

    // The argmax kernels: TF's in-image indices, and bit for bit the values of the kernels above.
    std::vector<T> arg_y(dy.size()), arg_gg(dy.size());
    std::vector<std::int32_t> argmax(dy.size(), -1);
    max_pool2d_with_argmax(x.data(), arg_y.data(), argmax.data(), g);
    EXPECT_EQ(argmax, want_argmax);
    EXPECT_EQ(0, std::memcmp(arg_y.data(), max_y.data(), max_y.size() * sizeof(T)));
    std::vector<T, Eigen::aligned_allocator<T>> arg_dx(x.size(), T(7));
    EXPECT_TRUE(max_pool2d_grad_with_argmax(dy.data(), want_argmax.data(), arg_dx.data(), g));
    EXPECT_EQ(0, std::memcmp(arg_dx.data(), max_dx.data(), max_dx.size() * sizeof(T)));
    EXPECT_TRUE(max_pool2d_grad_grad_with_argmax(ddx.data(), want_argmax.data(), arg_gg.data(), g));
    // An index outside its window (one image further, then the neighbouring channel) is refused,
    // never followed.
    for (std::int32_t shift : {static_cast<std::int32_t>(g.h * g.w * g.c), std::int32_t{1}}) {
      for (std::size_t at : {std::size_t{0}, want_argmax.size() - 1}) {
        auto bad = want_argmax;
        bad[at] += at == 0 ? shift : -shift;
        EXPECT_FALSE(max_pool2d_grad_with_argmax(dy.data(), bad.data(), arg_dx.data(), g)) << shift << " " << at;
        EXPECT_FALSE(max_pool2d_grad_grad_with_argmax(ddx.data(), bad.data(), arg_gg.data(), g)) << shift << " " << at;
      }
    }
    EXPECT_EQ(0, std::memcmp(arg_gg.data(), gg.data(), gg.size() * sizeof(T)));
  }
}

// conv2d_max_pool2d: bit for bit conv2d (bias epilogue) then max_pool2d_with_argmax, on the fused
// path (direct kernel, 2x2 stride-2 pool: odd sizes leave a row / column out) and on the temporary
// path (GEMM convolution, computed only where a window reads it, or an overlapping pool);
// integer-valued inputs make tied maxima.
template <class T>
void check_conv_max_pool() {
  struct ConvPool {
    Case conv;
    std::int64_t k, s;
    const char* padding;
  };
  const std::vector<ConvPool> cases = {
      {{3, 28, 28, 1, 3, 3, 32, 1, 1, 1, 1, "VALID"}, 2, 2, "VALID"},   // W8's conv1: fused
      {{2, 9, 12, 3, 3, 3, 10, 1, 1, 1, 1, "SAME"}, 2, 2, "VALID"},     // odd height, 10 channels
      {{2, 12, 11, 2, 5, 5, 7, 2, 2, 1, 1, "SAME"}, 2, 2, "VALID"},     // stride 2, odd width
      {{2, 9, 9, 8, 3, 3, 12, 1, 1, 1, 1, "VALID"}, 2, 2, "VALID"},     // GEMM conv: temporary, last row unread
      {{2, 12, 11, 8, 3, 3, 12, 1, 1, 1, 1, "VALID"}, 3, 3, "VALID"},   // GEMM conv, 3x3 pool: last row unread
      {{2, 9, 9, 8, 3, 3, 12, 1, 1, 1, 1, "VALID"}, 2, 2, "SAME"},      // GEMM conv: every row read
      {{1, 10, 10, 1, 3, 3, 9, 1, 1, 1, 1, "SAME"}, 3, 2, "SAME"}};     // overlapping windows
  for (const ConvPool& k : cases) {
    SCOPED_TRACE(::testing::Message() << "conv " << k.conv.n << "x" << k.conv.h << "x" << k.conv.w << "x"
                                      << k.conv.c << " -> " << k.conv.f << ", pool " << k.k << " s" << k.s);
    const Conv2DGeometry g = geometry(k.conv);
    const Conv2DGeometry pg =
        geometry({g.n, g.ho, g.wo, g.f, k.k, k.k, g.f, k.s, k.s, 1, 1, k.padding});
    auto x = random_vector<T>(g.n * g.h * g.w * g.c, 21);
    auto f = random_vector<T>(g.kh * g.kw * g.c * g.f, 22);
    auto b = random_vector<T>(g.f, 23);
    for (auto* v : {&x, &f, &b})
      for (T& e : *v) e = std::round(e * 2);
    std::vector<T> z(g.out_pixels() * g.f), want(pg.out_pixels() * pg.c), got(want.size(), T(7));
    std::vector<std::int32_t> want_arg(want.size()), got_arg(want.size(), -1);
    conv2d(x.data(), f.data(), z.data(), g, ConvEpilogue<T>{b.data(), false});
    max_pool2d_with_argmax(z.data(), want.data(), want_arg.data(), pg);
    conv2d_max_pool2d(x.data(), f.data(), b.data(), got.data(), got_arg.data(), g, pg);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(T)));
    EXPECT_EQ(got_arg, want_arg);
    std::vector<T> plain(want.size());
    max_pool2d(z.data(), plain.data(), pg);
    EXPECT_EQ(0, std::memcmp(plain.data(), want.data(), want.size() * sizeof(T)));
    // Ties happened (else the test says nothing about the tap rule).
    // The first maximum in window order, as max_pool2d_grad's rule; ties happened (else the test
    // says nothing about that rule).
    std::int64_t ties = 0;
    for_pool_windows(pg, [&](std::int64_t o, const std::vector<std::int64_t>& taps) {
      std::int64_t best = taps[0];
      for (auto t : taps)
        if (z[t] > z[best]) best = t;
      EXPECT_EQ(got_arg[o], best - o / (pg.ho * pg.wo * pg.c) * pg.h * pg.w * pg.c) << o;
      ties += std::count_if(taps.begin(), taps.end(), [&](std::int64_t t) { return z[t] == want[o]; }) > 1;
    });
    EXPECT_GT(ties, 0);
  }
}

TEST(ConvMaxPoolKernel, BitIdenticalToConvThenPool) {
  check_conv_max_pool<double>();
  check_conv_max_pool<float>();
}

// Float 3x3 VALID convolutions under a 2x2 stride-2 pool go through Winograd F(2x2, 3x3): within
// rounding of conv2d then max_pool2d_with_argmax (the same argmax wherever the window's top two
// values are apart), with and without bias and relu, an odd size leaving a row and a column out.
// An inf in x or NaN in the filter (the transforms would turn inf into NaN) falls back to the
// direct product: then bit for bit.
TEST(ConvMaxPoolKernel, FloatWinogradUnderThePoolWithinRoundingAndExactFallback) {
  const std::vector<Case> cases = {{3, 13, 13, 32, 3, 3, 64, 1, 1, 1, 1, "VALID"},   // W8's conv2
                                   {2, 12, 9, 16, 3, 3, 16, 1, 1, 1, 1, "VALID"},    // 10x7: last column unread
                                   {1, 7, 8, 24, 3, 3, 40, 1, 1, 1, 1, "VALID"}};    // 5x6: last row unread
  for (const Case& k : cases)
    for (int variant = 0; variant < 5; ++variant) {  // 0 bias, 1 bias+relu, 2 no bias, 3 inf in x, 4 NaN in filter
      SCOPED_TRACE(::testing::Message() << k.n << "x" << k.h << "x" << k.w << "x" << k.c << " -> " << k.f
                                        << " variant " << variant);
      const Conv2DGeometry g = geometry(k);
      const Conv2DGeometry pg = geometry({g.n, g.ho, g.wo, g.f, 2, 2, g.f, 2, 2, 1, 1, "VALID"});
      auto x = random_vector<float>(g.n * g.h * g.w * g.c, 31);
      auto f = random_vector<float>(g.kh * g.kw * g.c * g.f, 32);
      auto b = random_vector<float>(g.f, 33);
      if (variant == 3) x[static_cast<std::size_t>((g.n - 1) * g.h * g.w * g.c + 2 * g.w * g.c + 5)] = INFINITY;
      if (variant == 4) f[7] = NAN;
      const bool relu = variant == 1;
      const float* bias = variant == 2 ? nullptr : b.data();
      std::vector<float> z(static_cast<std::size_t>(g.out_pixels() * g.f)), want(static_cast<std::size_t>(pg.out_pixels() * pg.c));
      std::vector<float> got(want.size(), 7.0f);
      std::vector<std::int32_t> want_arg(want.size()), got_arg(want.size(), -1);
      conv2d(x.data(), f.data(), z.data(), g, ConvEpilogue<float>{bias, false});
      max_pool2d_with_argmax(z.data(), want.data(), want_arg.data(), pg);
      if (relu)
        for (float& v : want) v = v > 0.0f ? v : 0.0f;
      conv2d_max_pool2d(x.data(), f.data(), bias, got.data(), got_arg.data(), g, pg, relu);
      if (variant >= 3) {
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
        EXPECT_EQ(got_arg, want_arg);
        continue;
      }
      std::int64_t exact = 0, apart = 0;
      for_pool_windows(pg, [&](std::int64_t o, const std::vector<std::int64_t>& taps) {
        const std::size_t i = static_cast<std::size_t>(o);
        // Sums of 9 C products of values in [-1, 1]: both sides round at about eps * 9 C / 4 (~4e-6 seen).
        ASSERT_NEAR(got[i], want[i], 3e-5f) << o;
        exact += got[i] == want[i];
        float second = -INFINITY;  // the window's runner-up
        const std::int64_t image = o / (pg.ho * pg.wo * pg.c) * pg.h * pg.w * pg.c;
        for (auto t : taps)
          if (t - image != want_arg[i]) second = std::max(second, z[static_cast<std::size_t>(t)]);
        if (z[static_cast<std::size_t>(want_arg[i] + image)] - second > 1e-4f) {
          ++apart;
          EXPECT_EQ(got_arg[i], want_arg[i]) << o;
        }
      });
      EXPECT_GT(apart, static_cast<std::int64_t>(want.size()) * 9 / 10);
      // Rounding differs somewhere (else this test is not looking at the Winograd path).
      EXPECT_LT(exact, static_cast<std::int64_t>(want.size()));
    }
}

// conv2d_backprop_filter_bias_with_argmax: bit for bit max_pool2d_grad_with_argmax, then
// conv2d_backprop_filter and reduce_sum of dz over its pixels, on the fast path (direct kernel, 2x2
// stride-2 pool: odd sizes leave a row / column in no window; enough pixels for reduce_sum's
// chunked partials; channels past a whole packet) and on the temporary path (GEMM convolution, an
// overlapping pool, one output channel); an index outside its window is refused.
template <class T>
void check_filter_bias_with_argmax() {
  struct ConvPool {
    Case conv;
    std::int64_t k, s;
  };
  const std::vector<ConvPool> cases = {
      {{40, 28, 28, 1, 3, 3, 32, 1, 1, 1, 1, "VALID"}, 2, 2},  // W8's conv1: bias partials within and across tiles
      {{2, 9, 12, 3, 3, 3, 10, 1, 1, 1, 1, "SAME"}, 2, 2},    // odd height, 10 channels
      {{3, 12, 11, 2, 5, 5, 7, 2, 2, 1, 1, "SAME"}, 2, 2},    // stride 2, odd width
      {{2, 9, 9, 8, 3, 3, 12, 1, 1, 1, 1, "VALID"}, 2, 2},    // GEMM conv: temporary
      {{2, 10, 10, 1, 3, 3, 9, 1, 1, 1, 1, "SAME"}, 3, 2},    // overlapping windows: temporary
      {{40, 10, 10, 2, 3, 3, 1, 1, 1, 1, 1, "SAME"}, 2, 2}};  // one channel: temporary
  for (const ConvPool& k : cases) {
    SCOPED_TRACE(::testing::Message() << "conv " << k.conv.n << "x" << k.conv.h << "x" << k.conv.w << "x"
                                      << k.conv.c << " -> " << k.conv.f << ", pool " << k.k << " s" << k.s);
    const Conv2DGeometry g = geometry(k.conv);
    const Conv2DGeometry pg = geometry({g.n, g.ho, g.wo, g.f, k.k, k.k, g.f, k.s, k.s, 1, 1, "VALID"});
    auto x = random_vector<T>(g.n * g.h * g.w * g.c, 31);
    auto z = random_vector<T>(g.out_pixels() * g.f, 32);
    auto dy = random_vector<T>(pg.out_pixels() * pg.c, 33);
    for (T& e : z) e = std::round(e * 2);  // ties
    std::vector<T> pooled(dy.size());
    std::vector<std::int32_t> argmax(dy.size());
    max_pool2d_with_argmax(z.data(), pooled.data(), argmax.data(), pg);
    for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "relu" : "linear");
    // With relu: dy is the gradient at relu(pooled), masked by relu_grad first.
    std::vector<T> y(pooled.size()), masked(dy.size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = pooled[i] > T(0) ? pooled[i] : T(0);
    relu_grad(dy.data(), y.data(), masked.data(), static_cast<std::int64_t>(dy.size()));
    std::vector<T, Eigen::aligned_allocator<T>> dz(z.size());
    ASSERT_TRUE(max_pool2d_grad_with_argmax(relu ? masked.data() : dy.data(), argmax.data(), dz.data(), pg));
    std::vector<T> want_f(g.patch_size() * g.f), want_b(g.f), got_f(want_f.size(), T(7)), got_b(g.f, T(7));
    conv2d_backprop_filter(x.data(), dz.data(), want_f.data(), g);
    reduce_sum(dz.data(), Shape{g.n, g.ho, g.wo, g.f}, 7u, want_b.data());
    for (int threads : {1, 2}) {
      const int previous = set_num_threads(threads);
      const bool ok = conv2d_backprop_filter_bias_with_argmax(x.data(), dy.data(), argmax.data(), got_f.data(),
                                                              got_b.data(), g, pg, relu ? y.data() : nullptr);
      set_num_threads(previous);
      ASSERT_TRUE(ok);
      EXPECT_EQ(0, std::memcmp(got_f.data(), want_f.data(), want_f.size() * sizeof(T))) << threads;
      EXPECT_EQ(0, std::memcmp(got_b.data(), want_b.data(), want_b.size() * sizeof(T))) << threads;
    }
    auto bad = argmax;
    bad.back() += static_cast<std::int32_t>(pg.h * pg.w * pg.c);  // one image further
    EXPECT_FALSE(conv2d_backprop_filter_bias_with_argmax(x.data(), dy.data(), bad.data(), got_f.data(),
                                                         got_b.data(), g, pg, relu ? y.data() : nullptr));
    }
  }
}

TEST(ConvMaxPoolKernel, FilterAndBiasGradientsFromTheArgmaxBitIdentical) {
  check_filter_bias_with_argmax<double>();
  check_filter_bias_with_argmax<float>();
}

TEST(PoolKernel, MatchesNaiveLoops) {
  check_pool_against_reference<double>(1e-14);
  check_pool_against_reference<float>(1e-6);
}

TEST(PoolKernel, TiesGoToTheFirstMaximumAndSameAverageCountsUnpaddedOnly) {
  const Conv2DGeometry g = geometry({1, 3, 3, 1, 2, 2, 1, 2, 2, 1, 1, "SAME"});  // 3 -> 2, pad after
  const std::vector<double> x(9, 1.0), dy = {1, 2, 3, 4};
  std::vector<double> dx(9), y(4);
  max_pool2d_grad(x.data(), dy.data(), dx.data(), g);
  EXPECT_EQ(dx, (std::vector<double>{1, 0, 2, 0, 0, 0, 3, 0, 4}));
  avg_pool2d(x.data(), y.data(), g);
  EXPECT_EQ(y, (std::vector<double>{1, 1, 1, 1}));  // not 0.5 / 0.25 at the padded edges
  // The same in float with 9 channels (one 8-lane packet and a tail), windows that tile the input:
  // every channel's gradient goes to its window's first tap, and the second derivative reads it.
  const Conv2DGeometry t = geometry({1, 4, 4, 9, 2, 2, 9, 2, 2, 1, 1, "VALID"});
  const std::vector<float> ones(16 * 9, 1.0f), d(4 * 9, 2.0f);
  std::vector<float> grad(16 * 9, 7.0f), picked(4 * 9);
  max_pool2d_grad(ones.data(), d.data(), grad.data(), t);
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t c = 0; c < 9; ++c)
        ASSERT_EQ(grad[static_cast<std::size_t>((i * 4 + j) * 9 + c)], i % 2 == 0 && j % 2 == 0 ? 2.0f : 0.0f)
            << i << " " << j << " " << c;
  std::vector<float> ddx(16 * 9);
  for (std::size_t q = 0; q < ddx.size(); ++q) ddx[q] = static_cast<float>(q);
  max_pool2d_grad_grad(ones.data(), ddx.data(), picked.data(), t);
  EXPECT_EQ(picked[9 + 4], ddx[(0 * 4 + 2) * 9 + 4]);  // window (0, 1), channel 4: tap (0, 2)
}

// The benchmark hook (conv/internal/forced_algorithm.h): every algorithm forced on W8-like shapes it
// takes matches the naive loops at every level (pooled products: the automatic choice's pool), and
// forcing one that a kernel, a shape or a level lacks throws, naming the kernel and the algorithm.
namespace forced_algorithm_test {

using internal::ConvAlgorithm;

struct Forced {
  explicit Forced(ConvAlgorithm a) : prev(internal::force_conv_algorithm(a)) {}
  ~Forced() { internal::force_conv_algorithm(prev); }
  ConvAlgorithm prev;
};

// Runs f, expecting std::invalid_argument whose message names `kernel` and `algorithm`.
template <class F>
void expect_refused(F&& f, const std::string& kernel, ConvAlgorithm algorithm) {
  Forced force(algorithm);
  try {
    f();
    ADD_FAILURE() << kernel << " ran the forced " << internal::conv_algorithm_name(algorithm);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(kernel), std::string::npos) << what;
    EXPECT_NE(what.find(internal::conv_algorithm_name(algorithm)), std::string::npos) << what;
  }
}

TEST(ConvForcedAlgorithm, EachAlgorithmMatchesTheNaiveLoopsAtEveryLevel) {
  using A = ConvAlgorithm;
  // conv1-like (C = 1: direct) and conv2-like (C = 16: igemm, Winograd, packed) 3x3 VALID, odd outputs.
  const std::vector<Case> cases = {{2, 12, 11, 1, 3, 3, 20, 1, 1, 1, 1, "VALID"},
                                   {2, 11, 11, 16, 3, 3, 16, 1, 1, 1, 1, "VALID"}};
  const CpuIsa host = host_cpu_isa();
  for (const CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa > host) continue;
    const CpuIsa previous = set_max_cpu_isa(isa);
    for (const Case& k : cases) {
      SCOPED_TRACE(::testing::Message() << cpu_isa_name(isa) << " C=" << k.c);
      const Conv2DGeometry g = geometry(k);
      const Conv2DGeometry pg = geometry({g.n, g.ho, g.wo, g.f, 2, 2, g.f, 2, 2, 1, 1, "VALID"});
      const auto x = random_vector<float>(g.n * g.h * g.w * g.c, 41), f = random_vector<float>(g.patch_size() * g.f, 42);
      auto dy = random_vector<float>(g.out_pixels() * g.f, 43);
      for (std::int64_t p = 0; p < g.out_pixels(); ++p)  // a 2x2 pool's gradient: the last row and column zero
        if (p / g.wo % g.ho >= 2 * pg.ho || p % g.wo >= 2 * pg.wo) std::fill_n(dy.data() + p * g.f, g.f, 0.0f);
      const std::vector<double> xd(x.begin(), x.end()), fd(f.begin(), f.end()), dyd(dy.begin(), dy.end());
      const bool wide = k.c >= 16, packed = wide && isa >= CpuIsa::kAvx2;
      std::vector<float> y(g.out_pixels() * g.f), dx(x.size()), df(f.size()), py(pg.out_pixels() * g.f),
          want_py(py.size());
      std::vector<std::int32_t> am(py.size()), want_am(py.size());
      conv2d_max_pool2d(x.data(), f.data(), static_cast<const float*>(nullptr), want_py.data(), want_am.data(), g, pg);
      for (const A a : {A::kDirect, A::kIgemm}) {
        SCOPED_TRACE(internal::conv_algorithm_name(a));
        Forced force(a);
        conv2d(x.data(), f.data(), y.data(), g);
        expect_near(y, ref_conv(xd, fd, g), 2e-5);
        conv2d_max_pool2d(x.data(), f.data(), static_cast<const float*>(nullptr), py.data(), am.data(), g, pg);
        expect_near(py, std::vector<double>(want_py.begin(), want_py.end()), 2e-5);
      }
      for (const A a : {A::kIgemm, A::kIm2col}) {
        SCOPED_TRACE(internal::conv_algorithm_name(a));
        Forced force(a);
        conv2d_backprop_input(f.data(), dy.data(), dx.data(), g);
        expect_near(dx, ref_backprop_input(fd, dyd, g), 2e-5);
      }
      std::vector<A> filter_algorithms = {A::kDirect, A::kIm2col};
      if (packed) filter_algorithms.insert(filter_algorithms.end(), {A::kWinograd, A::kFilterGemm});
      for (const A a : filter_algorithms) {
        SCOPED_TRACE(internal::conv_algorithm_name(a));
        Forced force(a);
        std::fill(df.begin(), df.end(), 7.0f);
        conv2d_backprop_filter(x.data(), dy.data(), df.data(), g);
        expect_near(df, ref_backprop_filter(xd, dyd, g), 2e-5);
      }
      // The pooled forward's fused algorithms, each where it applies.
      const A fused = wide ? A::kWinograd : A::kPoolFused;
      {
        Forced force(fused);
        conv2d_max_pool2d(x.data(), f.data(), static_cast<const float*>(nullptr), py.data(), am.data(), g, pg);
        expect_near(py, std::vector<double>(want_py.begin(), want_py.end()), 2e-5);
      }
      // The filter and bias gradients through the argmax: pool_fused (C = 1) and a materialised dz.
      const auto pdy = random_vector<float>(pg.out_pixels() * g.f, 44);
      std::vector<float> want_df(df.size()), want_db(g.f), db(g.f);
      ASSERT_TRUE(conv2d_backprop_filter_bias_with_argmax(x.data(), pdy.data(), want_am.data(), want_df.data(),
                                                          want_db.data(), g, pg, static_cast<const float*>(nullptr)));
      for (const A a : {wide ? A::kIm2col : A::kPoolFused, A::kDirect}) {
        SCOPED_TRACE(internal::conv_algorithm_name(a));
        Forced force(a);
        ASSERT_TRUE(conv2d_backprop_filter_bias_with_argmax(x.data(), pdy.data(), want_am.data(), df.data(),
                                                            db.data(), g, pg, static_cast<const float*>(nullptr)));
        expect_near(df, std::vector<double>(want_df.begin(), want_df.end()), 2e-5);
        expect_near(db, std::vector<double>(want_db.begin(), want_db.end()), 2e-5);
      }
      // Refusals: not an algorithm of that kernel, not for that shape, not at that level.
      expect_refused([&] { conv2d(x.data(), f.data(), y.data(), g); }, "conv2d", A::kWinograd);
      expect_refused([&] { conv2d_backprop_input(f.data(), dy.data(), dx.data(), g); }, "conv2d_backprop_input",
                     A::kDirect);
      expect_refused([&] { conv2d_backprop_filter(x.data(), dy.data(), df.data(), g); }, "conv2d_backprop_filter",
                     A::kPoolFused);
      if (!packed)
        for (const A a : {A::kWinograd, A::kFilterGemm})
          expect_refused([&] { conv2d_backprop_filter(x.data(), dy.data(), df.data(), g); }, "conv2d_backprop_filter",
                         a);
      expect_refused(
          [&] {
            conv2d_max_pool2d(x.data(), f.data(), static_cast<const float*>(nullptr), py.data(), am.data(), g, pg);
          },
          "conv2d_max_pool2d", wide ? A::kPoolFused : A::kWinograd);
      expect_refused(
          [&] {
            conv2d_max_pool2d(x.data(), f.data(), static_cast<const float*>(nullptr), py.data(), am.data(), g, pg);
          },
          "conv2d_max_pool2d", A::kIm2col);
      if (wide)
        expect_refused(
            [&] {
              conv2d_backprop_filter_bias_with_argmax(x.data(), pdy.data(), want_am.data(), df.data(), db.data(), g,
                                                      pg, static_cast<const float*>(nullptr));
            },
            "conv2d_backprop_filter_bias_with_argmax", A::kPoolFused);
    }
    set_max_cpu_isa(previous);
  }
  EXPECT_EQ(internal::forced_conv_algorithm(), ConvAlgorithm::kAuto);  // every Forced restored it
}

}  // namespace forced_algorithm_test
}  // namespace
}  // namespace tapeflow::kernels
