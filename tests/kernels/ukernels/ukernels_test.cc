// The AVX-512 register tiles (tape/kernels/ukernels/, internal/simd512.h, gemm/internal/tiles.h) against the AVX2 ones: the same bits, on every
// edge the wide tiles meet (row tiles short of 6, a single panel left after the pairs, a partial
// panel, several K blocks accumulating through C), and against float64 loops. The levels are forced with set_max_cpu_isa (tape/core/cpu_isa.h).
#include "tape/kernels/internal/simd512.h"

#include "tape/core/cpu_isa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include "tape/kernels/conv.h"
#include "tape/kernels/gemm/internal/packed.h"
#include "tape/kernels/parallel.h"
#include "tests/kernels/reference.h"
#include "tests/testing/isa_cap.h"

namespace tapeflow::kernels {
namespace {

using testref::random_vector;

using testing::IsaCap;  // tests/testing/isa_cap.h

// Runs f() with the AVX-512 tiles on and with them off; both results must be the same bits.
template <class F>
void expect_same_bits_both_ways(F f, const char* what) {
  std::vector<float> wide, narrow;
  {
    const IsaCap on(CpuIsa::kAvx512);
    ASSERT_TRUE(internal::avx512_enabled());
    wide = f();
  }
  {
    const IsaCap off(CpuIsa::kAvx2);
    ASSERT_FALSE(internal::avx512_enabled());
    narrow = f();
  }
  ASSERT_EQ(wide.size(), narrow.size()) << what;
  EXPECT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float))) << what;
}

#define SKIP_WITHOUT_AVX512() \
  if (host_cpu_isa() < CpuIsa::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512F/BW/VL"

// f(m, n, k, ta, tb) over every combination of the sizes and both transpose flags.
template <class F>
void for_gemm_cases(std::initializer_list<std::int64_t> ms, std::initializer_list<std::int64_t> ns,
                    std::initializer_list<std::int64_t> ks, F f) {
  for (std::int64_t m : ms)
    for (std::int64_t n : ns)
      for (std::int64_t k : ks)
        for (int flags = 0; flags < 4; ++flags) f(m, n, k, (flags & 1) != 0, (flags & 2) != 0);
}

TEST(Avx512Tiles, GemmSameBitsAsAvx2AndRightValues) {
  SKIP_WITHOUT_AVX512();
  // n: one pair of panels, a pair and a partial panel, a pair and a single, several pairs and a
  // partial one; m: short row tiles; k: one K block and several (C accumulates between them).
  for_gemm_cases(
      {1, 5, 6, 13, 64}, {32, 33, 47, 48, 80, 97}, {1, 19, 700},
      [](std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb) {
        const auto a = random_vector<float>(m * k, 7), b = random_vector<float>(k * n, 8);
        const std::int64_t ldc = n + 5;
        const auto run = [&] {
          std::vector<float> c(m * ldc, 3.0f);
          internal::packed_gemm(m, n, k, a.data(), ta ? m : k, ta, b.data(), tb ? k : n, tb, c.data(), ldc);
          return c;
        };
        char what[96];
        std::snprintf(what, sizeof what, "m%ld n%ld k%ld ta%d tb%d", long(m), long(n), long(k), int(ta), int(tb));
        expect_same_bits_both_ways(run, what);
        const IsaCap on(CpuIsa::kAvx512);
        const std::vector<float> c = run();
        for (std::int64_t i = 0; i < m; ++i) {
          for (std::int64_t j = 0; j < n; ++j) {
            double want = 0;
            for (std::int64_t p = 0; p < k; ++p)
              want += double(ta ? a[p * m + i] : a[i * k + p]) * double(tb ? b[j * k + p] : b[p * n + j]);
            ASSERT_NEAR(c[i * ldc + j], want, 1e-5 * (1 + std::sqrt(double(k)))) << what << " at " << i << "," << j;
          }
          for (std::int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], 3.0f) << what << ": wrote past n";
        }
      });
}

