#include "layers/internal/batch_norm_kernel.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tape/kernels/parallel.h"

namespace tapeflow::layers::internal {
namespace {
// Runs f(c0, c1) over column blocks with about kElementwiseGrain elements each.
template <class F>
void for_column_blocks(std::int64_t n, std::int64_t c, F&& f) {
  std::int64_t grain = std::max<std::int64_t>(8, kernels::kElementwiseGrain / std::max<std::int64_t>(n, 1));
  kernels::parallel_for(c, grain, f);
}
}  // namespace

template <class T>
void batch_norm_forward(const T* x, std::int64_t n, std::int64_t c, const T* gamma, const T* beta, double eps, T* y,
                        T* mean, T* var, T* inv) {
  for_column_blocks(n, c, [&](std::int64_t c0, std::int64_t c1) {
    const std::int64_t w = c1 - c0;
    std::vector<double> s(w, 0.0), q(w, 0.0);
    std::vector<T> m(w), sc(w), sh(w);
    for (std::int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * c + c0;
      for (std::int64_t j = 0; j < w; ++j) s[j] += xr[j];
    }
    for (std::int64_t j = 0; j < w; ++j) m[j] = static_cast<T>(s[j] / double(n));
    for (std::int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * c + c0;
      for (std::int64_t j = 0; j < w; ++j) {
        const T d = xr[j] - m[j];
        q[j] += d * d;
      }
    }
    for (std::int64_t j = 0; j < w; ++j) {
      const double v = q[j] / double(n);
      const double iv = 1.0 / std::sqrt(v + eps);
      mean[c0 + j] = m[j];
      var[c0 + j] = static_cast<T>(v);
      inv[c0 + j] = static_cast<T>(iv);
      sc[j] = static_cast<T>(iv * gamma[c0 + j]);
      sh[j] = beta[c0 + j];
    }
    for (std::int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * c + c0;
      T* yr = y + r * c + c0;
      for (std::int64_t j = 0; j < w; ++j) yr[j] = (xr[j] - m[j]) * sc[j] + sh[j];
    }
  });
}

template <class T>
void batch_norm_backward(const T* x, const T* g, std::int64_t n, std::int64_t c, const T* gamma, const T* mean,
                         const T* inv, T* dx, T* dgamma, T* dbeta) {
  for_column_blocks(n, c, [&](std::int64_t c0, std::int64_t c1) {
    const std::int64_t w = c1 - c0;
    std::vector<double> sg(w, 0.0), sgd(w, 0.0);
    for (std::int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * c + c0;
      const T* gr = g + r * c + c0;
      for (std::int64_t j = 0; j < w; ++j) {
        sg[j] += gr[j];
        sgd[j] += gr[j] * (xr[j] - mean[c0 + j]);
      }
    }
    // dx = A·g + B·(x - mean) + C with A = gamma·inv, k = A/n, B = -k·inv²·Σg(x-mean), C = -k·Σg.
    std::vector<T> a(w), b(w), cc(w), m(w);
    for (std::int64_t j = 0; j < w; ++j) {
      const double iv = inv[c0 + j], gm = gamma[c0 + j];
      const double k = gm * iv / double(n);
      const double bj = -k * iv * iv * sgd[j];
      a[j] = static_cast<T>(gm * iv);
      b[j] = static_cast<T>(bj);
      cc[j] = static_cast<T>(-k * sg[j]);
      m[j] = mean[c0 + j];
      dbeta[c0 + j] = static_cast<T>(sg[j]);
      dgamma[c0 + j] = static_cast<T>(sgd[j] * iv);
    }
    for (std::int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * c + c0;
      const T* gr = g + r * c + c0;
      T* dr = dx + r * c + c0;
      for (std::int64_t j = 0; j < w; ++j) dr[j] = a[j] * gr[j] + b[j] * (xr[j] - m[j]) + cc[j];
    }
  });
}

template void batch_norm_forward<float>(const float*, std::int64_t, std::int64_t, const float*, const float*, double,
                                        float*, float*, float*, float*);
template void batch_norm_forward<double>(const double*, std::int64_t, std::int64_t, const double*, const double*,
                                         double, double*, double*, double*, double*);
template void batch_norm_backward<float>(const float*, const float*, std::int64_t, std::int64_t, const float*,
                                         const float*, const float*, float*, float*, float*);
template void batch_norm_backward<double>(const double*, const double*, std::int64_t, std::int64_t, const double*,
                                          const double*, const double*, double*, double*, double*);

}  // namespace tapeflow::layers::internal
