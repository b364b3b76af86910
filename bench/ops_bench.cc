// Op-layer cost of the nn/linalg ops: float32 matmul 1024x1024 through tf::matmul (dispatch,
// allocation, no tape / under a tape) vs the raw kernel; sparse softmax cross-entropy on [128, 10]
// logits, forward only and forward + backward; activations and where on the GAN generator's
// output shape [128, 784], 1 thread. Counters are rates: "GFLOP=300/s", "elements=1G/s".
#include <benchmark/benchmark.h>

#include <cstdint>

#include "tape/core/random.h"
#include "tape/kernels/matmul.h"
#include "tape/kernels/parallel.h"
#include "tape/tapeflow.h"

namespace {

namespace tf = tapeflow;

// Restores the previous thread cap when the benchmark ends.
struct ThreadCap {
  explicit ThreadCap(int n) : prev(tf::kernels::set_num_threads(n)) {}
  ~ThreadCap() { tf::kernels::set_num_threads(prev); }
  int prev;
};

void set_gflops(benchmark::State& state, std::int64_t n) {
  state.counters["GFLOP"] = benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MatmulOp(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ThreadCap cap(static_cast<int>(state.range(1)));
  tf::Generator gen(1);
  tf::Tensor a = tf::random_uniform({n, n}, gen, -1.0, 1.0), b = tf::random_uniform({n, n}, gen, -1.0, 1.0);
  for (auto _ : state) {
    tf::Tensor c = tf::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_gflops(state, n);
}
BENCHMARK(BM_MatmulOp)
    ->ArgsProduct({{1024}, {1, 2}})
    ->ArgNames({"n", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_MatmulKernel(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ThreadCap cap(static_cast<int>(state.range(1)));
  tf::Generator gen(1);
  tf::Tensor a = tf::random_uniform({n, n}, gen, -1.0, 1.0), b = tf::random_uniform({n, n}, gen, -1.0, 1.0);
  tf::Tensor c = tf::Tensor::empty({n, n}, tf::DType::kFloat32);
  for (auto _ : state) {
    tf::kernels::matmul(a.data<float>(), b.data<float>(), c.mutable_data<float>(), 1, n, n, n, false, false, 0, 0);
    benchmark::DoNotOptimize(c.raw_data());
    benchmark::ClobberMemory();
  }
  set_gflops(state, n);
}
BENCHMARK(BM_MatmulKernel)
    ->ArgsProduct({{1024}, {1, 2}})
    ->ArgNames({"n", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Forward and backward of a matmul recorded on a tape: 3 products per iteration.
void BM_MatmulOpForwardBackward(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  tf::Generator gen(1);
  tf::Tensor a = tf::random_uniform({n, n}, gen, -1.0, 1.0), b = tf::random_uniform({n, n}, gen, -1.0, 1.0);
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    tf::Tensor c = tf::matmul(a, b);
    auto g = tape.gradient(c, std::vector<tf::Source>{a, b});
    benchmark::DoNotOptimize(g[0]->raw_data());
  }
  state.counters["GFLOP"] =
      benchmark::Counter(3 * 2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatmulOpForwardBackward)->Arg(1024)->ArgName("n")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_SparseXentForward(benchmark::State& state) {
  tf::Generator gen(2);
  tf::Tensor logits = tf::random_normal({128, 10}, gen);
  tf::Tensor labels = tf::cast(tf::random_uniform({128}, gen, 0.0, 10.0), tf::DType::kInt32);
  for (auto _ : state) {
    tf::Tensor loss = tf::reduce_mean(tf::sparse_softmax_cross_entropy_with_logits(labels, logits));
    benchmark::DoNotOptimize(loss.raw_data());
  }
}
BENCHMARK(BM_SparseXentForward)->Unit(benchmark::kMicrosecond);

void BM_SparseXentForwardBackward(benchmark::State& state) {
  tf::Generator gen(2);
  tf::Tensor logits = tf::random_normal({128, 10}, gen);
  tf::Tensor labels = tf::cast(tf::random_uniform({128}, gen, 0.0, 10.0), tf::DType::kInt32);
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(logits);
    tf::Tensor loss = tf::reduce_mean(tf::sparse_softmax_cross_entropy_with_logits(labels, logits));
    auto g = tape.gradient(loss, logits);
    benchmark::DoNotOptimize(g->raw_data());
  }
}
BENCHMARK(BM_SparseXentForwardBackward)->Unit(benchmark::kMicrosecond);

enum class Act { kTanh, kRelu, kLeakyRelu };

tf::Tensor activate(Act act, const tf::Tensor& x) {
  switch (act) {
    case Act::kTanh: return tf::tanh(x);
    case Act::kRelu: return tf::relu(x);
    case Act::kLeakyRelu: return tf::leaky_relu(x, 0.2);
  }
  return x;
}

// Forward alone (arg 0), or forward + backward under a tape (arg 1: the backward is one TanhGrad /
// ReluGrad / LeakyReluGrad pass).
void BM_Activation(benchmark::State& state, Act act) {
  ThreadCap cap(1);
  tf::Generator gen(3);
  const tf::Tensor x = tf::random_normal({128, 784}, gen), seed = tf::random_normal({128, 784}, gen);
  const bool backward = state.range(0) != 0;
  for (auto _ : state) {
    if (!backward) {
      tf::Tensor y = activate(act, x);
      benchmark::DoNotOptimize(y.raw_data());
      continue;
    }
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = activate(act, x);
    tf::GradientOptions options;
    options.output_gradients = {seed};
    auto g = tape.gradient(std::vector<tf::Tensor>{y}, std::vector<tf::Source>{x}, options);
    benchmark::DoNotOptimize(g[0]->raw_data());
  }
  state.counters["elements"] = benchmark::Counter(128.0 * 784, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_Activation, tanh, Act::kTanh)->ArgName("backward")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Activation, relu, Act::kRelu)->ArgName("backward")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Activation, leaky_relu, Act::kLeakyRelu)->ArgName("backward")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_Where(benchmark::State& state) {
  ThreadCap cap(1);
  tf::Generator gen(4);
  const tf::Tensor a = tf::random_normal({128, 784}, gen), b = tf::random_normal({128, 784}, gen);
  const tf::Tensor cond = tf::greater(a, b);
  for (auto _ : state) {
    tf::Tensor y = tf::where(cond, a, b);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.counters["elements"] = benchmark::Counter(128.0 * 784, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Where)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
