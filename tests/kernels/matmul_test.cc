#include "tape/kernels/matmul.h"

#include <gtest/gtest.h>

#include <Eigen/Core>

#include <fstream>
#include <string>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tape/kernels/parallel.h"
#include "tests/kernels/reference.h"

namespace tapeflow::kernels {
namespace {

using testref::random_vector;

// Reference product in double. A stored [m,k] (or [k,m] if ta), B [k,n] (or [n,k] if tb).
template <class T>
std::vector<double> ref_matmul(const T* a, const T* b, std::int64_t m, std::int64_t k, std::int64_t n, bool ta,
                               bool tb) {
  std::vector<double> c(m * n, 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p) s += double(ta ? a[p * m + i] : a[i * k + p]) * double(tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = s;
    }
  return c;
}

template <class T>
void check(std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb, bool bcast_a,
           bool bcast_b, double tol) {
  const std::int64_t as = bcast_a ? 0 : m * k, bs = bcast_b ? 0 : k * n;
  auto a = random_vector<T>((bcast_a ? 1 : batch) * m * k, 1);
  auto b = random_vector<T>((bcast_b ? 1 : batch) * k * n, 2);
  std::vector<T> c(batch * m * n, T(-7));
  matmul(a.data(), b.data(), c.data(), batch, m, k, n, ta, tb, as, bs);
  for (std::int64_t i = 0; i < batch; ++i) {
    auto want = ref_matmul(a.data() + i * as, b.data() + i * bs, m, k, n, ta, tb);
    for (std::int64_t j = 0; j < m * n; ++j)
      ASSERT_NEAR(double(c[i * m * n + j]), want[j], tol)
          << "batch " << i << " m" << m << " k" << k << " n" << n << " ta" << ta << " tb" << tb;
  }
}

TEST(Matmul, AllTransposeFlagsSmallAndLarge) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check<double>(1, 3, 4, 5, ta, tb, false, false, 1e-12);
      check<float>(1, 2, 1, 3, ta, tb, false, false, 1e-5);
      check<double>(1, 130, 70, 90, ta, tb, false, false, 1e-10);  // parallel split over rows
      check<float>(1, 40, 60, 150, ta, tb, false, false, 1e-4);     // split over columns
      check<double>(1, 1, 700, 300, ta, tb, false, false, 1e-10);   // row vector: GEMV blocks
      check<double>(1, 600, 300, 1, ta, tb, false, false, 1e-10);   // column vector
      check<float>(1, 300, 8, 200, ta, tb, false, false, 1e-5);     // shallow k
    }
}

TEST(Matmul, BatchWithBroadcastStrides) {
  for (bool ta : {false, true}) {
    check<double>(4, 3, 5, 2, ta, !ta, false, false, 1e-12);
    check<double>(4, 3, 5, 2, ta, ta, true, false, 1e-12);
    check<float>(3, 4, 2, 6, ta, false, false, true, 1e-5);
    check<float>(5, 40, 30, 50, ta, true, false, true, 1e-4);  // parallel over batch
    check<double>(2, 64, 64, 64, ta, false, true, false, 1e-10);
  }
}

TEST(Matmul, EmptyDims) {
  std::vector<float> a(6, 1.0f), b(6, 1.0f), c(4, 3.0f);
  matmul(a.data(), b.data(), c.data(), 1, 2, 0, 2, false, false, 0, 0);  // k = 0 -> zeros
  EXPECT_EQ(c, std::vector<float>(4, 0.0f));
  matmul(a.data(), b.data(), c.data(), 0, 2, 3, 2, false, false, 6, 6);  // nothing
  matmul(a.data(), b.data(), c.data(), 1, 0, 3, 2, false, false, 0, 0);
}

TEST(Matmul, ParallelProductRepeatsBitwise) {
  const std::int64_t m = 200, k = 150, n = 120;
  auto a = random_vector<float>(m * k, 3);
  auto b = random_vector<float>(k * n, 4);
  std::vector<float> c1(m * n), c2(m * n);
  matmul(a.data(), b.data(), c1.data(), 1, m, k, n, false, false, 0, 0);
  matmul(a.data(), b.data(), c2.data(), 1, m, k, n, false, false, 0, 0);
  EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)));
}

TEST(Solve, KnownAnswer) {
  // [[2, 1], [1, 3]] x = [[3, 5], [5, 10]] -> x = [[0.8, 1], [1.4, 3]]
  const double a[4] = {2, 1, 1, 3}, b[4] = {3, 5, 5, 10};
  double x[4];
  solve(a, b, x, 2, 2);
  EXPECT_NEAR(x[0], 0.8, 1e-12);
  EXPECT_NEAR(x[1], 1.0, 1e-12);
  EXPECT_NEAR(x[2], 1.4, 1e-12);
  EXPECT_NEAR(x[3], 3.0, 1e-12);
}

TEST(Solve, NeedsPivotingAndMatchesResidual) {
  const std::int64_t n = 20;
  auto a = random_vector<float>(n * n, 5);
  a[0] = 0;  // forces a row swap
  auto b = random_vector<float>(n * 3, 6);
  std::vector<float> x(n * 3);
  solve(a.data(), b.data(), x.data(), n, 3);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      double r = 0;
      for (std::int64_t p = 0; p < n; ++p) r += double(a[i * n + p]) * x[p * 3 + j];
      EXPECT_NEAR(r, b[i * 3 + j], 1e-3);
    }
}

TEST(Solve, SingularAndNonFiniteThrow) {
  const double a[4] = {1, 2, 2, 4}, b[2] = {1, 1};
  double x[2];
  try {
    solve(a, b, x, 2, 1);
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("solve: matrix is singular"), std::string::npos) << e.what();
  }
  const float z[4] = {0, 0, 0, 0}, fb[2] = {1, 1};
  float fx[2];
  EXPECT_THROW(solve(z, fb, fx, 2, 1), std::invalid_argument);
  const double nan_a[4] = {1, NAN, 0, 1};
  EXPECT_THROW(solve(nan_a, b, x, 2, 1), std::invalid_argument);
  EXPECT_THROW(solve(a, b, x, -1, 1), std::invalid_argument);
}

TEST(ConfigureEigenCache, SetsTheRealL2) {
  configure_eigen_cache();
  configure_eigen_cache();  // second call is a no-op
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index2/size");
  std::string s;
  if (!(f >> s)) GTEST_SKIP() << "no cache info in /sys";
  std::ptrdiff_t kib = std::stoll(s);
  EXPECT_EQ(Eigen::l2CacheSize(), kib * 1024) << s;
}

}  // namespace
}  // namespace tapeflow::kernels
