#include "tape/kernels/nn.h"

#include <Eigen/Core>  // EIGEN_VECTORIZE_FMA
#include <unsupported/Eigen/SpecialFunctions>
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tape/kernels/parallel.h"
#include "tests/kernels/reference.h"
#include "tests/testing/isa_cap.h"

namespace tapeflow::kernels {
namespace {

using testref::random_vector;

template <class T>
void check_softmax(std::int64_t rows, std::int64_t cols, double scale, double tol) {
  auto x = random_vector<T>(rows * cols, 1, -scale, scale);
  std::vector<T> y(x.size()), ly(x.size());
  softmax(x.data(), rows, cols, y.data());
  log_softmax(x.data(), rows, cols, ly.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, double(x[r * cols + j]));
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(double(x[r * cols + j]) - m);
    for (std::int64_t j = 0; j < cols; ++j) {
      const double lp = double(x[r * cols + j]) - m - std::log(s);
      ASSERT_NEAR(double(y[r * cols + j]), std::exp(lp), tol);
      ASSERT_NEAR(double(ly[r * cols + j]), lp, tol * (1 + std::abs(lp) + std::abs(m)));  // float rounding of x - lse
    }
  }
}

TEST(Softmax, MatchesReferenceIncludingHugeLogits) {
  check_softmax<double>(4, 7, 3, 1e-12);
  check_softmax<float>(4, 7, 3, 1e-6);
  check_softmax<float>(3, 5, 1000, 1e-5);  // would overflow without the max shift
  check_softmax<double>(2000, 50, 5, 1e-12);  // parallel over rows
  check_softmax<float>(1, 1, 1, 0);         // single column -> exactly 1 / 0
}

// softmax and softmax_grad run per instruction-set level (ukernels/softmax_loops.cc): every level
// and thread count gives the same bits, the float exp within 2 ulp of exp in double (2 of the least
// denormal there: the exp and the scaling by 1 / sum each round once), including
// logits far below the row max (results in the denormals, and 0 below them).
template <class T>
void check_softmax_levels(std::int64_t rows, std::int64_t cols) {
  SCOPED_TRACE(::testing::Message() << "[" << rows << ", " << cols << "]");
  auto x = random_vector<T>(rows * cols, 11, -20, 20);
  for (std::size_t i = 0; i < x.size(); i += 7) x[i] = T(-60) - T(i % 60);  // x - max down to ~-140
  const auto g = random_vector<T>(rows * cols, 12, -1, 1);
  std::vector<T> first_y, first_dx;
  for (CpuIsa isa : testing::host_cpu_levels())
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << cpu_isa_name(isa) << ", " << threads << " threads");
      const testing::IsaCap cap(isa);
      const int prev = set_num_threads(threads);
      std::vector<T> y(x.size()), dx(x.size());
      softmax(x.data(), rows, cols, y.data());
      softmax_grad(y.data(), g.data(), rows, cols, dx.data());
      set_num_threads(prev);
      if (first_y.empty()) {
        first_y = y;
        first_dx = dx;
      } else {
        ASSERT_EQ(0, std::memcmp(first_y.data(), y.data(), y.size() * sizeof(T))) << "softmax bits differ";
        ASSERT_EQ(0, std::memcmp(first_dx.data(), dx.data(), dx.size() * sizeof(T))) << "softmax_grad bits differ";
      }
    }
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x.data() + r * cols;
    double m = -INFINITY, s = 0;
    for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, double(xr[j]));
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(double(xr[j]) - m);
    for (std::int64_t j = 0; j < cols; ++j) {
      // exp of the difference as the kernel rounds it (x - max in T).
      const double want = std::exp(double(T(xr[j] - T(m)))) / s;
      const double tol = std::is_same_v<T, float> ? 6e-7 * want + 3e-45 : 1e-14 * want + 1e-300;
      ASSERT_NEAR(double(first_y[r * cols + j]), want, tol) << "row " << r << " col " << j << " x - max " << xr[j] - m;
    }
  }
}

