#include "tape/kernels/matmul.h"

#include <gtest/gtest.h>

#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tape/core/random.h"
#include "tape/kernels/gemm/internal/packed.h"
#include "tape/kernels/parallel.h"
#include "tests/kernels/reference.h"

namespace tapeflow::kernels {
namespace {

using testref::random_vector;

// Reference product in double. A stored [m,k] (or [k,m] if ta), B [k,n] (or [n,k] if tb).
template <class T>
std::vector<double> ref_matmul(const T* a, const T* b, std::int64_t m, std::int64_t k, std::int64_t n, bool ta,
                               bool tb) {
  std::vector<double> ad(m * k), bd(k * n), c(m * n, 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p) ad[i * k + p] = ta ? a[p * m + i] : a[i * k + p];
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < n; ++j) bd[p * n + j] = tb ? b[j * k + p] : b[p * n + j];
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p)
      for (std::int64_t j = 0; j < n; ++j) c[i * n + j] += ad[i * k + p] * bd[p * n + j];
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

// Tolerance for a k-term product of values in [-1, 1]: k roundings of partial sums <= k.
template <class T>
double sum_tol(std::int64_t k) {
  return 4.0 * double(std::numeric_limits<T>::epsilon()) * double(k + 1);
}

// Every size from 1 to ~70 in each of m, k, n crosses the micro-tile edges (6 rows, 16 floats or
// 8 doubles) and the Eigen / AVX2 dispatch; C starts as NaN to check that it is overwritten.
template <class T>
void random_shapes(std::uint64_t seed, int count) {
  Generator g(seed);
  for (int t = 0; t < count; ++t) {
    double u[5];
    g.fill_uniform(u, 5, 0.0, 1.0);
    const std::int64_t m = 1 + std::int64_t(u[0] * 70), k = 1 + std::int64_t(u[1] * 70);
    const std::int64_t n = 1 + std::int64_t(u[2] * 70);
    const bool ta = u[3] < 0.5, tb = u[4] < 0.5;
    auto a = random_vector<T>(m * k, seed + 2 * t), b = random_vector<T>(k * n, seed + 2 * t + 1);
    std::vector<T> c(m * n, std::numeric_limits<T>::quiet_NaN());
    matmul(a.data(), b.data(), c.data(), 1, m, k, n, ta, tb, 0, 0);
    const auto want = ref_matmul(a.data(), b.data(), m, k, n, ta, tb);
    for (std::int64_t j = 0; j < m * n; ++j)
      ASSERT_NEAR(double(c[j]), want[j], sum_tol<T>(k))
          << "m" << m << " k" << k << " n" << n << " ta" << ta << " tb" << tb;
  }
}

TEST(Matmul, RandomShapesMatchFloat64Reference) {
  random_shapes<float>(11, 250);
  random_shapes<double>(12, 150);
}

TEST(Matmul, EveryEdgeOfTheMicroTile) {
  // m and n through two micro-tiles (MR = 6, NR = 16 / 8) with every transpose flag.
  for (std::int64_t m = 1; m <= 13; ++m)
    for (std::int64_t n = 1; n <= 33; ++n)
      for (int f = 0; f < 4; ++f) {
        check<float>(1, m, 29, n, f & 1, f & 2, false, false, sum_tol<float>(29));
        if (n <= 17) check<double>(1, m, 35, n, f & 1, f & 2, false, false, sum_tol<double>(35));
      }
}

TEST(Matmul, LargerThanTheCacheBlocks) {
  // k = 700 spans several K blocks, m = 300 several row blocks; n = 530 is not a tile multiple.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check<float>(1, 300, 700, 530, ta, tb, false, false, sum_tol<float>(700));
  check<double>(1, 301, 523, 77, true, false, false, false, sum_tol<double>(523));
  // Wider than one column block of packed B.
  check<float>(1, 13, 300, 8500, false, true, false, false, sum_tol<float>(300));
  // K cut into pieces (k >= 2048 and >= 16 max(m, n)), every transpose flag.
  for (int f = 0; f < 4; ++f) {
    check<float>(1, 64, 6272, 64, f & 1, f & 2, false, false, sum_tol<float>(6272));
    check<double>(1, 7, 2051, 9, f & 1, f & 2, false, false, sum_tol<double>(2051));
  }
}

TEST(Matmul, BatchedStridesAndBroadcastBothKernels) {
  for (int f = 0; f < 4; ++f) {
    const bool ta = f & 1, tb = f & 2;
    check<float>(3, 40, 50, 37, ta, tb, false, false, sum_tol<float>(50));
    check<float>(5, 7, 33, 20, ta, tb, true, false, sum_tol<float>(33));
    check<double>(4, 19, 8, 29, ta, tb, false, true, sum_tol<double>(8));
    check<double>(2, 64, 64, 3, ta, tb, true, true, sum_tol<double>(64));  // thin: Eigen's path
  }
}

// C for every thread count must be the bits of the single-threaded run: only M and N are cut,
// and each element's K order is fixed.
template <class T>
void same_bits_for_any_thread_count(std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n, bool ta,
                                    bool tb, bool bcast_b) {
  auto a = random_vector<T>(batch * m * k, 21);
  auto b = random_vector<T>((bcast_b ? 1 : batch) * k * n, 22);
  std::vector<T> want(batch * m * n), got(batch * m * n);
  const int prev = set_num_threads(1);
  matmul(a.data(), b.data(), want.data(), batch, m, k, n, ta, tb, m * k, bcast_b ? 0 : k * n);
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    matmul(a.data(), b.data(), got.data(), batch, m, k, n, ta, tb, m * k, bcast_b ? 0 : k * n);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(T)))
        << "threads " << threads << " batch " << batch << " m" << m << " k" << k << " n" << n;
  }
  set_num_threads(prev);
}

