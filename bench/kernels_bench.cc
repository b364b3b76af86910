// Kernel throughput: matmul on the shapes of tapeflow's models (GFLOP/s on 1 and 2 threads, Eigen's
// path and the current kernel side by side), element-wise add (GB/s), reduce_sum of 16M floats;
// at each instruction-set level (the "isa" argument: 0 baseline, 1 AVX2, 2 AVX-512) reduce_sum
// over [rows, cols], a broadcast add, batch normalization's forward and backward, an Adam step.
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
#include "tape/kernels/batch_norm.h"
#include "tape/kernels/elementwise.h"
#include "tape/kernels/gemm/internal/eigen.h"
#include "tape/kernels/matmul.h"
#include "tape/kernels/parallel.h"
#include "tape/kernels/reduce.h"
#include "tape/ops/math_ops.h"

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
    // W12 (the ViT, batch 128 x 49 tokens = 6272 rows, d_model 64, MLP 128): the projections and MLP
    // forward, their input and weight gradients, and the attention products of 4 heads (batch 512):
    // q k^T and, in backward, dprobs = dctx v^T (tb); probs v and dq = dscores k; dv, dk (ta).
    {"vit", 1, 6272, 64, 64, false, false, false},
    {"vit", 1, 6272, 64, 128, false, false, false},
    {"vit", 1, 6272, 128, 64, false, false, false},
    {"vit_dx", 1, 6272, 64, 64, false, true, false},
    {"vit_dx", 1, 6272, 128, 64, false, true, false},
    {"vit_dx", 1, 6272, 64, 128, false, true, false},
    {"vit_dw", 1, 64, 6272, 64, true, false, false},
    {"vit_dw", 1, 64, 6272, 128, true, false, false},
    {"vit_dw", 1, 128, 6272, 64, true, false, false},
    {"vit_attention", 512, 49, 16, 49, false, true, false},
    {"vit_attention", 512, 49, 49, 16, false, false, false},
    {"vit_attention", 512, 49, 49, 16, true, false, false},
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

// Caps the instruction-set level for one benchmark (range `isa`: 0 baseline, 1 AVX2, 2 AVX-512)
// and names it in the label; false (the benchmark skipped) where the CPU lacks the level.
struct LevelCap {
  LevelCap(benchmark::State& state, std::int64_t isa) : level(static_cast<CpuIsa>(isa)) {
    if (level > host_cpu_isa()) {
      state.SkipWithError("this CPU lacks the level");
      return;
    }
    ok = true;
    previous = set_max_cpu_isa(level);
    state.SetLabel(std::string(cpu_isa_name(level)));
  }
  ~LevelCap() {
    if (ok) set_max_cpu_isa(previous);
  }
  CpuIsa level, previous = CpuIsa::kBaseline;
  bool ok = false;
};

