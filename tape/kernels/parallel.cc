#include "tape/kernels/parallel.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_invoke.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>

namespace tapeflow::kernels {
namespace {
std::mutex g_control_mutex;
std::unique_ptr<tbb::global_control> g_control;
int g_cap = 0;
}  // namespace

namespace internal {
void parallel_for_impl(std::int64_t n, std::int64_t grain, RangeFn fn, void* ctx) {
  // One equal chunk per thread (at most n / grain of them): with n / grain = 3 chunks on 2 threads
  // a static split would give one thread twice the work of the other.
  const std::int64_t chunks = std::min<std::int64_t>(n / grain, num_threads());  // n > grain: n / grain >= 1
  auto chunk_begin = [n, chunks](std::int64_t c) { return c == chunks ? n : (n / chunks) * c + std::min(c, n % chunks); };
  if (chunks < 2) {
    fn(ctx, 0, n);
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range<std::int64_t>(0, chunks, 1),
      [&](const tbb::blocked_range<std::int64_t>& r) {
        // Adjacent chunks handed to one task run as one contiguous range.
        fn(ctx, chunk_begin(r.begin()), chunk_begin(r.end()));
      },
      tbb::static_partitioner());
}

void parallel_invoke_impl(RangeFn fn, void* ctx) {
  tbb::parallel_invoke([&] { fn(ctx, 0, 0); }, [&] { fn(ctx, 1, 0); });
}
}  // namespace internal

int set_num_threads(int n) {
  if (n < 0) throw std::invalid_argument("set_num_threads: negative thread count " + std::to_string(n));
  std::lock_guard<std::mutex> lock(g_control_mutex);
  int prev = g_cap;
  g_control.reset();
  if (n > 0) g_control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, n);
  g_cap = n;
  return prev;
}

int num_threads() {
  // The cap, within the concurrency of the arena this thread runs in: all cores outside an explicit
  // tbb::task_arena; an arena's own slot count inside one (fewer, or more than the cores).
  int active = static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  return std::max(1, std::min(active, tbb::this_task_arena::max_concurrency()));
}

}  // namespace tapeflow::kernels
