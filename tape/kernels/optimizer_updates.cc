// kernels::sgd_update & co. (optimizer_updates.h): each call runs the copy of
// ukernels/optimizer_loops.cc compiled for cpu_isa()'s level.
#include "tape/kernels/optimizer_updates.h"

#include "tape/kernels/internal/isa_dispatch.h"

// X(name, (parameters), (arguments)) for every loop of optimizer_updates.h; T is the element type.
#define TAPEFLOW_OPTIMIZER_UPDATES(X)                                                                         \
  X(sgd_update, (T * w, T * m, const T* g, std::int64_t n, T lr, T mu, bool nesterov), (w, m, g, n, lr, mu, nesterov)) \
  X(adam_update, (T * w, T * m, T * v, T * vhat, const T* g, std::int64_t n, T a, T eps, T one_b1, T one_b2),  \
    (w, m, v, vhat, g, n, a, eps, one_b1, one_b2))                                                            \
  X(rmsprop_update, (T * w, T * rms, T * mom, T * mg, const T* g, std::int64_t n, T rho, T eps, T lr, T mu),   \
    (w, rms, mom, mg, g, n, rho, eps, lr, mu))                                                                \
  X(adagrad_update, (T * w, T * acc, const T* g, std::int64_t n, T eps, T lr), (w, acc, g, n, eps, lr))

namespace tapeflow::kernels {

TAPEFLOW_ISA_DECLARE(TAPEFLOW_OPTIMIZER_UPDATES)
TAPEFLOW_OPTIMIZER_UPDATES(TAPEFLOW_ISA_DISPATCH)

#define TAPEFLOW_OPTIMIZER_INSTANTIATE(name, params, args) template void name<T> params;
#define T float
TAPEFLOW_OPTIMIZER_UPDATES(TAPEFLOW_OPTIMIZER_INSTANTIATE)
#undef T
#define T double
TAPEFLOW_OPTIMIZER_UPDATES(TAPEFLOW_OPTIMIZER_INSTANTIATE)
#undef T
#undef TAPEFLOW_OPTIMIZER_INSTANTIATE

}  // namespace tapeflow::kernels