// The double tiles of the packed GEMM (6 x 16 at avx512: two panels of 8) against the avx2 ones
// (6 x 8), on the same edges: short row tiles, a pair and a partial or single panel, several K blocks.
TEST(Avx512Tiles, GemmDoubleSameBitsAsAvx2) {
  SKIP_WITHOUT_AVX512();
  for_gemm_cases({1, 5, 6, 13}, {16, 17, 23, 24, 40, 49}, {1, 19, 600},
                 [](std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb) {
                   const auto a = random_vector<double>(m * k, 11), b = random_vector<double>(k * n, 12);
                   const std::int64_t ldc = n + 3;
                   const auto run = [&](CpuIsa isa) {
                     const IsaCap cap(isa);
                     std::vector<double> c(m * ldc, 3.0);
                     internal::packed_gemm(m, n, k, a.data(), ta ? m : k, ta, b.data(), tb ? k : n, tb, c.data(), ldc);
                     return c;
                   };
                   const std::vector<double> wide = run(CpuIsa::kAvx512), narrow = run(CpuIsa::kAvx2);
                   EXPECT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(double)))
                       << "m" << m << " n" << n << " k" << k << " ta" << ta << " tb" << tb;
                 });
}

TEST(Avx512Tiles, PackedBSameBitsAsAvx2) {
  SKIP_WITHOUT_AVX512();
  for (std::int64_t n : {32, 40, 64, 96}) {
    const std::int64_t m = 29, k = 300;
    const auto a = random_vector<float>(m * k, 9), b = random_vector<float>(k * n, 10);
    const internal::PackedB<float> packed(k, n, b.data(), n, false);
    char what[32];
    std::snprintf(what, sizeof what, "packed n%ld", long(n));
    expect_same_bits_both_ways(
        [&] {
          std::vector<float> c(m * n);
          internal::packed_gemm(m, a.data(), k, false, packed, c.data(), n);
          return c;
        },
        what);
  }
}

struct ConvCase {
  std::int64_t n, h, w, c, kh, kw, f, s;
  const char* padding;
};

Conv2DGeometry geometry(const ConvCase& k) {
  Conv2DGeometry g{.n = k.n, .h = k.h, .w = k.w, .c = k.c, .kh = k.kh, .kw = k.kw, .f = k.f,
                   .sh = k.s, .sw = k.s, .dh = 1, .dw = 1};
  const WindowDim r = window_dim("test", k.padding, k.h, k.kh, k.s, 1, 0, 0);
  const WindowDim c = window_dim("test", k.padding, k.w, k.kw, k.s, 1, 0, 0);
  g.ho = r.out;
  g.wo = c.out;
  g.pad_top = r.pad_before;
  g.pad_left = c.pad_before;
  return g;
}

