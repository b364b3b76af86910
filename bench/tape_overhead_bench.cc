// W6 (../shared/peers/RESULTS.md): eager per-op overhead on a 10,000-op scalar chain
// y = y*x (even i) / y + x (odd i), x = 0.5 float32. Reported per op (counter us_per_op).
#include <benchmark/benchmark.h>

#include "tape/tapeflow.h"

namespace tf = tapeflow;

namespace {

constexpr int kOps = 10000;

tf::Tensor chain(const tf::Tensor& x) {
  tf::Tensor y = x;
  for (int i = 0; i < kOps; ++i) y = (i % 2 == 0) ? y * x : y + x;
  return y;
}

void set_per_op(benchmark::State& state) {
  state.counters["us_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kOps * 1e-6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_W6_fwd_nograd(benchmark::State& state) {
  tf::Tensor x = tf::scalar(0.5);
  for (auto _ : state) benchmark::DoNotOptimize(chain(x));
  set_per_op(state);
}

void BM_W6_fwd_record(benchmark::State& state) {
  tf::Tensor x = tf::scalar(0.5);
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(x);
    benchmark::DoNotOptimize(chain(x));
  }
  set_per_op(state);
}

void BM_W6_fwd_bwd(benchmark::State& state) {
  tf::Tensor x = tf::scalar(0.5);
  double g = 0;
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = chain(x);
    g = tape.gradient(y, x)->item();
  }
  if (std::abs(g - 4.0) > 1e-4) state.SkipWithError("dy/dx != 4");
  set_per_op(state);
}

BENCHMARK(BM_W6_fwd_nograd)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_W6_fwd_record)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_W6_fwd_bwd)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
