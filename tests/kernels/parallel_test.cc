#include "tape/kernels/parallel.h"

#include <gtest/gtest.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "tests/testing/threads.h"

namespace tapeflow::kernels {
namespace {

TEST(ParallelFor, SmallRunsInlineAsOneCall) {
  int calls = 0;
  const auto caller = std::this_thread::get_id();
  parallel_for(100, 1000, [&](std::int64_t b, std::int64_t e) {
    ++calls;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
  EXPECT_EQ(calls, 1);
  parallel_for(0, 10, [&](std::int64_t, std::int64_t) { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(ParallelFor, CoversRangeExactlyOnceInChunksOfAtLeastGrain) {
  const std::int64_t n = 1000003, grain = 1000;
  std::vector<std::atomic<int>> hits(n);
  std::mutex mu;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  parallel_for(n, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) hits[i]++;
    std::lock_guard<std::mutex> lock(mu);
    ranges.emplace_back(b, e);
  });
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
  for (auto [b, e] : ranges) EXPECT_GE(e - b, grain);
}

TEST(NumThreads, SetAndRestore) {
  const int before = num_threads();
  EXPECT_GE(before, 1);
  const int prev = set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  EXPECT_EQ(set_num_threads(prev), 1);
  EXPECT_EQ(num_threads(), before);
  EXPECT_THROW(set_num_threads(-1), std::invalid_argument);
}

// Each side waits (up to 10 s) to see the other one started: both must be running at once. Two
// threads on any machine (an oversubscribed arena on one core), so this never skips.
TEST(ParallelInvoke, RunsBothSidesConcurrentlyWithTwoThreads) {
  bool concurrent = false;
  EXPECT_EQ(testing::with_threads(2, [&] { concurrent = testing::parallel_invoke_runs_both_at_once(); }), 2);
  EXPECT_TRUE(concurrent);
}

// The thread count follows the arena: fewer slots than the cap, or more than the cores.
TEST(NumThreads, FollowsTheCurrentArena) {
  EXPECT_EQ(testing::with_threads(1, [] {}), 1);
  EXPECT_EQ(testing::with_threads(3, [] {}), 3);  // more than a 2-core machine has: honoured
  const int prev = set_num_threads(2);
  int inside = 0;
  tbb::task_arena(1).execute([&] { inside = num_threads(); });
  set_num_threads(prev);
  EXPECT_EQ(inside, 1);  // an arena of one slot: one thread, whatever the cap
}

TEST(ParallelInvoke, OneThreadRunsFirstThenSecondOnTheCaller) {
  const int prev = set_num_threads(1);
  const auto caller = std::this_thread::get_id();
  std::vector<int> order;
  parallel_invoke(
      [&] {
        order.push_back(1);
        EXPECT_EQ(std::this_thread::get_id(), caller);
      },
      [&] {
        order.push_back(2);
        EXPECT_EQ(std::this_thread::get_id(), caller);
      });
  set_num_threads(prev);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(ParallelInvoke, RethrowsAnExceptionAfterBothFinish) {
  for (int threads : {1, 2}) {
    const int prev = set_num_threads(threads);
    std::atomic<bool> other_done{false};
    try {
      parallel_invoke([] { throw std::invalid_argument("left side failed"); }, [&] { other_done = true; });
      ADD_FAILURE() << "no throw";
    } catch (const std::invalid_argument& e) {
      EXPECT_STREQ(e.what(), "left side failed");
    }
    set_num_threads(prev);
    if (threads == 1) {
      EXPECT_FALSE(other_done.load());  // serial: the second never starts
    }
  }
}

}  // namespace
}  // namespace tapeflow::kernels