TEST(Softmax, EveryLevelAndThreadCountGiveTheSameBitsWithinUlpsOfFloat64) {
  for (std::int64_t cols : {1, 7, 16, 17, 49, 100, 1000 + 13}) {
    check_softmax_levels<float>(300, cols);
    check_softmax_levels<double>(40, cols);
  }
}

// The float exp's edges: exp(0) = 1 exactly (a row of equal logits gives exactly 1 / cols), -inf
// gives 0, a NaN gives NaN.
TEST(Softmax, FloatExpEdges) {
  const std::vector<float> x = {0.f, 0.f, 0.f, 0.f, -INFINITY, 3.f, NAN, 1.f};
  std::vector<float> y(x.size());
  softmax(x.data(), 2, 4, y.data());
  for (int j = 0; j < 4; ++j) EXPECT_EQ(y[j], 0.25f);
  softmax(x.data() + 4, 1, 2, y.data());
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 1.f);
  softmax(x.data() + 6, 1, 2, y.data());
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
}

// The float GELU loops run per instruction-set level (ukernels/gelu_loops.cc): at every level and
// thread count gelu gives the bits of the Eigen expression nn.cc evaluated before (this file is
// compiled at the baseline, so these are Eigen's SSE packets: a packet-sized, aligned n keeps every
// element in them) and gelu_grad (whose exp is the softmax's exp_f32) one set of bits, over
// [-12, 12] (erf saturated past ±4√2, exp(-x²/2) down to ~1e-32), both within 2e-6 of float64.
TEST(Gelu, FloatEveryLevelAndThreadCountGivesTheSameBits) {
  const std::int64_t n = 4 * 20000;
  const auto x = random_vector<float>(n, 21, -12, 12);
  const auto g = random_vector<float>(n, 22, -1, 1);
  using A = Eigen::ArrayXf;
  const Eigen::Map<const A> xv(x.data(), n);
  const float c = static_cast<float>(std::numbers::sqrt2 / 2);
  const A want_y = 0.5f * xv * (1.f + (xv * c).erf());
  std::vector<float> want_dx;  // the first level's
  for (CpuIsa isa : testing::host_cpu_levels())
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << cpu_isa_name(isa) << ", " << threads << " threads");
      const testing::IsaCap cap(isa);
      const int prev = set_num_threads(threads);
      std::vector<float> y(n), dx(n);
      gelu(x.data(), y.data(), n);
      gelu_grad(g.data(), x.data(), dx.data(), n);
      set_num_threads(prev);
      ASSERT_EQ(0, std::memcmp(y.data(), want_y.data(), n * sizeof(float))) << "gelu bits differ";
      if (want_dx.empty()) want_dx = dx;
      ASSERT_EQ(0, std::memcmp(dx.data(), want_dx.data(), n * sizeof(float))) << "gelu_grad bits differ";
      for (std::int64_t i = 0; i < n; ++i) {
        const double v = x[i], cdf = 0.5 * (1 + std::erf(v / std::numbers::sqrt2));
        ASSERT_NEAR(y[i], v * cdf, 2e-6 * (1 + std::abs(v * cdf))) << v;
        const double d = g[i] * (cdf + v * std::exp(-0.5 * v * v) * std::numbers::inv_sqrtpi / std::numbers::sqrt2);
        ASSERT_NEAR(dx[i], d, 2e-6 * (1 + std::abs(d))) << v;
      }
    }
}

