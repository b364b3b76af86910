// Kernel throughput: float32 matmul (GFLOP/s on 1 and 2 threads), element-wise add (GB/s) and
// reduce_sum of 16M floats. Counters are rates: "GFLOP=65/s" reads 65 GFLOP/s.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "tape/core/random.h"
#include "tape/kernels/elementwise.h"
#include "tape/kernels/matmul.h"
#include "tape/kernels/parallel.h"
#include "tape/kernels/reduce.h"

namespace {

using namespace tapeflow;

std::vector<float> random_floats(std::int64_t n, std::uint64_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  Generator g(seed);
  g.fill_uniform(v.data(), n, -1.0f, 1.0f);
  return v;
}

// Restores the previous thread cap when the benchmark ends.
struct ThreadCap {
  explicit ThreadCap(int n) : prev(kernels::set_num_threads(n)) {}
  ~ThreadCap() { kernels::set_num_threads(prev); }
  int prev;
};

void BM_MatmulF32(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ThreadCap cap(static_cast<int>(state.range(1)));
  auto a = random_floats(n * n, 1), b = random_floats(n * n, 2);
  std::vector<float> c(n * n);
  for (auto _ : state) {
    kernels::matmul(a.data(), b.data(), c.data(), 1, n, n, n, false, false, 0, 0);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP"] =
      benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = static_cast<double>(state.range(1));
}
BENCHMARK(BM_MatmulF32)
    ->ArgsProduct({{256, 512, 1024}, {1, 2}})
    ->ArgNames({"n", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_AddF32(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ThreadCap cap(static_cast<int>(state.range(1)));
  auto a = random_floats(n, 3), b = random_floats(n, 4);
  std::vector<float> y(n);
  const Shape s{n};
  for (auto _ : state) {
    kernels::map2(a.data(), s, b.data(), s, y.data(), s, [](float u, float v) { return u + v; });
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB"] = benchmark::Counter(3.0 * 4.0 * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AddF32)->ArgsProduct({{1 << 24}, {1, 2}})->ArgNames({"n", "threads"})->UseRealTime();

void BM_ReduceSumF32(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ThreadCap cap(static_cast<int>(state.range(1)));
  auto x = random_floats(n, 5);
  float y = 0;
  for (auto _ : state) {
    kernels::reduce_sum(x.data(), Shape{n}, 1u, &y);
    benchmark::DoNotOptimize(y);
  }
  state.counters["GB"] = benchmark::Counter(4.0 * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ReduceSumF32)->ArgsProduct({{1 << 24}, {1, 2}})->ArgNames({"n", "threads"})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