// The K cut's partial outputs are bounded: a product whose output exceeds 2^18 elements keeps one
// unbroken K loop even where K dwarfs it, so its columns carry the bits of a batch of two half-width
// products (a batch never cuts K; B transposed, so each half is contiguous).
TEST(Matmul, LargeOutputsAreNotCutAlongK) {
  const std::int64_t m = 520, n = 512, k = 8400;  // m n = 266240 > 2^18, k >= 16 max(m, n)
  const auto a = random_vector<float>(m * k, 31);
  const auto b = random_vector<float>(n * k, 32);
  std::vector<float> full(m * n), halves(m * n);
  matmul(a.data(), b.data(), full.data(), 1, m, k, n, false, true, 0, 0);
  matmul(a.data(), b.data(), halves.data(), 2, m, k, n / 2, false, true, 0, (n / 2) * k);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      ASSERT_EQ(full[i * n + j], halves[(j / (n / 2)) * m * (n / 2) + i * (n / 2) + j % (n / 2)]) << i << ", " << j;
}

TEST(Matmul, BitwiseEqualAcrossThreadCounts) {
  same_bits_for_any_thread_count<float>(1, 131, 300, 97, false, false, false);  // rows cut
  same_bits_for_any_thread_count<float>(1, 50, 270, 301, true, true, false);    // columns cut
  same_bits_for_any_thread_count<float>(3, 64, 64, 64, false, true, true);      // batch 3: products cut too
  same_bits_for_any_thread_count<double>(1, 257, 129, 65, true, false, false);
  same_bits_for_any_thread_count<float>(1, 64, 6272, 64, true, false, false);   // K cut (a weight gradient)
  same_bits_for_any_thread_count<double>(1, 20, 4001, 30, false, true, false);  // K cut, pieces of unequal k
  same_bits_for_any_thread_count<float>(1, 20000, 64, 1, false, false, false);  // GEMV (Eigen), 5 parts
  same_bits_for_any_thread_count<float>(1, 2, 300, 2000, false, true, false);   // two rows (Eigen), 4 parts
  same_bits_for_any_thread_count<double>(7, 30, 40, 5, true, false, false);     // thin batch (Eigen)
}

// packed_gemm runs only at cpu_isa() >= kAvx2 (tape/core/cpu_isa.h): below, these tests skip.
#define SKIP_BELOW_AVX2() \
  if (!internal::packed_gemm_runs()) GTEST_SKIP() << "kernels' level " << cpu_isa_name(cpu_isa()) << " is below avx2"

// The property the parallel split relies on: any partition of C into packed_gemm calls gives the
// bits of one call.
template <class T>
void blocks_equal_whole(std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb) {
  auto a = random_vector<T>(m * k, 31), b = random_vector<T>(k * n, 32);
  const std::int64_t lda = ta ? m : k, ldb = tb ? k : n;
  std::vector<T> whole(m * n), parts(m * n);
  internal::packed_gemm(m, n, k, a.data(), lda, ta, b.data(), ldb, tb, whole.data(), n);
  const std::int64_t rows[] = {0, 5, 17, m}, cols[] = {0, 3, 40, n};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      const std::int64_t r0 = rows[i], c0 = cols[j];
      internal::packed_gemm(rows[i + 1] - r0, cols[j + 1] - c0, k, ta ? a.data() + r0 : a.data() + r0 * lda, lda, ta,
                          tb ? b.data() + c0 * ldb : b.data() + c0, ldb, tb, parts.data() + r0 * n + c0, n);
    }
  EXPECT_EQ(0, std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(T))) << "m" << m << " k" << k << " n" << n;
}