// The float row kernels (16 partial sums): softmax, layer_norm and layer_norm_grad against double
// references, for widths below, at and around the 16 lanes, and bit-identical whether a row is run
// alone, among many rows in one thread, or with the rows split over threads.
void check_float_rows(std::int64_t rows, std::int64_t cols) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols));
  const auto x = random_vector<float>(rows * cols, 7, -3, 3);
  const auto g = random_vector<float>(rows * cols, 8, -1, 1);
  // A large common offset for the two-pass moments.
  std::vector<float> xs(x);
  for (float& v : xs) v += 100.f;
  const double eps = 1e-3;
  std::vector<float> sm(x.size()), ln(x.size()), lg(x.size());
  softmax(x.data(), rows, cols, sm.data());
  layer_norm(xs.data(), rows, cols, eps, ln.data());
  layer_norm_grad(xs.data(), g.data(), rows, cols, eps, lg.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    const float* sr = xs.data() + r * cols;
    const float* gr = g.data() + r * cols;
    double m = -INFINITY, s = 0, mean = 0, var = 0;
    for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, double(xr[j]));
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(double(xr[j]) - m);
    for (std::int64_t j = 0; j < cols; ++j) mean += double(sr[j]) / double(cols);
    for (std::int64_t j = 0; j < cols; ++j) var += (double(sr[j]) - mean) * (double(sr[j]) - mean) / double(cols);
    const double rstd = 1 / std::sqrt(var + eps);
    double mg = 0, mgy = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      mg += double(gr[j]) / double(cols);
      mgy += double(gr[j]) * (double(sr[j]) - mean) * rstd / double(cols);
    }
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::int64_t i = r * cols + j;
      ASSERT_NEAR(double(sm[i]), std::exp(double(xr[j]) - m) / s, 1e-6);
      const double y = (double(sr[j]) - mean) * rstd;
      ASSERT_NEAR(double(ln[i]), y, 2e-5 * (1 + std::abs(y)));
      ASSERT_NEAR(double(lg[i]), rstd * (double(gr[j]) - mg - y * mgy), 2e-5 * rstd * (1 + std::abs(y)));
    }
    // The same bits for the row alone (one call, one row).
    std::vector<float> one(cols);
    softmax(xr, 1, cols, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), sm.data() + r * cols, cols * sizeof(float)));
    layer_norm(sr, 1, cols, eps, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), ln.data() + r * cols, cols * sizeof(float)));
    layer_norm_grad(sr, gr, 1, cols, eps, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), lg.data() + r * cols, cols * sizeof(float)));
  }
}

TEST(FloatRowKernels, MatchDoubleReferencesAndRepeatRowByRow) {
  for (std::int64_t cols : {1, 7, 15, 16, 17, 49, 64, 100, 1000}) check_float_rows(3, cols);
  check_float_rows(4000, 64);  // parallel over rows
}

// layer_norm_affine against layer_norm then · gamma + beta (the same float operations: equal bits
// unless FMA contracts them), and layer_norm_affine_grad against layer_norm_grad of dy · gamma and
// double column sums; dgamma and dbeta bit-identical on 1, 2 and 3 threads (fixed row chunks).
template <class T>
void check_affine(std::int64_t rows, std::int64_t cols, double tol) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols));
  const auto x = random_vector<T>(rows * cols, 11, 97, 103), dy = random_vector<T>(rows * cols, 12, -1, 1);
  const auto gamma = random_vector<T>(cols, 13, -2, 2), beta = random_vector<T>(cols, 14, -1, 1);
  const double eps = 1e-3;
  std::vector<T> y(x.size()), ln(x.size()), dx(x.size()), u(x.size()), lg(x.size());
  layer_norm_affine(x.data(), gamma.data(), beta.data(), rows, cols, eps, y.data());
  layer_norm(x.data(), rows, cols, eps, ln.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t j = i % static_cast<std::size_t>(cols);
    const T want = ln[i] * gamma[j] + beta[j];
#ifdef EIGEN_VECTORIZE_FMA
    ASSERT_NEAR(double(y[i]), double(want), tol * (1 + std::abs(double(want))));
#else
    ASSERT_EQ(y[i], want) << "element " << i;
#endif
    u[i] = dy[i] * gamma[j];
  }
  layer_norm_grad(x.data(), u.data(), rows, cols, eps, lg.data());
  std::vector<T> dg(cols), db(cols);
  layer_norm_affine_grad(x.data(), gamma.data(), dy.data(), rows, cols, eps, dx.data(), dg.data(), db.data());
  ASSERT_EQ(0, std::memcmp(dx.data(), lg.data(), x.size() * sizeof(T)));
  for (std::int64_t j = 0; j < cols; ++j) {
    double sg = 0, sb = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      sg += double(dy[r * cols + j]) * double(ln[r * cols + j]);
      sb += double(dy[r * cols + j]);
    }
    ASSERT_NEAR(double(dg[j]), sg, tol * (1 + std::abs(sg)) * std::sqrt(double(rows)));
    ASSERT_NEAR(double(db[j]), sb, tol * (1 + std::abs(sb)) * std::sqrt(double(rows)));
  }
  for (int threads : {1, 2, 3}) {
    std::vector<T> dx2(x.size()), dg2(cols), db2(cols);
    tbb::task_arena(threads).execute([&] {
      layer_norm_affine_grad(x.data(), gamma.data(), dy.data(), rows, cols, eps, dx2.data(), dg2.data(), db2.data());
    });
    ASSERT_EQ(0, std::memcmp(dx2.data(), dx.data(), x.size() * sizeof(T))) << threads << " threads";
    ASSERT_EQ(0, std::memcmp(dg2.data(), dg.data(), cols * sizeof(T))) << threads << " threads";
    ASSERT_EQ(0, std::memcmp(db2.data(), db.data(), cols * sizeof(T))) << threads << " threads";
  }
}

