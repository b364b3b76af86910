#include "tape/kernels/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tests/kernels/reference.h"
#include "tests/testing/isa_cap.h"

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


// binary_map / unary_map at every instruction-set level this CPU has (forced with
// set_max_cpu_isa), every broadcast case plus long ones that leave a tail after every vector
// width: each element the correctly rounded result (a float op computed in double and rounded
// once is exact; double against long double within half an ulp), NaN and signed zeros as the ops'
// functions give them, and the same bits at every level and on 1 and 2 threads.
template <class T>
T binary_ref(BinaryOp op, T u, T v) {
  using W = std::conditional_t<std::is_same_v<T, float>, double, long double>;
  switch (op) {
    case BinaryOp::kAdd: return T(W(u) + W(v));
    case BinaryOp::kSub: return T(W(u) - W(v));
    case BinaryOp::kMul: return T(W(u) * W(v));
    case BinaryOp::kDiv: return T(W(u) / W(v));
    case BinaryOp::kMaximum: return u >= v ? u : v;
    case BinaryOp::kMinimum: return u <= v ? u : v;
  }
  return T(0);
}

template <class T>
T unary_ref(UnaryOp op, T v) {
  using W = std::conditional_t<std::is_same_v<T, float>, double, long double>;
  switch (op) {
    case UnaryOp::kNegative: return -v;
    case UnaryOp::kSquare: return T(W(v) * W(v));
    case UnaryOp::kSqrt: return T(std::sqrt(W(v)));
    case UnaryOp::kRsqrt: return T(1) / T(std::sqrt(W(v)));  // two roundings, as the op
    case UnaryOp::kReciprocal: return T(W(1) / W(v));
    case UnaryOp::kAbs: return v < 0 ? -v : v;
    case UnaryOp::kRelu: return v > 0 ? v : T(0);
  }
  return T(0);
}

// The same bits, or (doubles: the long double reference rounds twice) one ulp away; NaN matches NaN.
template <class T>
bool close(T got, T want) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::memcmp(&got, &want, sizeof(T)) == 0) return true;
  const T inf = std::numeric_limits<T>::infinity();
  return std::is_same_v<T, double> && (got == std::nextafter(want, inf) || got == std::nextafter(want, -inf));
}

template <class T>
std::vector<T> special_vector(std::int64_t n, std::uint64_t seed) {
  auto v = random_vector<T>(n, seed, -4, 4);
  const T specials[] = {T(0), -T(0), std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                        T(1e-30), T(-7)};
  for (std::size_t i = 0; i < v.size(); i += 5) v[i] = specials[(i / 5) % 6];
  return v;
}

template <class T>
void check_binary_levels(const BroadcastCase& c) {
  const Shape sy = broadcast_shapes(c.a, c.b, "test");
  const auto a = special_vector<T>(c.a.num_elements(), 3), b = special_vector<T>(c.b.num_elements(), 4);
  for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv, BinaryOp::kMaximum,
                      BinaryOp::kMinimum}) {
    std::vector<T> first;
    for (CpuIsa isa : testing::host_cpu_levels())
      for (int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << c.a.to_string() << " op " << static_cast<int>(op) << " " << c.b.to_string() << " at "
                                          << cpu_isa_name(isa) << ", " << threads << " threads");
        const testing::IsaCap cap(isa);
        const int prev = set_num_threads(threads);
        std::vector<T> y(sy.num_elements());
        binary_map<T>(op, a.data(), c.a, b.data(), c.b, y.data(), sy);
        set_num_threads(prev);
        for (std::int64_t i = 0; i < sy.num_elements(); ++i) {
          const auto idx = unravel(i, sy);
          const T want = binary_ref(op, a[broadcast_index(idx, c.a)], b[broadcast_index(idx, c.b)]);
          ASSERT_TRUE(close(y[i], want)) << "at " << i << ": " << y[i] << " vs " << want;
        }
        if (first.empty()) first = y;
        else ASSERT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(T))) << "bits differ";
      }
  }
}

TEST(BinaryMap, EveryLevelAndThreadCountCorrectlyRoundedWithTheSameBits) {
  std::vector<BroadcastCase> cases = kCases;
  for (const BroadcastCase& c : std::vector<BroadcastCase>{{{70000 + 13}, {70000 + 13}}, {{}, {1000 + 13}},
                                                           {{1000 + 13}, {}}, {{300, 67}, {67}}, {{67}, {300, 67}}})
    cases.push_back(c);
  for (const auto& c : cases) {
    check_binary_levels<float>(c);
    check_binary_levels<double>(c);
  }
}

template <class T>
void check_unary_levels() {
  const std::int64_t n = 70000 + 13;
  auto x = special_vector<T>(n, 5);
  for (UnaryOp op : {UnaryOp::kNegative, UnaryOp::kSquare, UnaryOp::kSqrt, UnaryOp::kRsqrt, UnaryOp::kReciprocal,
                     UnaryOp::kAbs, UnaryOp::kRelu}) {
    std::vector<T> first;
    for (CpuIsa isa : testing::host_cpu_levels())
      for (int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << "op " << static_cast<int>(op) << " at " << cpu_isa_name(isa) << ", "
                                          << threads << " threads");
        const testing::IsaCap cap(isa);
        const int prev = set_num_threads(threads);
        std::vector<T> y(n);
        unary_map<T>(op, x.data(), y.data(), n);
        set_num_threads(prev);
        for (std::int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(close(y[i], unary_ref(op, x[i]))) << "at " << i << ": " << x[i] << " -> " << y[i];
        if (first.empty()) first = y;
        else ASSERT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(T))) << "bits differ";
      }
  }
}

TEST(UnaryMap, EveryLevelAndThreadCountCorrectlyRoundedWithTheSameBits) {
  check_unary_levels<float>();
  check_unary_levels<double>();
}

}  // namespace
}  // namespace tapeflow::kernels
