// Internal: element loops for optimizer updates (parallel for large variables, serial otherwise).
#pragma once

#include <cstdint>

#include "tape/core/dtype.h"
#include "tape/kernels/parallel.h"

namespace tapeflow::optimizers::internal {

// Elements per task: an update touches ~4 arrays with a few flops each.
inline constexpr std::int64_t kUpdateGrain = 1 << 14;

// Runs f(i) for i in [0, n); chunks run in parallel when n > kUpdateGrain. Each element is
// independent, so results do not depend on the thread count.
template <class F>
void for_each_index(std::int64_t n, F&& f) {
  kernels::parallel_for(n, kUpdateGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) f(i);
  });
}

// Runs f(begin, end) over chunks of [0, n) (parallel when n > kUpdateGrain). Update kernels take
// __restrict pointers offset by `begin` so the compiler vectorizes them (sqrt included).
template <class F>
void for_each_range(std::int64_t n, F&& f) {
  kernels::parallel_for(n, kUpdateGrain, std::forward<F>(f));
}

// Calls f(T{}) with T = float or double for the variable's dtype.
template <class F>
void dispatch_update(DType dtype, const char* optimizer, F&& f) {
  dispatch_floating(dtype, optimizer, std::forward<F>(f));
}

}  // namespace tapeflow::optimizers::internal