TEST(LayerNormAffine, MatchesThreeOpFormAndRepeatsOnAnyThreadCount) {
  for (std::int64_t cols : {1, 7, 16, 17, 64, 100}) check_affine<float>(5, cols, 1e-6);
  check_affine<float>(3000, 64, 1e-6);  // 12 row chunks, parallel
  check_affine<double>(3000, 33, 1e-13);
  check_affine<double>(1, 1, 1e-13);
}

// The row loops are compiled per instruction-set level (ukernels/layer_norm_loops.cc, no FMA
// contraction): every level this CPU has gives the baseline's bits, forward and backward.
template <class T>
void check_levels_agree(std::int64_t rows, std::int64_t cols) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols));
  const auto x = random_vector<T>(rows * cols, 21, -3, 5), dy = random_vector<T>(rows * cols, 22, -1, 1);
  const auto gamma = random_vector<T>(cols, 23, -2, 2), beta = random_vector<T>(cols, 24, -1, 1);
  struct Out {
    std::vector<T> ln, lg, y, dx, dg, db;
  };
  const auto run = [&](CpuIsa isa) {
    const CpuIsa before = set_max_cpu_isa(isa);
    Out o{std::vector<T>(x.size()), std::vector<T>(x.size()), std::vector<T>(x.size()), std::vector<T>(x.size()),
          std::vector<T>(cols), std::vector<T>(cols)};
    layer_norm(x.data(), rows, cols, 1e-3, o.ln.data());
    layer_norm_grad(x.data(), dy.data(), rows, cols, 1e-3, o.lg.data());
    layer_norm_affine(x.data(), gamma.data(), beta.data(), rows, cols, 1e-3, o.y.data());
    layer_norm_affine_grad(x.data(), gamma.data(), dy.data(), rows, cols, 1e-3, o.dx.data(), o.dg.data(), o.db.data());
    set_max_cpu_isa(before);
    return o;
  };
  const Out base = run(CpuIsa::kBaseline);
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (host_cpu_isa() < isa) continue;
    SCOPED_TRACE(std::string(cpu_isa_name(isa)));
    const Out o = run(isa);
    EXPECT_EQ(o.ln, base.ln);
    EXPECT_EQ(o.lg, base.lg);
    EXPECT_EQ(o.y, base.y);
    EXPECT_EQ(o.dx, base.dx);
    EXPECT_EQ(o.dg, base.dg);
    EXPECT_EQ(o.db, base.db);
  }
}

TEST(LayerNormKernels, EveryInstructionSetLevelGivesTheBaselineBits) {
  for (std::int64_t cols : {1, 15, 16, 33, 64, 200}) check_levels_agree<float>(37, cols);
  check_levels_agree<double>(37, 33);
}

