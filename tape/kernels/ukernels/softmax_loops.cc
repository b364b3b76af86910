// The softmax row loops (tape/kernels/nn.h: softmax, softmax_grad; driven by nn.cc), compiled once
// per instruction-set level into kernels::isa_<level> (TAPEFLOW_KERNEL_ISA; tape/CMakeLists.txt),
// each call one block of rows [r0, r1). Plain loops the compiler vectorizes at the level's width;
// this file is compiled with -ffp-contract=off (no multiply-add is fused), so every element is the
// same sequence of IEEE operations at every level and width: every level gives the baseline's bits.
#ifndef TAPEFLOW_KERNEL_ISA
#error "softmax_loops.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tape/kernels/internal/row_sums.h"
#include "tape/kernels/ukernels/internal/exp_f32.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {
namespace {

using internal::combine_parts;
using internal::kParts;
using internal::row_sum16;


// max of x[0, cols) (cols >= 1) in kParts partials; a NaN is skipped (the row's result is NaN anyway).
float row_max16(const float* __restrict x, std::int64_t cols) {
  float part[kParts];
  for (float& p : part) p = x[0];
  std::int64_t j = 0;
  for (; j + kParts <= cols; j += kParts)
    for (int k = 0; k < kParts; ++k) part[k] = x[j + k] > part[k] ? x[j + k] : part[k];
  float m = combine_parts(part, [](float a, float b) { return b > a ? b : a; });
  for (; j < cols; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

void softmax_row(const float* __restrict x, std::int64_t cols, float* __restrict y) {
  const float m = row_max16(x, cols);
  for (std::int64_t j = 0; j < cols; ++j) y[j] = exp_f32(x[j] - m);
  const float inv = 1.f / row_sum16(cols, [y](std::int64_t j) { return y[j]; });
  for (std::int64_t j = 0; j < cols; ++j) y[j] *= inv;
}

void softmax_row(const double* __restrict x, std::int64_t cols, double* __restrict y) {
  double m = x[0];
  for (std::int64_t j = 1; j < cols; ++j) m = x[j] > m ? x[j] : m;
  double s = 0;
  for (std::int64_t j = 0; j < cols; ++j) s += (y[j] = std::exp(x[j] - m));
  const double inv = 1.0 / s;
  for (std::int64_t j = 0; j < cols; ++j) y[j] *= inv;
}

// dx = y (g - Σ g y), the sum in eight partials (fixed order).
template <class T>
void softmax_grad_row(const T* __restrict yr, const T* __restrict gr, std::int64_t cols, T* __restrict dr) {
  T part[8] = {};
  std::int64_t j = 0;
  for (; j + 8 <= cols; j += 8)
    for (int k = 0; k < 8; ++k) part[k] += gr[j + k] * yr[j + k];
  T s = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  for (; j < cols; ++j) s += gr[j] * yr[j];
  for (j = 0; j < cols; ++j) dr[j] = yr[j] * (gr[j] - s);
}

}  // namespace

template <class T>
void softmax_rows(const T* x, std::int64_t r0, std::int64_t r1, std::int64_t cols, T* y) {
  for (std::int64_t r = r0; r < r1; ++r) softmax_row(x + r * cols, cols, y + r * cols);
}

template <class T>
void softmax_grad_rows(const T* y, const T* g, std::int64_t r0, std::int64_t r1, std::int64_t cols, T* dx) {
  for (std::int64_t r = r0; r < r1; ++r) softmax_grad_row(y + r * cols, g + r * cols, cols, dx + r * cols);
}

template void softmax_rows<float>(const float*, std::int64_t, std::int64_t, std::int64_t, float*);
template void softmax_rows<double>(const double*, std::int64_t, std::int64_t, std::int64_t, double*);
template void softmax_grad_rows<float>(const float*, const float*, std::int64_t, std::int64_t, std::int64_t, float*);
template void softmax_grad_rows<double>(const double*, const double*, std::int64_t, std::int64_t, std::int64_t,
                                        double*);

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
