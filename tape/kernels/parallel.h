// Deterministic parallel loops for kernels, backed by oneTBB (kept out of this header).
// Facts:    parallel_for runs f(begin, end) over [0, n) in min(n / grain, threads) equal chunks
//           (each >= grain elements), one per thread, with a static partition; when n <= grain or
//           one thread is allowed it calls f(0, n) inline (no TBB, no allocation). The ranges depend
//           on the thread count, so kernels that reduce use fixed chunk sizes of their own
//           (independent of the thread count) and their results repeat bit for bit.
// Errors:   set_num_threads: std::invalid_argument for n < 0.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>

namespace tapeflow::kernels {

// Elements per task for cheap element-wise work (one memory pass over a few arrays).
inline constexpr std::int64_t kElementwiseGrain = 1 << 15;
// Elements per fixed-size chunk of a reduction (partial results combine in chunk order).
inline constexpr std::int64_t kReduceChunk = 1 << 14;

namespace internal {
using RangeFn = void (*)(void* ctx, std::int64_t begin, std::int64_t end);
// Splits [0, n) into min(n / grain, threads) equal chunks and runs them with tbb::static_partitioner.
void parallel_for_impl(std::int64_t n, std::int64_t grain, RangeFn fn, void* ctx);
}  // namespace internal

// Runs f(begin, end) over [0, n) in chunks of >= grain, at most one per thread; serial inline
// when n <= grain.
template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& f) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n <= grain) {
    f(std::int64_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  internal::parallel_for_impl(
      n, grain,
      [](void* ctx, std::int64_t b, std::int64_t e) { (*static_cast<Fn*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(std::addressof(f))));
}

// Caps the number of threads used by kernels (wraps tbb::global_control); 0 = default.
// Returns the previous cap (0 if none was set).
int set_num_threads(int n);
// The number of threads kernels may use now: min(cap, concurrency of the current oneTBB arena), at
// least 1. Outside an explicit tbb::task_arena that is min(cap, cores); inside tbb::task_arena(n)
// with a cap >= n it is n, even on a machine with fewer cores (how tests run two threads anywhere).
int num_threads();

namespace internal {
void parallel_invoke_impl(RangeFn fn, void* ctx);
}  // namespace internal

// Runs f() and g() concurrently when more than one thread is allowed (inter-op parallelism: two
// independent pieces of work, such as the backward passes of two tapes), else f() then g().
// Kernels inside either keep their own parallel loops; a thread that finishes early joins them.
// Both run to completion before it returns; if either throws, the exception is rethrown.
template <class F, class G>
void parallel_invoke(F&& f, G&& g) {
  if (num_threads() < 2) {
    f();
    g();
    return;
  }
  struct Ctx {
    F& f;
    G& g;
  } ctx{f, g};
  internal::parallel_invoke_impl(
      [](void* c, std::int64_t which, std::int64_t) {
        auto& x = *static_cast<Ctx*>(c);
        if (which == 0) x.f();
        else x.g();
      },
      &ctx);
}

}  // namespace tapeflow::kernels
