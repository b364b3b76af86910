// Layer normalization over the last axis (nn.h): the plain and the affine forms, forward and gradient.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "tape/kernels/internal/row_sums.h"
#include "tape/kernels/nn.h"
#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {
namespace {

using internal::for_rows;
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
void layer_norm(const T* x, std::int64_t rows, std::int64_t cols, double epsilon, T* y) {
  for_rows(rows, cols, [&](std::int64_t r) { forward_row<false>(x + r * cols, x, x, cols, epsilon, y + r * cols); });
}

template <class T>
void layer_norm_grad(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, double epsilon, T* dx) {
  for_rows(rows, cols, [&](std::int64_t r) {
    grad_row<false, T>(x + r * cols, nullptr, dy + r * cols, cols, epsilon, dx + r * cols, nullptr, nullptr);
  });
}

template <class T>
void layer_norm_affine(const T* x, const T* gamma, const T* beta, std::int64_t rows, std::int64_t cols,
                       double epsilon, T* y) {
  for_rows(rows, cols,
           [&](std::int64_t r) { forward_row<true>(x + r * cols, gamma, beta, cols, epsilon, y + r * cols); });
}

template <class T>
void layer_norm_affine_grad(const T* x, const T* gamma, const T* dy, std::int64_t rows, std::int64_t cols,
                            double epsilon, T* dx, T* dgamma, T* dbeta) {
  std::fill(dgamma, dgamma + cols, T(0));
  std::fill(dbeta, dbeta + cols, T(0));
  if (cols == 0 || rows == 0) return;
  // Fixed chunks of rows (independent of the thread count), each with its own partial dgamma and
  // dbeta, combined in chunk order in double: the bits repeat for any number of threads.
  const std::int64_t chunk = std::max<std::int64_t>(1, kReduceChunk / cols);
  const std::int64_t chunks = (rows + chunk - 1) / chunk;
  std::vector<T> part(static_cast<std::size_t>(chunks * 2 * cols), T(0));
  parallel_for(chunks, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      T* pg = part.data() + c * 2 * cols;
      for (std::int64_t r = c * chunk; r < std::min(rows, (c + 1) * chunk); ++r)
        grad_row<true>(x + r * cols, gamma, dy + r * cols, cols, epsilon, dx + r * cols, pg, pg + cols);
    }
  });
  std::vector<double> sum(static_cast<std::size_t>(2 * cols), 0.0);
  for (std::int64_t c = 0; c < chunks; ++c)
    for (std::int64_t j = 0; j < 2 * cols; ++j) sum[j] += static_cast<double>(part[c * 2 * cols + j]);
  for (std::int64_t j = 0; j < cols; ++j) {
    dgamma[j] = static_cast<T>(sum[j]);
    dbeta[j] = static_cast<T>(sum[cols + j]);
  }
}

#define TAPEFLOW_LAYER_NORM_KERNELS(T)                                                                        \
  template void layer_norm<T>(const T*, std::int64_t, std::int64_t, double, T*);                              \
  template void layer_norm_grad<T>(const T*, const T*, std::int64_t, std::int64_t, double, T*);               \
  template void layer_norm_affine<T>(const T*, const T*, const T*, std::int64_t, std::int64_t, double, T*);   \
  template void layer_norm_affine_grad<T>(const T*, const T*, const T*, std::int64_t, std::int64_t, double, T*, \
                                          T*, T*);
TAPEFLOW_LAYER_NORM_KERNELS(float)
TAPEFLOW_LAYER_NORM_KERNELS(double)
#undef TAPEFLOW_LAYER_NORM_KERNELS

}  // namespace tapeflow::kernels