// The indirect GEMM (forward and input gradient) and the packed filter gradient with enough
// channels for the wide tiles: W8's conv2 (two pairs of panels), a pair and a single panel (48),
// a pair and a partial panel (40), W9's 5x5 stride-2 SAME (border classes, phase classes), one
// output pixel count that leaves a short row tile.
TEST(Avx512Tiles, ConvolutionsSameBitsAsAvx2AndRightValues) {
  SKIP_WITHOUT_AVX512();
  const std::vector<ConvCase> cases = {{4, 13, 13, 32, 3, 3, 64, 1, "VALID"},
                                       {2, 9, 9, 16, 3, 3, 48, 1, "SAME"},
                                       {3, 7, 7, 32, 3, 3, 40, 1, "SAME"},
                                       {2, 14, 14, 64, 5, 5, 128, 2, "SAME"},
                                       {1, 5, 7, 32, 2, 2, 32, 1, "VALID"},
                                       // the direct kernels (<= 4 input channels): W8's conv1, W9's
                                       // 5x5 stride-2 conv1, a wide block and a narrow one (48), a
                                       // partial wide block (20), 26 columns (a short pixel block)
                                       {3, 28, 28, 1, 3, 3, 32, 1, "VALID"},
                                       {2, 28, 28, 1, 5, 5, 64, 2, "SAME"},
                                       {2, 12, 11, 3, 3, 3, 48, 1, "SAME"},
                                       {2, 9, 10, 2, 3, 3, 20, 1, "VALID"}};
  for (const ConvCase& k : cases) {
    const Conv2DGeometry g = geometry(k);
    char name[64];
    std::snprintf(name, sizeof name, "%ldx%ldx%ld -> %ld k%ld s%ld", long(k.h), long(k.w), long(k.c), long(k.f),
                  long(k.kh), long(k.s));
    SCOPED_TRACE(name);
    const auto x = random_vector<float>(g.n * g.h * g.w * g.c, 21);
    const auto f = random_vector<float>(g.patch_size() * g.f, 22);
    const auto dy = random_vector<float>(g.out_pixels() * g.f, 23);
    for (int threads : {1, 2}) {
      const int previous = set_num_threads(threads);
      expect_same_bits_both_ways(
          [&] {
            std::vector<float> y(g.out_pixels() * g.f);
            conv2d(x.data(), f.data(), y.data(), g);
            return y;
          },
          "forward");
      expect_same_bits_both_ways(
          [&] {
            std::vector<float> dx(x.size());
            conv2d_backprop_input(f.data(), dy.data(), dx.data(), g);
            return dx;
          },
          "input gradient");
      expect_same_bits_both_ways(
          [&] {
            std::vector<float> df(f.size());
            conv2d_backprop_filter(x.data(), dy.data(), df.data(), g);
            return df;
          },
          "filter gradient");
      set_num_threads(previous);
    }
    // The wide forward against float64 loops.
    const IsaCap on(CpuIsa::kAvx512);
    std::vector<float> y(g.out_pixels() * g.f);
    conv2d(x.data(), f.data(), y.data(), g);
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t oh = 0; oh < g.ho; ++oh)
        for (std::int64_t ow = 0; ow < g.wo; ++ow)
          for (std::int64_t o = 0; o < g.f; ++o) {
            double want = 0;
            for (std::int64_t i = 0; i < g.kh; ++i)
              for (std::int64_t j = 0; j < g.kw; ++j) {
                const std::int64_t ih = oh * g.sh - g.pad_top + i, iw = ow * g.sw - g.pad_left + j;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                for (std::int64_t c = 0; c < g.c; ++c)
                  want += double(x[((n * g.h + ih) * g.w + iw) * g.c + c]) *
                          double(f[((i * g.kw + j) * g.c + c) * g.f + o]);
              }
            ASSERT_NEAR(y[((n * g.ho + oh) * g.wo + ow) * g.f + o], want, 1e-4) << name;
          }
  }
}

// The direct kernel's epilogue applied in its wide blocks (F a multiple of 32) against the AVX2
// path's pass over each row: bias, relu, and both; with a NaN input (relu sends it to 0 on both).
TEST(Avx512Tiles, DirectEpilogueInTheBlocksSameBits) {
  SKIP_WITHOUT_AVX512();
  for (const ConvCase& k :
       {ConvCase{3, 28, 28, 1, 3, 3, 32, 1, "VALID"}, ConvCase{2, 12, 11, 3, 5, 5, 64, 2, "SAME"}}) {
    const Conv2DGeometry g = geometry(k);
    auto x = random_vector<float>(g.n * g.h * g.w * g.c, 71);
    x[17] = NAN;
    const auto f = random_vector<float>(g.patch_size() * g.f, 72);
    const auto bias = random_vector<float>(g.f, 73);
    for (int e = 1; e < 4; ++e) {
      const ConvEpilogue<float> epilogue{(e & 1) ? bias.data() : nullptr, (e & 2) != 0};
      expect_same_bits_both_ways(
          [&] {
            std::vector<float> y(g.out_pixels() * g.f);
            conv2d(x.data(), f.data(), y.data(), g, epilogue);
            return y;
          },
          e == 1 ? "bias" : e == 2 ? "relu" : "bias + relu");
    }
  }
}

