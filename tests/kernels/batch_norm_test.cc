// kernels::batch_norm_forward / batch_norm_backward (tape/kernels/batch_norm.h) at every
// instruction-set level this CPU has, forced with set_max_cpu_isa: within rounding of float64
// loops of the same formulas, and the same bits at every level and for 1 and 2 threads (as the
// header states).
#include "tape/kernels/batch_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tape/kernels/parallel.h"
#include "tests/kernels/reference.h"
#include "tests/testing/isa_cap.h"

namespace tapeflow::kernels {
namespace {

using testing::IsaCap;
using testref::random_vector;

// Forward outputs (y, mean, var, inv) then backward outputs (dx, dgamma, dbeta), concatenated.
template <class T>
std::vector<T> run_both(const std::vector<T>& x, const std::vector<T>& g, const std::vector<T>& gamma,
                        const std::vector<T>& beta, std::int64_t n, std::int64_t c, double eps) {
  std::vector<T> y(n * c), mean(c), var(c), inv(c), dx(n * c), dgamma(c), dbeta(c);
  batch_norm_forward<T>(x.data(), n, c, gamma.data(), beta.data(), eps, y.data(), mean.data(), var.data(), inv.data());
  batch_norm_backward<T>(x.data(), g.data(), n, c, gamma.data(), mean.data(), inv.data(), dx.data(), dgamma.data(),
                         dbeta.data());
  std::vector<T> out;
  for (const auto* v : {&y, &mean, &var, &inv, &dx, &dgamma, &dbeta}) out.insert(out.end(), v->begin(), v->end());
  return out;
}

// The same formulas in float64 (two-pass mean and variance), laid out as run_both's result.
std::vector<double> reference(const std::vector<double>& x, const std::vector<double>& g,
                              const std::vector<double>& gamma, const std::vector<double>& beta, std::int64_t n,
                              std::int64_t c, double eps) {
  std::vector<double> y(n * c), mean(c), var(c), inv(c), dx(n * c), dgamma(c), dbeta(c);
  for (std::int64_t j = 0; j < c; ++j) {
    double s = 0, q = 0, sg = 0, sgx = 0;
    for (std::int64_t r = 0; r < n; ++r) s += x[r * c + j];
    mean[j] = s / double(n);
    for (std::int64_t r = 0; r < n; ++r) q += (x[r * c + j] - mean[j]) * (x[r * c + j] - mean[j]);
    var[j] = q / double(n);
    inv[j] = 1.0 / std::sqrt(var[j] + eps);
    for (std::int64_t r = 0; r < n; ++r) {
      const double xh = (x[r * c + j] - mean[j]) * inv[j];
      y[r * c + j] = xh * gamma[j] + beta[j];
      sg += g[r * c + j];
      sgx += g[r * c + j] * xh;
    }
    dbeta[j] = sg;
    dgamma[j] = sgx;
    for (std::int64_t r = 0; r < n; ++r) {
      const double xh = (x[r * c + j] - mean[j]) * inv[j];
      dx[r * c + j] = gamma[j] * inv[j] / double(n) * (double(n) * g[r * c + j] - sg - xh * sgx);
    }
  }
  std::vector<double> out;
  for (const auto* v : {&y, &mean, &var, &inv, &dx, &dgamma, &dbeta}) out.insert(out.end(), v->begin(), v->end());
  return out;
}

template <class T>
void check_levels(std::int64_t n, std::int64_t c, double rtol) {
  SCOPED_TRACE(::testing::Message() << "[" << n << ", " << c << "]");
  const double eps = 1e-3;
  auto x = random_vector<T>(n * c, 31, -2, 3), g = random_vector<T>(n * c, 32);
  auto gamma = random_vector<T>(c, 33, 0.5, 1.5), beta = random_vector<T>(c, 34);
  const auto ref = reference(std::vector<double>(x.begin(), x.end()), std::vector<double>(g.begin(), g.end()),
                             std::vector<double>(gamma.begin(), gamma.end()),
                             std::vector<double>(beta.begin(), beta.end()), n, c, eps);
  std::vector<T> first;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa > host_cpu_isa()) continue;
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << cpu_isa_name(isa) << ", " << threads << " threads");
      const IsaCap cap(isa);
      const int prev = set_num_threads(threads);
      const auto got = run_both(x, g, gamma, beta, n, c, eps);
      set_num_threads(prev);
      ASSERT_EQ(got.size(), ref.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_LE(std::abs(double(got[i]) - ref[i]), rtol * (std::abs(ref[i]) + 1.0)) << "value " << i;
      if (first.empty()) first = got;
      else ASSERT_EQ(got, first) << "bits differ from the baseline's";
    }
  }
}

TEST(BatchNormKernel, EveryLevelAndThreadCountGiveTheSameBitsWithinRoundingOfFloat64) {
  check_levels<float>(256, 64, 1e-4);    // columns a multiple of every vector width
  check_levels<float>(37, 1000 + 13, 1e-4);  // a tail after every width, several column blocks
  check_levels<double>(64, 67, 1e-12);
  check_levels<double>(1, 5, 1e-12);  // one row: var 0
}

}  // namespace
}  // namespace tapeflow::kernels
