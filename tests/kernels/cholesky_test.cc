#include "tape/kernels/cholesky.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tape/kernels/parallel.h"
#include "tests/kernels/reference.h"

namespace tapeflow::kernels {
namespace {

using testref::random_vector;

// A = M Mᵀ + n I: symmetric positive definite and well conditioned.
template <class T>
std::vector<T> spd(std::int64_t n, std::uint64_t seed) {
  auto m = random_vector<double>(n * n, seed);
  std::vector<T> a(n * n);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = i == j ? double(n) : 0.0;
      for (std::int64_t p = 0; p < n; ++p) s += m[i * n + p] * m[j * n + p];
      a[i * n + j] = static_cast<T>(s);
    }
  return a;
}

template <class T>
void check_factor_and_solve(std::int64_t n, double tol) {
  SCOPED_TRACE("n=" + std::to_string(n));
  const std::vector<T> a = spd<T>(n, 3 + n);
  std::vector<T> l = a;
  ASSERT_TRUE(cholesky_lower(l.data(), n));
  double scale = 0;
  for (T v : a) scale = std::max(scale, std::abs(double(v)));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      if (j > i) {  // the strict upper triangle is left as it was
        ASSERT_EQ(l[i * n + j], a[i * n + j]) << i << "," << j;
        continue;
      }
      double s = 0;
      for (std::int64_t p = 0; p <= j; ++p) s += double(l[i * n + p]) * double(l[j * n + p]);
      ASSERT_NEAR(s, double(a[i * n + j]), tol * scale) << i << "," << j;
    }
  auto b = random_vector<T>(n, 11);
  std::vector<T> x = b;
  cholesky_solve(l.data(), x.data(), n);
  for (std::int64_t i = 0; i < n; ++i) {
    double r = 0;
    for (std::int64_t j = 0; j < n; ++j) r += double(a[i * n + j]) * double(x[j]);
    ASSERT_NEAR(r, double(b[i]), tol * scale) << i;
  }
}

TEST(Cholesky, FactorsAndSolvesAcrossPanelEdges) {
  for (std::int64_t n : {1, 2, 7, 127, 128, 129, 300}) {
    check_factor_and_solve<double>(n, 1e-12);
    check_factor_and_solve<float>(n, 1e-5);
  }
}

TEST(Cholesky, SameBitsForAnyThreadCount) {
  const std::int64_t n = 333;
  const auto a = spd<float>(n, 5);
  std::vector<std::vector<float>> out;
  for (int t : {1, 2, 3}) {
    const int prev = set_num_threads(t);
    std::vector<float> l = a;
    EXPECT_TRUE(cholesky_lower(l.data(), n));
    set_num_threads(prev);
    out.push_back(l);
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(out[0], out[2]);
}

TEST(Cholesky, RejectsIndefiniteAndNonFinite) {
  // diag(1, -1): the second pivot is negative.
  std::vector<double> a = {1, 0, 0, -1};
  EXPECT_FALSE(cholesky_lower(a.data(), 2));
  // Not positive definite in a later panel: the 200x200 identity with one pivot -1 at row 150.
  const std::int64_t n = 200;
  std::vector<float> b(n * n, 0.0f);
  for (std::int64_t i = 0; i < n; ++i) b[i * n + i] = i == 150 ? -1.0f : 1.0f;
  EXPECT_FALSE(cholesky_lower(b.data(), n));
  // NaN on the diagonal would otherwise pass Eigen's "pivot <= 0" test.
  std::vector<double> c = {4, 0, 0, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_FALSE(cholesky_lower(c.data(), 2));
}

}  // namespace
}  // namespace tapeflow::kernels