// The filter gradient with both operands read in place (C a multiple of 32): W8's conv2 with its
// pool's zero lines (the pixels left out of each run), the same with an inf in x where those
// pixels read (then kept: 0 * inf is NaN), and an inf in dy over a SAME border (products with the
// padding's zeros: NaN on both paths).
TEST(Avx512Tiles, FilterGradientInPlaceSameBitsWithZeroLinesAndInfinities) {
  SKIP_WITHOUT_AVX512();
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    const Conv2DGeometry g = geometry(variant < 2 ? ConvCase{6, 13, 13, 32, 3, 3, 64, 1, "VALID"}
                                                  : ConvCase{2, 9, 9, 64, 5, 5, 20, 2, "SAME"});
    auto x = random_vector<float>(g.n * g.h * g.w * g.c, 61);
    auto dy = random_vector<float>(g.out_pixels() * g.f, 62);
    if (variant < 2)
      for (std::int64_t p = 0; p < g.out_pixels(); ++p)
        if (p % (g.ho * g.wo) / g.wo == g.ho - 1 || p % g.wo == g.wo - 1) std::fill_n(dy.begin() + p * g.f, g.f, 0.0f);
    if (variant == 1) x[static_cast<std::size_t>(((2 * g.h + 12) * g.w + 4) * g.c + 7)] = INFINITY;
    if (variant == 2) dy[5] = INFINITY;
    std::vector<float> df;
    expect_same_bits_both_ways(
        [&] {
          df.assign(static_cast<std::size_t>(g.patch_size() * g.f), 7.0f);
          conv2d_backprop_filter(x.data(), dy.data(), df.data(), g);
          return df;
        },
        "filter gradient");
    if (variant > 0) {
      EXPECT_TRUE(std::any_of(df.begin(), df.end(), [](float v) { return std::isnan(v); }));
    }
  }
}

// The fused convolution + 2x2 max pool (on the igemm, which computes only the lines the pool
// reads, and on the direct kernel, pooled in cache) and its filter and bias gradients from the argmax.
TEST(Avx512Tiles, ConvMaxPoolSameBitsAsAvx2) {
  SKIP_WITHOUT_AVX512();
  for (const ConvCase& k :
       {ConvCase{5, 13, 13, 32, 3, 3, 64, 1, "VALID"}, ConvCase{6, 28, 28, 1, 3, 3, 32, 1, "VALID"}}) {
    const Conv2DGeometry g = geometry(k);
    const Conv2DGeometry pool = geometry({g.n, g.ho, g.wo, g.f, 2, 2, g.f, 2, "VALID"});
    const auto x = random_vector<float>(g.n * g.h * g.w * g.c, 31);
    const auto f = random_vector<float>(g.patch_size() * g.f, 32);
    const auto bias = random_vector<float>(g.f, 33);
    for (bool relu : {false, true})
      expect_same_bits_both_ways(
          [&] {
            std::vector<float> y(pool.out_pixels() * pool.c);
            std::vector<std::int32_t> argmax(y.size());
            conv2d_max_pool2d(x.data(), f.data(), bias.data(), y.data(), argmax.data(), g, pool, relu);
            for (std::int32_t a : argmax) y.push_back(static_cast<float>(a));
            return y;
          },
          relu ? "conv + pool + relu" : "conv + pool");
    std::vector<float> y(pool.out_pixels() * pool.c);
    std::vector<std::int32_t> argmax(y.size());
    conv2d_max_pool2d(x.data(), f.data(), bias.data(), y.data(), argmax.data(), g, pool, false);
    const auto dy = random_vector<float>(y.size(), 34);
    expect_same_bits_both_ways(
        [&] {
          std::vector<float> df(f.size()), db(g.f);
          EXPECT_TRUE(conv2d_backprop_filter_bias_with_argmax(x.data(), dy.data(), argmax.data(), df.data(), db.data(),
                                                              g, pool, static_cast<const float*>(nullptr)));
          df.insert(df.end(), db.begin(), db.end());
          return df;
        },
        "filter and bias gradients from the argmax");
  }
}

}  // namespace
}  // namespace tapeflow::kernels
