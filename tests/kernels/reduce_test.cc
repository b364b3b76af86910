#include "tape/kernels/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tape/kernels/ukernels/internal/reduce_loops.h"
#include "tape/kernels/parallel.h"
#include "tests/kernels/reference.h"
#include "tests/testing/isa_cap.h"

namespace tapeflow::kernels {
namespace {

using testref::random_vector;
using testref::unravel;

// Reference: output index of input multi-index with reduced axes removed.
std::int64_t out_index(const std::vector<std::int64_t>& idx, const Shape& s, std::uint32_t mask) {
  std::int64_t lin = 0;
  for (int d = 0; d < s.rank(); ++d)
    if (!((mask >> d) & 1u)) lin = lin * s[d] + idx[d];
  return lin;
}

std::int64_t out_size(const Shape& s, std::uint32_t mask) {
  std::int64_t n = 1;
  for (int d = 0; d < s.rank(); ++d)
    if (!((mask >> d) & 1u)) n *= s[d];
  return n;
}

template <class T>
void check_all_masks(const Shape& s, std::uint64_t seed) {
  auto x = random_vector<T>(s.num_elements(), seed, -50, 50);
  for (std::uint32_t mask = 0; mask < (1u << s.rank()); ++mask) {
    const std::int64_t on = out_size(s, mask);
    std::vector<double> sum(on, 0.0), mx(on, -INFINITY), mn(on, INFINITY);
    for (std::int64_t i = 0; i < s.num_elements(); ++i) {
      const auto o = out_index(unravel(i, s), s, mask);
      sum[o] += double(x[i]);
      mx[o] = std::max(mx[o], double(x[i]));
      mn[o] = std::min(mn[o], double(x[i]));
    }
    std::vector<T> ys(on), ymax(on), ymin(on);
    reduce_sum(x.data(), s, mask, ys.data());
    reduce_max(x.data(), s, mask, ymax.data());
    reduce_min(x.data(), s, mask, ymin.data());
    for (std::int64_t o = 0; o < on; ++o) {
      ASSERT_NEAR(double(ys[o]), sum[o], 1e-3 * (1 + std::abs(sum[o]))) << s.to_string() << " mask " << mask;
      ASSERT_EQ(double(ymax[o]), mx[o]) << s.to_string() << " mask " << mask;
      ASSERT_EQ(double(ymin[o]), mn[o]) << s.to_string() << " mask " << mask;
    }
  }
}

TEST(Reduce, AllMasksRank3AllDTypes) {
  check_all_masks<float>({3, 4, 5}, 1);
  check_all_masks<double>({3, 4, 5}, 2);
  check_all_masks<std::int32_t>({3, 4, 5}, 3);
  check_all_masks<std::int64_t>({3, 4, 5}, 4);
  check_all_masks<double>({2, 1, 3, 1}, 5);  // size-1 dims
  check_all_masks<float>({7}, 6);
}

TEST(Reduce, LargeShapesAllMasksMatchReference) {
  // Big enough to take the parallel and chunked paths.
  check_all_masks<double>({3, 40000, 2}, 7);
  check_all_masks<double>({70000, 3}, 8);
  check_all_masks<double>({3, 2000, 40}, 9);
}

TEST(Reduce, ScalarAndEmpty) {
  float x = 4.5f, y = 0;
  reduce_sum(&x, Shape{}, 0, &y);
  EXPECT_EQ(y, 4.5f);
  std::vector<float> none;
  float s = 7, m = 7, n = 7;
  reduce_sum(none.data(), Shape{0}, 1, &s);
  reduce_max(none.data(), Shape{0}, 1, &m);
  reduce_min(none.data(), Shape{0}, 1, &n);
  EXPECT_EQ(s, 0.0f);
  EXPECT_EQ(m, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(n, std::numeric_limits<float>::infinity());
  std::int32_t im = 0;
  reduce_max(static_cast<const std::int32_t*>(nullptr), Shape{3, 0}, 3, &im);
  EXPECT_EQ(im, std::numeric_limits<std::int32_t>::lowest());
  std::vector<float> out(3, 5.0f);
  reduce_sum(none.data(), Shape{3, 0}, 2, out.data());  // three empty rows
  EXPECT_EQ(out, std::vector<float>(3, 0.0f));
  reduce_sum(none.data(), Shape{0, 3}, 2, out.data());  // empty output: nothing written
}

TEST(Reduce, NaNPropagatesThroughMaxAndMin) {
  std::vector<double> x = {1, NAN, 3};
  double m = 0, n = 0;
  reduce_max(x.data(), Shape{3}, 1, &m);
  reduce_min(x.data(), Shape{3}, 1, &n);
  EXPECT_TRUE(std::isnan(m));
  EXPECT_TRUE(std::isnan(n));
}

TEST(Reduce, MaskBeyondRankThrows) {
  float x[4] = {}, y[4];
  EXPECT_THROW(reduce_sum(x, Shape{2, 2}, 4, y), std::invalid_argument);
  EXPECT_THROW(reduce_max(x, Shape{4}, 2, y), std::invalid_argument);
}

template <class T>
std::vector<T> run_sum(const std::vector<T>& x, const Shape& s, std::uint32_t mask) {
  std::vector<T> y(out_size(s, mask));
  reduce_sum(x.data(), s, mask, y.data());
  return y;
}

TEST(Reduce, ParallelSumIsBitIdenticalRunToRunAndAcrossThreadCounts) {
  const Shape s{1 << 10, 1 << 10};
  auto x = random_vector<float>(s.num_elements(), 11);
  for (std::uint32_t mask : {1u, 2u, 3u}) {
    const auto first = run_sum(x, s, mask);
    const auto second = run_sum(x, s, mask);
    const int prev = set_num_threads(1);
    const auto serial = run_sum(x, s, mask);
    set_num_threads(prev);
    ASSERT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(float))) << mask;
    ASSERT_EQ(0, std::memcmp(first.data(), serial.data(), first.size() * sizeof(float))) << mask;
  }
}

TEST(ArgMax, FirstExtremeWinsOnEveryAxis) {
  const Shape s{3, 4, 5};
  auto x = random_vector<double>(s.num_elements(), 12);
  for (auto& v : x) v = std::round(v * 2);  // many ties
  for (int axis = 0; axis < 3; ++axis) {
    Shape so;
    for (int d = 0; d < 3; ++d)
      if (d != axis) so.push_back(s[d]);
    std::vector<std::int64_t> ymax(so.num_elements()), ymin(so.num_elements());
    argmax(x.data(), s, axis, ymax.data());
    argmin(x.data(), s, axis - 3, ymin.data());  // negative axis
    const auto st = s.strides();
    for (std::int64_t o = 0; o < so.num_elements(); ++o) {
      auto oi = unravel(o, so);
      std::int64_t base = 0;
      for (int d = 0, k = 0; d < 3; ++d)
        if (d != axis) base += oi[k++] * st[d];
      std::int64_t bmax = 0, bmin = 0;
      for (std::int64_t a = 1; a < s[axis]; ++a) {
        if (x[base + a * st[axis]] > x[base + bmax * st[axis]]) bmax = a;
        if (x[base + a * st[axis]] < x[base + bmin * st[axis]]) bmin = a;
      }
      ASSERT_EQ(ymax[o], bmax) << "axis " << axis;
      ASSERT_EQ(ymin[o], bmin) << "axis " << axis;
    }
  }
}

TEST(ArgMax, IntegersAndErrors) {
  std::int32_t xi[4] = {3, 9, 9, 1};
  std::int64_t y = -1;
  argmax(xi, Shape{4}, 0, &y);
  EXPECT_EQ(y, 1);
  argmin(xi, Shape{4}, 0, &y);
  EXPECT_EQ(y, 3);
  std::int64_t xl[2] = {5, 5};
  argmax(xl, Shape{2}, -1, &y);
  EXPECT_EQ(y, 0);
  float xf[1] = {};
  std::int64_t yy[2];
  EXPECT_THROW(argmax(xf, Shape{2, 0}, 1, yy), std::invalid_argument);
  EXPECT_THROW(argmin(xf, Shape{2, 3}, 2, yy), std::invalid_argument);
}

// The levels (tape/core/cpu_isa.h), forced with set_max_cpu_isa: the summation order that
// tape/kernels/ukernels/internal/reduce_loops.h states, bit for bit; the same bits at every level
// and for any thread count (reduce.h); within rounding of long double loops; NaN from any position.
using testing::IsaCap;

// The order reduce_loops.h documents for one run, written out one scalar at a time.
template <class T>
T documented_sum(const T* x, std::int64_t n) {
  constexpr int kL = internal::kReduceLanes<T>, kS = internal::kReduceShortLanes<T>;
  std::vector<T> acc(kL, T(0));
  std::int64_t i = 0;
  auto fold = [&](int from, int to) {
    for (int w = from / 2; w >= to; w /= 2)
      for (int j = 0; j < w; ++j) acc[j] = acc[j] + acc[j + w];
  };
  if (n >= kS) {
    if (n >= kL) {
      for (; i + kL <= n; i += kL)
        for (int j = 0; j < kL; ++j) acc[j] = acc[j] + x[i + j];
      fold(kL, kS);
    }
    for (; i + kS <= n; i += kS)
      for (int j = 0; j < kS; ++j) acc[j] = acc[j] + x[i + j];
    fold(kS, 1);
  }
  T r = acc[0];
  for (; i < n; ++i) r = r + x[i];
  return r;
}

template <class T>
void check_documented_order() {
  // Every tail after the lanes, and a long run; values of mixed magnitude so that any other
  // order rounds differently.
  std::vector<std::int64_t> lengths;
  for (std::int64_t n = 0; n <= 80; ++n) lengths.push_back(n);
  for (std::int64_t n : {std::int64_t{100}, std::int64_t{127}, std::int64_t{128}, std::int64_t{129}, std::int64_t{255},
                         std::int64_t{256}, std::int64_t{1000 + 13}, kReduceChunk - 5, kReduceChunk})
    lengths.push_back(n);
  auto x = random_vector<T>(kReduceChunk, 21, -1, 1);
  for (std::size_t i = 0; i < x.size(); i += 7) x[i] *= T(4096);
  for (CpuIsa isa : testing::host_cpu_levels()) {
    SCOPED_TRACE(std::string(cpu_isa_name(isa)));
    const IsaCap cap(isa);
    for (std::int64_t n : lengths) {
      T y = T(-1);
      reduce_sum(x.data(), Shape{n}, 1u, &y);
      const T want = documented_sum(x.data(), n);
      ASSERT_EQ(0, std::memcmp(&y, &want, sizeof(T))) << "n " << n << ": " << y << " vs " << want;
      // Rows of n in a [3, n] matrix take the same order (the loop over consecutive runs).
      std::vector<T> xs(x.begin(), x.begin() + 3 * std::min<std::int64_t>(n, kReduceChunk / 3)), ys(3);
      const std::int64_t m = static_cast<std::int64_t>(xs.size()) / 3;
      reduce_sum(xs.data(), Shape{3, m}, 2u, ys.data());
      for (int r = 0; r < 3; ++r) ASSERT_EQ(ys[r], documented_sum(xs.data() + r * m, m)) << "row " << r << " of " << m;
    }
  }
}

TEST(ReduceLevels, SumFollowsTheDocumentedOrderAtEveryLevelFloat) { check_documented_order<float>(); }
TEST(ReduceLevels, SumFollowsTheDocumentedOrderAtEveryLevelDouble) { check_documented_order<double>(); }

// Every mask of `s`: the three reductions at every level and on 1 and 2 threads give the same
// bits, and the sum is within rounding of a float64 sum.
template <class T>
void check_levels_agree(const Shape& s, double rtol) {
  const auto x = random_vector<T>(s.num_elements(), 22, -1, 1);
  for (std::uint32_t mask = 1; mask < (1u << s.rank()); ++mask) {
    const std::int64_t on = out_size(s, mask);
    // Reference loops in long double (at least float64); the sum of |x| bounds the rounding error.
    std::vector<long double> ref(on, 0.0L), mag(on, 0.0L);
    for (std::int64_t i = 0; i < s.num_elements(); ++i) {
      const auto o = out_index(unravel(i, s), s, mask);
      ref[o] += x[i];
      mag[o] += std::abs(static_cast<long double>(x[i]));
    }
    std::vector<T> first;
    for (CpuIsa isa : testing::host_cpu_levels())
      for (int threads : {1, 2}) {
        SCOPED_TRACE(std::string(cpu_isa_name(isa)) + ", " + std::to_string(threads) + " threads, mask " +
                     std::to_string(mask) + " of " + s.to_string());
        const IsaCap cap(isa);
        const int prev = set_num_threads(threads);
        std::vector<T> y(3 * on);
        reduce_sum(x.data(), s, mask, y.data());
        reduce_max(x.data(), s, mask, y.data() + on);
        reduce_min(x.data(), s, mask, y.data() + 2 * on);
        set_num_threads(prev);
        for (std::int64_t o = 0; o < on; ++o)
          ASSERT_LE(std::abs(double(y[o] - ref[o])), rtol * double(mag[o])) << "output " << o;
        if (first.empty()) first = y;
        else ASSERT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(T))) << "bits differ";
      }
  }
}

