#include "tape/kernels/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "tests/kernels/reference.h"

namespace tapeflow::kernels {
namespace {

using testref::broadcast_index;
using testref::random_vector;
using testref::unravel;

struct BroadcastCase {
  Shape a, b;
};

const std::vector<BroadcastCase> kCases = {
    {{2, 3}, {2, 3}},          {{}, {4, 5}},          {{4, 5}, {}},           {{4, 5}, {5}},
    {{5}, {4, 5}},             {{3, 1}, {1, 4}},      {{2, 3, 4}, {3, 1}},    {{2, 1, 4}, {1, 3, 1}},
    {{1}, {2, 3}},             {{0, 3}, {3}},         {{2, 0}, {1}},          {{6, 1, 5, 1}, {7, 1, 3}},
    {{2, 3, 4, 5}, {1, 1, 5}}, {{1, 1}, {1}},         {{}, {}},               {{3, 4}, {1, 4}},
};

template <class T>
void check_map2(const BroadcastCase& c) {
  const Shape sy = broadcast_shapes(c.a, c.b, "test");
  auto a = random_vector<T>(c.a.num_elements(), 1);
  auto b = random_vector<T>(c.b.num_elements(), 2);
  std::vector<T> y(sy.num_elements());
  map2(a.data(), c.a, b.data(), c.b, y.data(), sy, [](T u, T v) { return u * T(3) - v; });
  for (std::int64_t i = 0; i < sy.num_elements(); ++i) {
    auto idx = unravel(i, sy);
    const double want = double(a[broadcast_index(idx, c.a)]) * 3 - double(b[broadcast_index(idx, c.b)]);
    ASSERT_NEAR(double(y[i]), want, 1e-6) << c.a.to_string() << " op " << c.b.to_string() << " at " << i;
  }
}

TEST(Map2, BroadcastCasesMatchReference) {
  for (const auto& c : kCases) {
    check_map2<float>(c);
    check_map2<double>(c);
  }
}

TEST(Map2, ComparisonWritesBool) {
  std::vector<float> a = {1, 5, 3}, b = {2};
  bool y[3];
  map2(a.data(), Shape{3}, b.data(), Shape{}, y, Shape{3}, [](float u, float v) { return u > v; });
  EXPECT_FALSE(y[0]);
  EXPECT_TRUE(y[1]);
  EXPECT_TRUE(y[2]);
}

TEST(Map2, LargeParallelPathsMatchSerialFormula) {
  // Every fast path with enough elements to run in parallel.
  const Shape big{512, 300};
  auto a = random_vector<float>(big.num_elements(), 3);
  auto row = random_vector<float>(300, 4);
  auto col = random_vector<float>(512, 5);
  std::vector<float> y(big.num_elements());
  auto f = [](float u, float v) { return u + v; };
  map2(a.data(), big, row.data(), Shape{300}, y.data(), big, f);
  for (std::int64_t i = 0; i < big.num_elements(); ++i) ASSERT_EQ(y[i], a[i] + row[i % 300]);
  map2(row.data(), Shape{300}, a.data(), big, y.data(), big, f);
  for (std::int64_t i = 0; i < big.num_elements(); ++i) ASSERT_EQ(y[i], row[i % 300] + a[i]);
  map2(a.data(), big, col.data(), Shape{512, 1}, y.data(), big, f);
  for (std::int64_t i = 0; i < big.num_elements(); ++i) ASSERT_EQ(y[i], a[i] + col[i / 300]);
  map2(a.data(), big, a.data(), big, y.data(), big, f);
  for (std::int64_t i = 0; i < big.num_elements(); ++i) ASSERT_EQ(y[i], a[i] + a[i]);
  float two = 2;
  map2(&two, Shape{}, a.data(), big, y.data(), big, f);
  for (std::int64_t i = 0; i < big.num_elements(); ++i) ASSERT_EQ(y[i], 2 + a[i]);
}

TEST(Map, UnaryLargeAndEmpty) {
  auto x = random_vector<double>(100000, 6);
  std::vector<double> y(x.size());
  map(x.data(), y.data(), static_cast<std::int64_t>(x.size()), [](double v) { return std::exp(v); });
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], std::exp(x[i]));
  map(x.data(), y.data(), 0, [](double) -> double { throw 1; });  // never called
}

TEST(Map2, IncompatibleShapesThrow) {
  float a[6] = {}, b[4] = {}, y[6];
  EXPECT_THROW(map2(a, Shape{2, 3}, b, Shape{4}, y, Shape{2, 3}, [](float u, float v) { return u + v; }),
               std::invalid_argument);
}

template <class T>
void check_where(const Shape& sc, const Shape& sa, const Shape& sb) {
  const Shape sy = broadcast_shapes(broadcast_shapes(sc, sa, "t"), sb, "t");
  auto cv = random_vector<double>(sc.num_elements(), 7);
  std::vector<char> cbytes(cv.size());
  for (std::size_t i = 0; i < cv.size(); ++i) cbytes[i] = cv[i] > 0;
  const bool* c = reinterpret_cast<const bool*>(cbytes.data());
  auto a = random_vector<T>(sa.num_elements(), 8);
  auto b = random_vector<T>(sb.num_elements(), 9);
  std::vector<T> y(sy.num_elements());
  where(c, sc, a.data(), sa, b.data(), sb, y.data(), sy);
  for (std::int64_t i = 0; i < sy.num_elements(); ++i) {
    auto idx = unravel(i, sy);
    T want = c[broadcast_index(idx, sc)] ? a[broadcast_index(idx, sa)] : b[broadcast_index(idx, sb)];
    ASSERT_EQ(y[i], want) << i;
  }
}

