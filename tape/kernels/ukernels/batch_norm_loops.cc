// The batch-normalization kernels' column loops (tape/kernels/batch_norm.h), compiled once per
// instruction-set level into kernels::isa_<level> (TAPEFLOW_KERNEL_ISA; tape/CMakeLists.txt), each
// call one block of columns [c0, c1) of the [n, c] view. Plain loops over rows and columns, which
// GCC and clang vectorize along the columns at the level's width; this file alone is compiled with
// -ffp-contract=off (no multiply-add is fused), so every level rounds each operation as the
// baseline does and gives its bits.
#ifndef TAPEFLOW_KERNEL_ISA
#error "batch_norm_loops.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#include <cmath>
#include <cstdint>
#include <vector>

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

template <class T>
void batch_norm_forward_columns(const T* x, std::int64_t n, std::int64_t c, std::int64_t c0, std::int64_t c1,
                                const T* gamma, const T* beta, double eps, T* y, T* mean, T* var, T* inv) {
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
}

template <class T>
void batch_norm_backward_columns(const T* x, const T* g, std::int64_t n, std::int64_t c, std::int64_t c0,
                                 std::int64_t c1, const T* gamma, const T* mean, const T* inv, T* dx, T* dgamma,
                                 T* dbeta) {
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
}

template void batch_norm_forward_columns<float>(const float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                                const float*, const float*, double, float*, float*, float*, float*);
template void batch_norm_forward_columns<double>(const double*, std::int64_t, std::int64_t, std::int64_t,
                                                 std::int64_t, const double*, const double*, double, double*, double*,
                                                 double*, double*);
template void batch_norm_backward_columns<float>(const float*, const float*, std::int64_t, std::int64_t, std::int64_t,
                                                 std::int64_t, const float*, const float*, const float*, float*,
                                                 float*, float*);
template void batch_norm_backward_columns<double>(const double*, const double*, std::int64_t, std::int64_t,
                                                  std::int64_t, std::int64_t, const double*, const double*,
                                                  const double*, double*, double*, double*);

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