template <class T, class I>
void check_xent(std::int64_t rows, std::int64_t cols, double tol) {
  auto x = random_vector<T>(rows * cols, 2, -4, 4);
  std::vector<I> labels(rows);
  for (std::int64_t r = 0; r < rows; ++r) labels[r] = static_cast<I>((r * 7 + 1) % cols);
  std::vector<T> loss(rows), back(rows * cols);
  sparse_softmax_xent(x.data(), labels.data(), rows, cols, loss.data(), back.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, double(x[r * cols + j]));
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(double(x[r * cols + j]) - m);
    const double lse = m + std::log(s);
    ASSERT_NEAR(double(loss[r]), lse - double(x[r * cols + labels[r]]), tol);
    for (std::int64_t j = 0; j < cols; ++j) {
      const double want = std::exp(double(x[r * cols + j]) - lse) - (j == labels[r] ? 1.0 : 0.0);
      ASSERT_NEAR(double(back[r * cols + j]), want, tol);
    }
  }
  // Null backprop computes only the loss.
  std::vector<T> loss2(rows);
  sparse_softmax_xent(x.data(), labels.data(), rows, cols, loss2.data(), static_cast<T*>(nullptr));
  EXPECT_EQ(loss, loss2);
}

TEST(SparseSoftmaxXent, LossAndBackprop) {
  check_xent<double, std::int32_t>(5, 4, 1e-12);
  check_xent<float, std::int64_t>(5, 10, 1e-5);
  check_xent<float, std::int32_t>(3000, 10, 1e-5);
}

TEST(SparseSoftmaxXent, BadLabelNamesLabelAndCols) {
  const float x[6] = {};
  float loss[2], back[6];
  const std::int64_t labels[2] = {0, 3};
  try {
    sparse_softmax_xent(x, labels, 2, 3, loss, back);
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("label 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 3)"), std::string::npos) << msg;
  }
  const std::int32_t neg[2] = {-1, 0};
  EXPECT_THROW(sparse_softmax_xent(x, neg, 2, 3, loss, back), std::invalid_argument);
}

// Distance in float ulps between y and the correctly rounded reference.
double ulps(float y, double ref) {
  const float r = static_cast<float>(ref);
  const double ulp = std::nextafter(std::abs(r), INFINITY) - std::abs(r);
  return std::abs(double(y) - ref) / ulp;
}

// The bounds nn.h states, from a scan of every float in [-20, 20]. Without FMA, Eigen's Horner
// steps round twice (and it clamps at 7.905 instead of 7.999), so its worst case is 6.88 ulp at
// x = 5.82787609, where the FMA path is within 5. This test is compiled with nn.cc's flags, so
// EIGEN_VECTORIZE_FMA names the path the kernel took.
#ifdef EIGEN_VECTORIZE_FMA
constexpr double kTanhMaxUlp = 5.0;  // measured max 4.90 at x = 5.12603903
#else
constexpr double kTanhMaxUlp = 7.0;  // measured max 6.88 at x = 5.82787609
#endif

