// The layer-normalization row loops (tape/kernels/nn.h, driven by layer_norm.cc), compiled once per
// instruction-set level into kernels::isa_<level> (TAPEFLOW_KERNEL_ISA; tape/CMakeLists.txt), each
// call one block of rows [r0, r1). The float sums are 16 partials (internal/row_sums.h), which the
// compiler keeps in one AVX-512 register, two AVX2 or four SSE ones; this file is compiled with
// -ffp-contract=off (no multiply-add is fused), so every level rounds each operation as the
// baseline does and gives its bits.
#ifndef TAPEFLOW_KERNEL_ISA
#error "layer_norm_loops.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tape/kernels/internal/row_sums.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {
namespace {

using internal::row_sum16;

// Mean and 1 / sqrt(var + epsilon) of one row, two passes, accumulated in double.
void row_moments(const double* x, std::int64_t cols, double epsilon, double& mean, double& rstd) {
  double s = 0;
  for (std::int64_t j = 0; j < cols; ++j) s += x[j];
  mean = cols ? s / static_cast<double>(cols) : 0.0;
  double v = 0;
  for (std::int64_t j = 0; j < cols; ++j) {
    const double d = x[j] - mean;
    v += d * d;
  }
  v = cols ? v / static_cast<double>(cols) : 0.0;
  rstd = 1.0 / std::sqrt(v + epsilon);
}

// The float moments: two passes (mean, then the centred squares) of 16 float partial sums each;
// rstd = 1 / sqrt(var + epsilon) in double.
void row_moments(const float* __restrict x, std::int64_t cols, double epsilon, float& mean, float& rstd) {
  const float inv_n = cols ? 1.f / static_cast<float>(cols) : 0.f;
  const float m = row_sum16(cols, [x](std::int64_t j) { return x[j]; }) * inv_n;
  const float v = row_sum16(cols, [x, m](std::int64_t j) {
                    const float d = x[j] - m;
                    return d * d;
                  }) *
                  inv_n;
  mean = m;
  rstd = static_cast<float>(1.0 / std::sqrt(static_cast<double>(v) + epsilon));
}

// Σ f(j) over one row: 16 float partials for float, one chain for double.
template <class T, class F>
T row_sum(std::int64_t cols, F f) {
  if constexpr (std::is_same_v<T, float>) {
    return row_sum16(cols, f);
  } else {
    T s = 0;
    for (std::int64_t j = 0; j < cols; ++j) s += f(j);
    return s;
  }
}

// One row of y = (x - mean) r (· gamma + beta when kAffine).
template <bool kAffine, class T>
void forward_row(const T* __restrict xr, const T* __restrict gamma, const T* __restrict beta, std::int64_t cols,
                 double epsilon, T* __restrict yr) {
  T m, s;
  row_moments(xr, cols, epsilon, m, s);
  if constexpr (kAffine) {
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - m) * s * gamma[j] + beta[j];
  } else {
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - m) * s;
  }
}

// One row of dx = r (u - mean(u) - y mean(u y)) with u = dy (· gamma when kAffine); kAffine also
// adds dy y to pg and dy to pb (the row's share of dgamma and dbeta).
template <bool kAffine, class T>
void grad_row(const T* __restrict xr, const T* __restrict gamma, const T* __restrict gr, std::int64_t cols,
              double epsilon, T* __restrict dr, T* __restrict pg, T* __restrict pb) {
  T m, rs;
  row_moments(xr, cols, epsilon, m, rs);
  const auto u = [=](std::int64_t j) {
    if constexpr (kAffine) return gr[j] * gamma[j];
    else return gr[j];
  };
  const T inv_n = T(1) / static_cast<T>(cols);
  const T mg = row_sum<T>(cols, u) * inv_n;
  const T mgy = row_sum<T>(cols, [=](std::int64_t j) { return u(j) * ((xr[j] - m) * rs); }) * inv_n;
  for (std::int64_t j = 0; j < cols; ++j) {
    const T y = (xr[j] - m) * rs;
    dr[j] = rs * (u(j) - mg - y * mgy);
    if constexpr (kAffine) {
      pg[j] += gr[j] * y;
      pb[j] += gr[j];
    }
  }
}

}  // namespace

template <class T>
void layer_norm_rows(const T* x, const T* gamma, const T* beta, std::int64_t r0, std::int64_t r1, std::int64_t cols,
                     double epsilon, T* y) {
  for (std::int64_t r = r0; r < r1; ++r) {
    if (gamma) forward_row<true>(x + r * cols, gamma, beta, cols, epsilon, y + r * cols);
    else forward_row<false>(x + r * cols, x, x, cols, epsilon, y + r * cols);
  }
}

template <class T>
void layer_norm_grad_rows(const T* x, const T* gamma, const T* dy, std::int64_t r0, std::int64_t r1,
                          std::int64_t cols, double epsilon, T* dx, T* pg, T* pb) {
  for (std::int64_t r = r0; r < r1; ++r) {
    if (gamma) grad_row<true>(x + r * cols, gamma, dy + r * cols, cols, epsilon, dx + r * cols, pg, pb);
    else grad_row<false, T>(x + r * cols, nullptr, dy + r * cols, cols, epsilon, dx + r * cols, nullptr, nullptr);
  }
}

template void layer_norm_rows<float>(const float*, const float*, const float*, std::int64_t, std::int64_t,
                                     std::int64_t, double, float*);
template void layer_norm_rows<double>(const double*, const double*, const double*, std::int64_t, std::int64_t,
                                      std::int64_t, double, double*);
template void layer_norm_grad_rows<float>(const float*, const float*, const float*, std::int64_t, std::int64_t,
                                          std::int64_t, double, float*, float*, float*);
template void layer_norm_grad_rows<double>(const double*, const double*, const double*, std::int64_t, std::int64_t,
                                           std::int64_t, double, double*, double*, double*);

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