// reduce_sum of a [rows, cols] float matrix, 1 thread, at level range(3): over axis 0 (mask 1: the
// row loop, rows added into one row) or axis 1 (mask 2: `rows` contiguous runs of `cols`), or
// all of it (mask 3: one run).
void BM_ReduceSum2D(benchmark::State& state) {
  const Shape s{state.range(0), state.range(1)};
  const auto mask = static_cast<std::uint32_t>(state.range(2));
  LevelCap level(state, state.range(3));
  if (!level.ok) return;
  ThreadCap cap(1);
  auto x = random_floats(s.num_elements(), 5);
  std::vector<float> y(s.num_elements());
  for (auto _ : state) {
    kernels::reduce_sum(x.data(), s, mask, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB"] = benchmark::Counter(4.0 * s.num_elements() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ReduceSum2D)
    ->ArgsProduct({{256}, {256}, {1, 2, 3}, {0, 1, 2}})
    ->ArgsProduct({{1024}, {100}, {2}, {0, 1, 2}})
    ->ArgsProduct({{4096}, {16}, {2}, {0, 1, 2}})
    ->ArgsProduct({{4096}, {7}, {2}, {0, 1, 2}})
    ->ArgsProduct({{100}, {1024}, {1}, {0, 1, 2}})
    ->ArgsProduct({{1}, {1000}, {2}, {0, 1, 2}})
    ->ArgNames({"rows", "cols", "mask", "isa"})
    ->UseRealTime();

// A broadcast add, [256, 1024] + [1024] (a bias row), 1 thread, at level range(0).
void BM_AddBroadcastF32(benchmark::State& state) {
  LevelCap level(state, state.range(0));
  if (!level.ok) return;
  ThreadCap cap(1);
  const Shape sa{256, 1024}, sb{1024};
  auto a = random_floats(sa.num_elements(), 3), b = random_floats(sb.num_elements(), 4);
  std::vector<float> y(a.size());
  for (auto _ : state) {
    kernels::map2(a.data(), sa, b.data(), sb, y.data(), sa, [](float u, float v) { return u + v; });
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB"] = benchmark::Counter(2.0 * 4.0 * sa.num_elements() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AddBroadcastF32)->ArgsProduct({{0, 1, 2}})->ArgNames({"isa"})->UseRealTime();

// The element-wise ops on float tensors, 1 thread, at level range(1): range(0) 0 multiply of two
// [1M], 1 add of a [256, 1024] and a bias row [1024], 2 sqrt of [1M], 3 relu of [1M].
void BM_ElementwiseOpF32(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  LevelCap level(state, state.range(1));
  if (!level.ok) return;
  ThreadCap cap(1);
  const Shape sa = which == 1 ? Shape{256, 1024} : Shape{1 << 20}, sb = which == 1 ? Shape{1024} : sa;
  auto av = random_floats(sa.num_elements(), 12), bv = random_floats(sb.num_elements(), 13);
  for (auto& v : av) v = which == 2 ? v * v : v;
  const Tensor a = constant(av, sa), b = constant(bv, sb);
  for (auto _ : state) {
    Tensor y = which == 0 ? multiply(a, b) : which == 1 ? add(a, b) : which == 2 ? sqrt(a) : relu(a);
    benchmark::DoNotOptimize(y.data<float>());
  }
  state.counters["GB"] = benchmark::Counter((which < 2 ? 3.0 : 2.0) * 4.0 * sa.num_elements() * 1e-9,
                                            benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ElementwiseOpF32)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->ArgNames({"op", "isa"})->UseRealTime();

// Batch normalization's training kernels over [n, c] floats (range 0, 1), 1 thread, at level
// range(3): the forward (range(2) 0) or the backward (1).
void BM_BatchNormF32(benchmark::State& state) {
  const std::int64_t n = state.range(0), c = state.range(1);
  const bool backward = state.range(2) != 0;
  LevelCap level(state, state.range(3));
  if (!level.ok) return;
  ThreadCap cap(1);
  auto x = random_floats(n * c, 8), g = random_floats(n * c, 9), gamma = random_floats(c, 10), beta = random_floats(c, 11);
  std::vector<float> y(n * c), mean(c), var(c), inv(c), dgamma(c), dbeta(c);
  kernels::batch_norm_forward(x.data(), n, c, gamma.data(), beta.data(), 1e-3, y.data(), mean.data(), var.data(), inv.data());
  for (auto _ : state) {
    if (backward)
      kernels::batch_norm_backward(x.data(), g.data(), n, c, gamma.data(), mean.data(), inv.data(), y.data(),
                                   dgamma.data(), dbeta.data());
    else
      kernels::batch_norm_forward(x.data(), n, c, gamma.data(), beta.data(), 1e-3, y.data(), mean.data(), var.data(),
                                  inv.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB"] = benchmark::Counter((backward ? 3.0 : 2.0) * 4.0 * n * c * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BatchNormF32)
    ->ArgsProduct({{256}, {512}, {0, 1}, {0, 1, 2}})
    ->ArgsProduct({{8192}, {64}, {0, 1}, {0, 1, 2}})
    ->ArgNames({"n", "c", "backward", "isa"})
    ->UseRealTime();

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
BENCHMARK(BM_AdamStepF32)->ArgsProduct({{1 << 16, 1 << 20}, {0, 1, 2}})->ArgNames({"n", "isa"})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
