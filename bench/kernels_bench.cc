// Kernel throughput: matmul on the shapes of tapeflow's models (GFLOP/s on 1 and 2 threads, Eigen's
// path and the current kernel side by side), element-wise add (GB/s), reduce_sum of 16M floats and
// an Adam step over 1M float weights at each instruction-set level.
// Counters are rates: "GFLOP=65/s" reads 65 GFLOP/s.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optimizers/adam.h"
#include "tape/core/cpu_isa.h"
#include "tape/core/random.h"
#include "tape/core/tensor.h"
#include "tape/runtime/variable.h"
#include "tape/kernels/elementwise.h"
#include "tape/kernels/internal/gemm.h"
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

// Products that matter to tapeflow's models: C [m, n] = op(A) [m, k] @ op(B) [k, n], batch products.
struct MatmulShape {
  const char* name;
  std::int64_t batch, m, k, n;
  bool ta, tb;
  bool f64;
};
constexpr MatmulShape kMatmulShapes[] = {
    {"square", 1, 256, 256, 256, false, false, false},
    {"square", 1, 512, 512, 512, false, false, false},
    {"square", 1, 1024, 1024, 1024, false, false, false},
    // GAN / MLP step at batch 128: forward X W, backward dX = dY W^T and dW = X^T dY.
    {"mlp", 1, 128, 100, 256, false, false, false},
    {"mlp", 1, 128, 256, 512, false, false, false},
    {"mlp", 1, 128, 512, 784, false, false, false},
    {"mlp", 1, 128, 784, 512, false, false, false},
    {"mlp", 1, 128, 512, 256, false, false, false},
    {"mlp", 1, 128, 256, 1, false, false, false},
    {"mlp_dx", 1, 128, 512, 784, false, true, false},
    {"mlp_dx", 1, 128, 784, 512, false, true, false},
    {"mlp_dx", 1, 128, 256, 100, false, true, false},
    {"mlp_dx", 1, 128, 1, 256, false, true, false},
    {"mlp_dw", 1, 784, 128, 512, true, false, false},
    {"mlp_dw", 1, 512, 128, 784, true, false, false},
    {"mlp_dw", 1, 100, 128, 256, true, false, false},
    {"mlp_dw", 1, 256, 128, 1, true, false, false},
    // batch_jacobian: one tall product, and a batch of small ones.
    {"jacobian", 1, 16384, 64, 128, false, false, false},
    {"jacobian", 1, 16384, 128, 64, false, false, false},
    {"jacobian", 64, 256, 128, 64, false, false, false},
    // Hessian: tall thin products, and the blocked-Cholesky size.
    {"hessian", 1, 65536, 32, 16, false, false, false},
    {"hessian", 1, 65536, 32, 16, false, false, true},
    {"hessian", 1, 1024, 1024, 1024, false, false, true},
    {"square", 1, 256, 256, 256, false, false, true},
    {"square", 1, 512, 512, 512, false, false, true},
};

// `eigen`: Eigen's path as it was before the AVX2 kernel; otherwise kernels::matmul.
template <class T>
void BM_Matmul(benchmark::State& state, const MatmulShape& s, int threads, bool eigen) {
  ThreadCap cap(threads);
  auto fa = random_floats(s.batch * s.m * s.k, 1), fb = random_floats(s.batch * s.k * s.n, 2);
  std::vector<T> a(fa.begin(), fa.end()), b(fb.begin(), fb.end()), c(s.batch * s.m * s.n);
  for (auto _ : state) {
    if (eigen)
      kernels::internal::matmul_eigen(a.data(), b.data(), c.data(), s.batch, s.m, s.k, s.n, s.ta, s.tb, s.m * s.k,
                                      s.k * s.n, kernels::internal::EigenSplit::kPerThread);
    else
      kernels::matmul(a.data(), b.data(), c.data(), s.batch, s.m, s.k, s.n, s.ta, s.tb, s.m * s.k, s.k * s.n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP"] = benchmark::Counter(2.0 * s.batch * s.m * s.n * s.k * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

// Names read "BM_Matmul/mlp_dx/f32/128x512x784/tb/threads:2/new".
const bool kMatmulRegistered = [] {
  for (const MatmulShape& s : kMatmulShapes) {
    for (int threads : {1, 2})
      for (int impl : {0, 1}) {
        std::string name = std::string("BM_Matmul/") + s.name + (s.f64 ? "/f64/" : "/f32/");
        if (s.batch > 1) name += std::to_string(s.batch) + "x";
        name += std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
        if (s.ta) name += "/ta";
        if (s.tb) name += "/tb";
        name += "/threads:" + std::to_string(threads) + (impl ? "/new" : "/eigen");
        auto* bm = s.f64 ? benchmark::RegisterBenchmark(name.c_str(), BM_Matmul<double>, s, threads, impl == 0)
                         : benchmark::RegisterBenchmark(name.c_str(), BM_Matmul<float>, s, threads, impl == 0);
        bm->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
  }
  return true;
}();

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

// One Adam step (apply_gradients) over a float variable of n elements at level range(1) (0
// baseline, 1 AVX2, 2 AVX-512; skipped where the CPU lacks it), 1 thread. GB/s counts the bytes the
// update must move: w, m and v read and written, g read.
void BM_AdamStepF32(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const auto isa = static_cast<CpuIsa>(state.range(1));
  if (isa > host_cpu_isa()) {
    state.SkipWithError("this CPU lacks the level");
    return;
  }
  const CpuIsa previous = set_max_cpu_isa(isa);
  ThreadCap cap(1);
  auto w = random_floats(n, 6), g = random_floats(n, 7);
  Variable var(constant(w, Shape{n}));
  const std::vector<std::optional<Tensor>> grads = {constant(g, Shape{n})};
  optimizers::Adam adam({.learning_rate = 1e-3});
  for (auto _ : state) adam.apply_gradients(grads, std::vector<Variable>{var});
  set_max_cpu_isa(previous);
  state.SetLabel(std::string(cpu_isa_name(isa)));
  state.counters["GB"] = benchmark::Counter(7.0 * 4.0 * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AdamStepF32)->ArgsProduct({{1 << 20}, {0, 1, 2}})->ArgNames({"n", "isa"})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