TEST(Tanh, FloatWithinDocumentedUlpAndSaturates) {
  // 200,001 points over [-10, 10], both scans' worst inputs, then the special values;
  // n > kElementwiseGrain runs in parallel.
  std::vector<float> x;
  for (int i = -100000; i <= 100000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
  for (const float w : {5.82787609f, 5.12603903f}) {
    x.push_back(w);
    x.push_back(-w);
  }
  const std::vector<float> special = {0.f, -0.f, 1e-30f, 3e-4f, 8.f, -8.f, 30.f, INFINITY, -INFINITY};
  x.insert(x.end(), special.begin(), special.end());
  std::vector<float> y(x.size());
  tanh(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_LT(ulps(y[i], std::tanh(double(x[i]))), kTanhMaxUlp) << "x = " << x[i];
  const std::size_t s = x.size() - special.size();
  EXPECT_TRUE(std::signbit(y[s + 1]));  // tanh(-0) = -0
  EXPECT_EQ(y[s + 2], 1e-30f);
  EXPECT_EQ(y[s + 4], 1.f);
  EXPECT_EQ(y[s + 5], -1.f);
  EXPECT_EQ(y[s + 7], 1.f);
  EXPECT_EQ(y[s + 8], -1.f);
  const float nan = NAN;
  float out = 0;
  tanh(&nan, &out, 1);
  EXPECT_TRUE(std::isnan(out));
}

// nn.h's bound for elu<float>: every negative float down to -30 measured within 2.43 ulp of
// double expm1 with FMA, 2.50 without. Here: a strided sweep of the negative floats, the scan's
// worst inputs and the special values; positives and NaN pass through.
TEST(Elu, FloatWithinThreeUlpOfExpm1AndPassesPositivesThrough) {
  std::vector<float> x;
  const float lo = -30.f;
  std::uint32_t end = 0;
  std::memcpy(&end, &lo, sizeof end);
  for (std::uint32_t bits = 0x80000001u; bits <= end; bits += 997) {
    float f = 0;
    std::memcpy(&f, &bits, sizeof f);
    x.push_back(f);
  }
  for (const float v : {-0.00774970418f, -8.70263195f, -1e-30f, -1e-8f, -88.f, -1e4f}) x.push_back(v);
  const std::size_t negatives = x.size();
  for (const float v : {0.f, -0.f, 1e-30f, 0.5f, 3.f, 1e30f, INFINITY, -INFINITY, NAN}) x.push_back(v);
  std::vector<float> y(x.size());
  elu(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  for (std::size_t i = 0; i < negatives; ++i) ASSERT_LT(ulps(y[i], std::expm1(double(x[i]))), 3.0) << "x = " << x[i];
  const std::size_t s = negatives;
  EXPECT_EQ(y[s], 0.f);
  EXPECT_TRUE(std::signbit(y[s + 1]));  // expm1(-0) = -0
  EXPECT_EQ(y[s + 2], 1e-30f);
  EXPECT_EQ(y[s + 3], 0.5f);
  EXPECT_EQ(y[s + 4], 3.f);
  EXPECT_EQ(y[s + 5], 1e30f);
  EXPECT_EQ(y[s + 6], INFINITY);
  EXPECT_EQ(y[s + 7], -1.f);
  EXPECT_TRUE(std::isnan(y[s + 8]));
}

TEST(Elu, DoubleIsStdExpm1) {
  auto x = random_vector<double>(100000, 3, -6, 6);
  std::vector<double> y(x.size());
  elu(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] > 0 ? x[i] : std::expm1(x[i]));
}

TEST(Tanh, DoubleIsStdTanh) {
  auto x = random_vector<double>(1000, 3, -6, 6);
  std::vector<double> y(x.size());
  tanh(x.data(), y.data(), 1000);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], std::tanh(x[i]));
}

template <class T>
void check_activation_grads(std::int64_t n) {
  auto x = random_vector<T>(n, 4, -2, 2), dy = random_vector<T>(n, 5, -1, 1);
  x[0] = T(0);  // the kink counts as the negative side
  const T alpha = T(0.3);
  std::vector<T> y(x.size()), lr(x.size()), lrg(x.size()), rg(x.size()), tg(x.size()), eg(x.size());
  tanh(x.data(), y.data(), n);
  elu_grad(dy.data(), x.data(), eg.data(), n);  // x stands for the elu output: any sign works
  leaky_relu(x.data(), alpha, lr.data(), n);
  leaky_relu_grad(dy.data(), x.data(), alpha, lrg.data(), n);
  relu_grad(dy.data(), x.data(), rg.data(), n);
  tanh_grad(y.data(), dy.data(), tg.data(), n);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(lr[i], x[i] > 0 ? x[i] : alpha * x[i]);
    ASSERT_EQ(lrg[i], x[i] > 0 ? dy[i] : alpha * dy[i]);
    ASSERT_EQ(rg[i], x[i] > 0 ? dy[i] : T(0));
    ASSERT_EQ(eg[i], x[i] < 0 ? dy[i] * (x[i] + T(1)) : dy[i]) << i;
    ASSERT_NEAR(double(tg[i]), double(dy[i]) * (1 - double(y[i]) * double(y[i])), 1e-6);
  }
}

TEST(ActivationGrads, MatchFormulasSerialAndParallel) {
  check_activation_grads<float>(37);
  check_activation_grads<double>(37);
  check_activation_grads<float>(100003);  // > kElementwiseGrain: parallel chunks
}

}  // namespace
}  // namespace tapeflow::kernels