TEST(ReduceLevels, EveryLevelAndThreadCountGiveTheSameBitsWithinRoundingOfFloat64) {
  check_levels_agree<float>(Shape{256, 256}, 1e-5);
  check_levels_agree<float>(Shape{3, 40000, 2}, 1e-5);  // chunked partials on both paths
  check_levels_agree<float>(Shape{7, 33, 5}, 1e-5);
  check_levels_agree<double>(Shape{300, 1000}, 1e-13);
  check_levels_agree<double>(Shape{5, 17, 70000 / 17}, 1e-13);
}

// A NaN at any lane or tail position of a run, or in any row, comes out of max and min.
template <class T>
void check_nan_propagates() {
  for (CpuIsa isa : testing::host_cpu_levels()) {
    SCOPED_TRACE(std::string(cpu_isa_name(isa)));
    const IsaCap cap(isa);
    for (std::int64_t n : {1, 7, 9, 40, 100}) {
      for (std::int64_t at = 0; at < n; ++at) {
        std::vector<T> x(n, T(1));
        x[at] = std::numeric_limits<T>::quiet_NaN();
        T mx = 0, mn = 0;
        reduce_max(x.data(), Shape{n}, 1u, &mx);
        reduce_min(x.data(), Shape{n}, 1u, &mn);
        ASSERT_TRUE(std::isnan(mx) && std::isnan(mn)) << "n " << n << " NaN at " << at;
        // The same values as n rows of one column next to a column of ones: the row loop.
        std::vector<T> xr(2 * n, T(1)), yr(2);
        xr[2 * at] = x[at];
        reduce_max(xr.data(), Shape{n, 2}, 1u, yr.data());
        ASSERT_TRUE(std::isnan(yr[0]) && yr[1] == T(1)) << "row " << at << " of " << n;
        reduce_min(xr.data(), Shape{n, 2}, 1u, yr.data());
        ASSERT_TRUE(std::isnan(yr[0]) && yr[1] == T(1)) << "row " << at << " of " << n;
      }
    }
  }
}

TEST(ReduceLevels, NaNPropagatesFromEveryPositionAtEveryLevel) {
  check_nan_propagates<float>();
  check_nan_propagates<double>();
}

}  // namespace
}  // namespace tapeflow::kernels