TEST(Where, BroadcastsAllThree) {
  check_where<float>({2, 3}, {2, 3}, {2, 3});
  check_where<double>({3, 1}, {1, 4}, {});
  check_where<float>({4}, {3, 4}, {3, 1});
  check_where<double>({}, {2, 2}, {2, 2});
  check_where<float>({300, 200}, {200}, {300, 1});  // parallel
}

template <class T>
void check_broadcast_to(const Shape& sx, const Shape& sy) {
  std::vector<T> x(sx.num_elements());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(i % 7 == 3 ? 1 : i);
  std::vector<T> y(sy.num_elements());
  broadcast_to(x.data(), sx, y.data(), sy);
  for (std::int64_t i = 0; i < sy.num_elements(); ++i) ASSERT_EQ(y[i], x[broadcast_index(unravel(i, sy), sx)]) << i;
}

TEST(BroadcastTo, AllDTypes) {
  check_broadcast_to<float>({3}, {2, 3});
  check_broadcast_to<double>({}, {4});
  check_broadcast_to<std::int32_t>({2, 1}, {3, 2, 5});
  check_broadcast_to<std::int64_t>({1, 4}, {3, 4});
  check_broadcast_to<std::int64_t>({2, 0}, {3, 2, 0});
  check_broadcast_to<std::int32_t>({1000, 1}, {1000, 70});
}

TEST(BroadcastTo, Bool) {
  bool x[2] = {true, false};
  bool y[6];
  broadcast_to(x, Shape{2, 1}, y, Shape{2, 3});
  EXPECT_TRUE(y[0] && y[1] && y[2]);
  EXPECT_FALSE(y[3] || y[4] || y[5]);
}

TEST(BroadcastTo, BadShapeThrows) {
  float x[3] = {}, y[8];
  EXPECT_THROW(broadcast_to(x, Shape{3}, y, Shape{2, 4}), std::invalid_argument);
  EXPECT_THROW(broadcast_to(x, Shape{3, 1}, y, Shape{3}), std::invalid_argument);
}

template <class T>
void check_sum_to(const Shape& sx, const Shape& sy) {
  auto x = random_vector<T>(sx.num_elements(), 10, -4, 4);
  if constexpr (std::is_integral_v<T>)
    for (auto& v : x) v = static_cast<T>(v);
  std::vector<T> y(sy.num_elements(), T(99));
  sum_to_shape(x.data(), sx, y.data(), sy);
  std::vector<double> want(sy.num_elements(), 0.0);
  // Index y by broadcasting it to sx.
  for (std::int64_t i = 0; i < sx.num_elements(); ++i) want[broadcast_index(unravel(i, sx), sy)] += double(x[i]);
  for (std::int64_t i = 0; i < sy.num_elements(); ++i) ASSERT_NEAR(double(y[i]), want[i], 1e-4) << i;
}

TEST(SumToShape, Unbroadcasts) {
  check_sum_to<float>({2, 3}, {3});
  check_sum_to<double>({2, 3}, {2, 1});
  check_sum_to<double>({2, 3}, {});
  check_sum_to<float>({4, 2, 3}, {2, 1});
  check_sum_to<double>({4, 2, 3}, {4, 2, 3});
  check_sum_to<double>({3}, {1, 3});
  check_sum_to<std::int32_t>({5, 4}, {1, 4});
  check_sum_to<std::int64_t>({5, 4}, {5, 1});
  check_sum_to<float>({0, 3}, {3});
}

TEST(SumToShape, BadTargetThrows) {
  float x[6] = {}, y[6];
  EXPECT_THROW(sum_to_shape(x, Shape{2, 3}, y, Shape{2}), std::invalid_argument);
  EXPECT_THROW(sum_to_shape(x, Shape{2, 3}, y, Shape{2, 2, 3}), std::invalid_argument);
}

TEST(Cast, ConvertsBetweenDTypes) {
  float x[4] = {1.7f, -2.2f, 0.0f, 3.0f};
  std::int32_t i[4];
  bool b[4];
  double d[4];
  cast(x, i, 4);
  cast(x, b, 4);
  cast(x, d, 4);
  EXPECT_EQ(i[0], 1);
  EXPECT_EQ(i[1], -2);
  EXPECT_TRUE(b[0] && b[1] && !b[2] && b[3]);
  EXPECT_EQ(d[1], double(-2.2f));
  std::int64_t back[4];
  cast(b, back, 4);
  EXPECT_EQ(back[2], 0);
  EXPECT_EQ(back[3], 1);
}

// Element-wise kernels split their range into one equal chunk per thread: 3 grains of work on 2
// threads is 1.5 grains each, not 2 and 1.
TEST(ElementwiseParallelism, OneEqualChunkPerThread) {
  const int prev = set_num_threads(2);
  if (num_threads() < 2) {
    set_num_threads(prev);
    GTEST_SKIP() << "needs 2 hardware threads";
  }
  std::mutex mu;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  parallel_for(3 * kElementwiseGrain + 1, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    ranges.emplace_back(b, e);
  });
  set_num_threads(prev);
  std::sort(ranges.begin(), ranges.end());
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].first, 0);
  EXPECT_EQ(ranges[0].second, ranges[1].first);
  EXPECT_EQ(ranges[1].second, 3 * kElementwiseGrain + 1);
  EXPECT_LE(std::abs((ranges[0].second - ranges[0].first) - (ranges[1].second - ranges[1].first)), 1);
}

}  // namespace
}  // namespace tapeflow::kernels