TEST(GemmAvx2, AnyPartitionOfCGivesTheSameBits) {
  SKIP_BELOW_AVX2();
  for (int f = 0; f < 4; ++f) {
    blocks_equal_whole<float>(61, 530, 75, f & 1, f & 2);
    blocks_equal_whole<double>(45, 290, 51, f & 1, f & 2);
  }
}

// packed_gemm directly (matmul sends thin products to Eigen): every edge of the micro-tile with one
// and with several K blocks, C with a row stride wider than n whose extra columns stay untouched.
template <class T>
void check_packed_gemm(std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb) {
  auto a = random_vector<T>(m * k, 41), b = random_vector<T>(k * n, 42);
  const std::int64_t ldc = n + 3;
  std::vector<T> c(m * ldc, std::numeric_limits<T>::quiet_NaN());
  internal::packed_gemm(m, n, k, a.data(), ta ? m : k, ta, b.data(), tb ? k : n, tb, c.data(), ldc);
  const auto want = ref_matmul(a.data(), b.data(), m, k, n, ta, tb);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j)
      ASSERT_NEAR(double(c[i * ldc + j]), want[i * n + j], sum_tol<T>(k))
          << "m" << m << " k" << k << " n" << n << " ta" << ta << " tb" << tb;
    for (std::int64_t j = n; j < ldc; ++j) ASSERT_TRUE(std::isnan(c[i * ldc + j])) << "wrote past n at row " << i;
  }
}

TEST(GemmAvx2, EveryEdgeOfTheMicroTile) {
  SKIP_BELOW_AVX2();
  for (std::int64_t m = 1; m <= 13; ++m)
    for (std::int64_t n = 1; n <= 33; ++n)
      for (int f = 0; f < 4; ++f) {
        check_packed_gemm<float>(m, 1 + (m * n) % 11, n, f & 1, f & 2);
        if (n <= 17) check_packed_gemm<double>(m, 1 + (m + n) % 7, n, f & 1, f & 2);
      }
  // Several K blocks: every kind of edge tile also accumulates into C.
  for (int f = 0; f < 4; ++f)
    for (std::int64_t m : {1, 5, 6, 7, 13}) {
      for (std::int64_t n : {3, 8, 12, 16, 24, 35}) check_packed_gemm<float>(m, 700, n, f & 1, f & 2);
      for (std::int64_t n : {3, 4, 6, 8, 12, 19}) check_packed_gemm<double>(m, 600, n, f & 1, f & 2);
    }
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

namespace tapeflow::kernels {
namespace {

// MatmulRhs packs B once; every product must carry the same bits as matmul's for the same shapes:
// several K blocks (k = 1000), an N edge (n = 45, 16-column panels), transposed A and B, thin m (Eigen),
// tiny products (plain loops) and both dtypes.
template <class T>
void check_matmul_rhs_matches_matmul() {
  for (bool tb : {false, true})
    for (std::int64_t k : {3, 64, 1000, 2100})  // 2100: matmul cuts K at m <= 131
      for (std::int64_t n : {5, 16, 45}) {
        const auto b = random_vector<T>(k * n, 11, -1, 1);
        const MatmulRhs<T> rhs(b.data(), k, n, tb);
        for (bool ta : {false, true})
          for (std::int64_t m : {1, 5, 6, 37}) {
            const auto a = random_vector<T>(m * k, 12, -1, 1);
            std::vector<T> want(static_cast<std::size_t>(m * n)), got(want.size(), T(-7));
            matmul(a.data(), b.data(), want.data(), 1, m, k, n, ta, tb, 0, 0);
            rhs.multiply(a.data(), m, got.data(), ta);
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(T)))
                << "ta " << ta << " tb " << tb << " m " << m << " k " << k << " n " << n;
          }
      }
}

TEST(MatmulRhs, BitIdenticalToMatmul) {
  check_matmul_rhs_matches_matmul<float>();
  check_matmul_rhs_matches_matmul<double>();
}

}  // namespace
}  // namespace tapeflow::kernels
