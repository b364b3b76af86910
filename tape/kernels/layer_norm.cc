// kernels::layer_norm{,_grad} and layer_norm_affine{,_grad} (nn.h): blocks of rows in parallel,
// each running the copy of ukernels/layer_norm_loops.cc compiled for cpu_isa()'s level.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "tape/kernels/internal/isa_dispatch.h"
#include "tape/kernels/internal/row_sums.h"
#include "tape/kernels/nn.h"
#include "tape/kernels/parallel.h"

// X(name, (parameters), (arguments)) for the row loops of every level; T is the element type.
// gamma null: the plain layer_norm (beta, pg, pb unused).
#define TAPEFLOW_LAYER_NORM_LOOPS(X)                                                                             \
  X(layer_norm_rows,                                                                                             \
    (const T* x, const T* gamma, const T* beta, std::int64_t r0, std::int64_t r1, std::int64_t cols, double eps, \
     T* y),                                                                                                      \
    (x, gamma, beta, r0, r1, cols, eps, y))                                                                      \
  X(layer_norm_grad_rows,                                                                                        \
    (const T* x, const T* gamma, const T* dy, std::int64_t r0, std::int64_t r1, std::int64_t cols, double eps,   \
     T* dx, T* pg, T* pb),                                                                                       \
    (x, gamma, dy, r0, r1, cols, eps, dx, pg, pb))

namespace tapeflow::kernels {

TAPEFLOW_ISA_DECLARE(TAPEFLOW_LAYER_NORM_LOOPS)

namespace {

TAPEFLOW_LAYER_NORM_LOOPS(TAPEFLOW_ISA_DISPATCH)

using internal::for_row_blocks;

}  // namespace

template <class T>
void layer_norm(const T* x, std::int64_t rows, std::int64_t cols, double epsilon, T* y) {
  for_row_blocks(rows, cols, [&](std::int64_t r0, std::int64_t r1) {
    layer_norm_rows<T>(x, nullptr, nullptr, r0, r1, cols, epsilon, y);
  });
}

template <class T>
void layer_norm_grad(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, double epsilon, T* dx) {
  for_row_blocks(rows, cols, [&](std::int64_t r0, std::int64_t r1) {
    layer_norm_grad_rows<T>(x, nullptr, dy, r0, r1, cols, epsilon, dx, nullptr, nullptr);
  });
}

template <class T>
void layer_norm_affine(const T* x, const T* gamma, const T* beta, std::int64_t rows, std::int64_t cols,
                       double epsilon, T* y) {
  for_row_blocks(rows, cols, [&](std::int64_t r0, std::int64_t r1) {
    layer_norm_rows<T>(x, gamma, beta, r0, r1, cols, epsilon, y);
  });
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
      layer_norm_grad_rows<T>(x, gamma, dy, c * chunk, std::min(rows, (c + 1) * chunk), cols, epsilon, dx, pg,
                              pg + cols);
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
