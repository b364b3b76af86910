#include "tape/kernels/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

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

}  // namespace
}  // namespace tapeflow::kernels
