#include "tape/kernels/nn.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {
namespace {

template <class T>
T row_max(const T* x, std::int64_t cols) {
  T m = x[0];
  for (std::int64_t j = 1; j < cols; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// log(sum(exp(x))) over one row, shifted by the row max for stability.
template <class T>
T log_sum_exp(const T* x, std::int64_t cols) {
  const T m = row_max(x, cols);
  T s = 0;
  for (std::int64_t j = 0; j < cols; ++j) s += std::exp(x[j] - m);
  return m + std::log(s);
}

template <class F>
void for_rows(std::int64_t rows, std::int64_t cols, F&& f) {
  parallel_for(rows, std::max<std::int64_t>(1, kElementwiseGrain / 8 / std::max<std::int64_t>(1, cols)),
               [&](std::int64_t b, std::int64_t e) {
                 for (std::int64_t r = b; r < e; ++r) f(r);
               });
}

}  // namespace

template <class T>
void softmax(const T* x, std::int64_t rows, std::int64_t cols, T* y) {
  if (cols == 0) return;
  for_rows(rows, cols, [&](std::int64_t r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const T m = row_max(xr, cols);
    T s = 0;
    for (std::int64_t j = 0; j < cols; ++j) s += (yr[j] = std::exp(xr[j] - m));
    const T inv = T(1) / s;
    for (std::int64_t j = 0; j < cols; ++j) yr[j] *= inv;
  });
}

template <class T>
void log_softmax(const T* x, std::int64_t rows, std::int64_t cols, T* y) {
  if (cols == 0) return;
  for_rows(rows, cols, [&](std::int64_t r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const T lse = log_sum_exp(xr, cols);
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = xr[j] - lse;
  });
}

template <class T, class I>
void sparse_softmax_xent(const T* logits, const I* labels, std::int64_t rows, std::int64_t cols, T* loss,
                         T* backprop) {
  for (std::int64_t r = 0; r < rows; ++r)
    if (labels[r] < 0 || labels[r] >= cols)
      throw std::invalid_argument("sparse_softmax_cross_entropy_with_logits: label " + std::to_string(labels[r]) +
                                  " at row " + std::to_string(r) + " is outside the valid range [0, " +
                                  std::to_string(cols) + ")");
  for_rows(rows, cols, [&](std::int64_t r) {
    const T* xr = logits + r * cols;
    const T lse = log_sum_exp(xr, cols);
    const std::int64_t label = static_cast<std::int64_t>(labels[r]);
    loss[r] = lse - xr[label];
    if (backprop) {
      T* br = backprop + r * cols;
      for (std::int64_t j = 0; j < cols; ++j) br[j] = std::exp(xr[j] - lse);
      br[label] -= T(1);
    }
  });
}

template void softmax<float>(const float*, std::int64_t, std::int64_t, float*);
template void softmax<double>(const double*, std::int64_t, std::int64_t, double*);
template void log_softmax<float>(const float*, std::int64_t, std::int64_t, float*);
template void log_softmax<double>(const double*, std::int64_t, std::int64_t, double*);
template void sparse_softmax_xent<float, std::int32_t>(const float*, const std::int32_t*, std::int64_t, std::int64_t,
                                                       float*, float*);
template void sparse_softmax_xent<float, std::int64_t>(const float*, const std::int64_t*, std::int64_t, std::int64_t,
                                                       float*, float*);
template void sparse_softmax_xent<double, std::int32_t>(const double*, const std::int32_t*, std::int64_t,
                                                        std::int64_t, double*, double*);
template void sparse_softmax_xent<double, std::int64_t>(const double*, const std::int64_t*, std::int64_t,
                                                        std::int64_t, double*, double*);

}  // namespace tapeflow::kernels
