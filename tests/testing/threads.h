// Running code with an exact number of threads, whatever the machine's core count: a cap of n
// (tapeflow::set_num_threads) plus a oneTBB arena of n slots, oversubscribed when the machine has
// fewer cores (a one-core CI machine still runs two threads at once).
#pragma once

#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tape/kernels/parallel.h"
#include "tape/runtime/threads.h"

namespace tapeflow::testing {

// Runs fn() inside an arena of n threads with the kernels' cap set to n (restored afterwards).
// Returns get_num_threads() as fn saw it, so that the caller can assert the count was honoured.
template <class F>
int with_threads(int n, F&& fn) {
  const int previous = set_num_threads(n);
  int seen = 0;
  try {
    tbb::task_arena arena(n);
    arena.execute([&] {
      seen = get_num_threads();
      fn();
    });
  } catch (...) {
    set_num_threads(previous);
    throw;
  }
  set_num_threads(previous);
  return seen;
}

// True if kernels::parallel_invoke really runs its two sides at the same time here: each side
// waits (up to 10 s) to see the other one started.
inline bool parallel_invoke_runs_both_at_once() {
  std::atomic<int> started{0};
  auto side = [&] {
    ++started;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    return started.load() == 2;
  };
  bool f_saw_g = false, g_saw_f = false;
  kernels::parallel_invoke([&] { f_saw_g = side(); }, [&] { g_saw_f = side(); });
  return f_saw_g && g_saw_f;
}

}  // namespace tapeflow::testing
