// kernels::batch_norm_forward / batch_norm_backward (batch_norm.h): blocks of columns in parallel,
// each running the copy of ukernels/batch_norm_loops.cc compiled for cpu_isa()'s level.
#include "tape/kernels/batch_norm.h"

#include <algorithm>

#include "tape/kernels/internal/isa_dispatch.h"
#include "tape/kernels/parallel.h"

// X(name, (parameters), (arguments)) for the column loops of every level; T is the element type.
#define TAPEFLOW_BATCH_NORM_LOOPS(X)                                                                           \
  X(batch_norm_forward_columns,                                                                                \
    (const T* x, std::int64_t n, std::int64_t c, std::int64_t c0, std::int64_t c1, const T* gamma, const T* beta, \
     double eps, T* y, T* mean, T* var, T* inv),                                                               \
    (x, n, c, c0, c1, gamma, beta, eps, y, mean, var, inv))                                                    \
  X(batch_norm_backward_columns,                                                                               \
    (const T* x, const T* g, std::int64_t n, std::int64_t c, std::int64_t c0, std::int64_t c1, const T* gamma,    \
     const T* mean, const T* inv, T* dx, T* dgamma, T* dbeta),                                                 \
    (x, g, n, c, c0, c1, gamma, mean, inv, dx, dgamma, dbeta))

namespace tapeflow::kernels {

TAPEFLOW_ISA_DECLARE(TAPEFLOW_BATCH_NORM_LOOPS)

namespace {

TAPEFLOW_BATCH_NORM_LOOPS(TAPEFLOW_ISA_DISPATCH)

// Runs f(c0, c1) over column blocks with about kElementwiseGrain elements each.
template <class F>
void for_column_blocks(std::int64_t n, std::int64_t c, F&& f) {
  const std::int64_t grain = std::max<std::int64_t>(8, kElementwiseGrain / std::max<std::int64_t>(n, 1));
  parallel_for(c, grain, f);
}

}  // namespace

template <class T>
void batch_norm_forward(const T* x, std::int64_t n, std::int64_t c, const T* gamma, const T* beta, double eps, T* y,
                        T* mean, T* var, T* inv) {
  for_column_blocks(n, c, [&](std::int64_t c0, std::int64_t c1) {
    batch_norm_forward_columns<T>(x, n, c, c0, c1, gamma, beta, eps, y, mean, var, inv);
  });
}

template <class T>
void batch_norm_backward(const T* x, const T* g, std::int64_t n, std::int64_t c, const T* gamma, const T* mean,
                         const T* inv, T* dx, T* dgamma, T* dbeta) {
  for_column_blocks(n, c, [&](std::int64_t c0, std::int64_t c1) {
    batch_norm_backward_columns<T>(x, g, n, c, c0, c1, gamma, mean, inv, dx, dgamma, dbeta);
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

}  // namespace tapeflow::kernels
