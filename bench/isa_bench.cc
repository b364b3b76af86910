// Issue 31: GFLOP/s of the GEMM and of every convolution product per instruction-set level
// (tape/core/cpu_isa.h: baseline = x86-64-v2, avx2 = AVX2 + FMA + F16C, avx512 = AVX-512F/BW/VL),
// each level capped with set_max_cpu_isa inside its benchmark and the cap restored after; levels the
// CPU lacks are not registered. The "level" counter is cpu_isa() as the benchmark ran (0 baseline,
// 1 avx2, 2 avx512), checked against the name.
//   BM_Matmul<T>/<shape>[/2threads]/<level>: C [m, n] = A [m, k] @ B [k, n], 2 m k n flops; shapes
//     square n (256, 512, 1024) or m x k x n of the workloads' training products.
//   BM_Conv2D/<product>/<algorithm>/<shape>/<level>: W8's two convolutions at batch 128 (float, 1
//     thread), each algorithm forced (tape/kernels/conv/internal/forced_algorithm.h; "auto" is the
//     library's own choice), 2 N Ho Wo F kh kw C flops for every product (the pooled ones too).
//     Products: forward (conv2d), input_grad, filter_grad, forward_pool (conv2d_max_pool2d, 2x2
//     pool), filter_grad_pool (conv2d_backprop_filter_bias_with_argmax: dfilter and dbias through
//     the pool's argmax). The gradients' dy is zero where a 2x2 VALID pool's gradient leaves it zero
//     (conv2's last row and column), as in the training step; that is what lets Winograd take conv2.
// Time: the calling thread's CPU time for the 1-thread benchmarks (the kernels run on it alone), so
// that other processes on a shared machine slow a figure less; wall time for the 2-thread GEMM.
// Run: build/bench/bench_isa_bench --benchmark_repetitions=3 (bench/README.md).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_data.h"
#include "tape/core/cpu_isa.h"
#include "tape/kernels/conv.h"
#include "tape/kernels/conv/internal/forced_algorithm.h"
#include "tape/kernels/matmul.h"

namespace {

using namespace tapeflow;
using kernels::Conv2DGeometry;
using kernels::internal::ConvAlgorithm;

// Caps the level for one benchmark and restores the previous cap.
struct IsaCap {
  explicit IsaCap(CpuIsa isa) : prev(set_max_cpu_isa(isa)) {}
  ~IsaCap() { set_max_cpu_isa(prev); }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;
  CpuIsa prev;
};

// Forces a convolution algorithm for one benchmark and restores the previous setting.
struct ForceAlgorithm {
  explicit ForceAlgorithm(ConvAlgorithm a) : prev(kernels::internal::force_conv_algorithm(a)) {}
  ~ForceAlgorithm() { kernels::internal::force_conv_algorithm(prev); }
  ForceAlgorithm(const ForceAlgorithm&) = delete;
  ForceAlgorithm& operator=(const ForceAlgorithm&) = delete;
  ConvAlgorithm prev;
};

// 64-byte aligned values in [-1, 1) (a fixed sequence; the kernels' speed does not depend on them).
template <class T>
struct Buffer {
  explicit Buffer(std::int64_t n, std::uint32_t seed = 1)
      : size(n), p(static_cast<T*>(std::aligned_alloc(64, static_cast<std::size_t>((n * sizeof(T) + 63) / 64 * 64)))) {
    if (!p) throw std::bad_alloc();
    std::uint32_t s = seed * 2654435761u + 1;
    for (std::int64_t i = 0; i < n; ++i) {
      s = s * 1664525u + 1013904223u;
      p.get()[i] = static_cast<T>(static_cast<double>(s >> 8) / double(1 << 23) - 1.0);
    }
  }
  T* data() const { return p.get(); }
  std::int64_t size;
  struct Free {
    void operator()(T* q) const { std::free(q); }
  };
  std::unique_ptr<T, Free> p;
};

// Sets the level; false (benchmark skipped) if cpu_isa() did not follow.
bool check_level(benchmark::State& state, CpuIsa isa) {
  state.counters["level"] = static_cast<double>(cpu_isa());
  if (cpu_isa() == isa) return true;
  state.SkipWithError(("cpu_isa() is " + std::string(cpu_isa_name(cpu_isa())) + ", not " +
                       std::string(cpu_isa_name(isa)))
                          .c_str());
  return false;
}

template <class T>
void bm_matmul(benchmark::State& state, CpuIsa isa, std::int64_t m, std::int64_t k, std::int64_t n, int threads) {
  bench::ThreadCap cap(threads);
  IsaCap level(isa);
  if (!check_level(state, isa)) return;
  const Buffer<T> a(m * k, 1), b(k * n, 2), c(m * n, 3);
  kernels::matmul(a.data(), b.data(), c.data(), 1, m, k, n, false, false, 0, 0);
  for (auto _ : state) {
    kernels::matmul(a.data(), b.data(), c.data(), 1, m, k, n, false, false, 0, 0);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2e-9 * static_cast<double>(m * k * n) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(cpu_isa_name(cpu_isa())));
}

// W8's convolutions at batch 128, VALID, stride 1: conv1 28x28x1 -> 26x26x32, conv2 13x13x32 -> 11x11x64.
Conv2DGeometry w8_conv(int which) {
  Conv2DGeometry g;
  g.n = 128;
  g.kh = g.kw = 3;
  if (which == 1) {
    g.h = g.w = 28, g.c = 1, g.f = 32;
  } else {
    g.h = g.w = 13, g.c = 32, g.f = 64;
  }
  g.ho = g.h - 2, g.wo = g.w - 2;
  return g;
}
// The 2x2 stride-2 VALID max pool over the convolution's output.
Conv2DGeometry pool_of(const Conv2DGeometry& g) {
  Conv2DGeometry p;
  p.n = g.n, p.h = g.ho, p.w = g.wo, p.c = p.f = g.f;
  p.kh = p.kw = p.sh = p.sw = 2;
  p.ho = g.ho / 2, p.wo = g.wo / 2;
  return p;
}

enum class Product { kForward, kInputGrad, kFilterGrad, kForwardPool, kFilterGradPool };
const char* product_name(Product p) {
  switch (p) {
    case Product::kForward: return "forward";
    case Product::kInputGrad: return "input_grad";
    case Product::kFilterGrad: return "filter_grad";
    case Product::kForwardPool: return "forward_pool";
    case Product::kFilterGradPool: return "filter_grad_pool";
  }
  return "?";
}

void bm_conv(benchmark::State& state, CpuIsa isa, Product product, ConvAlgorithm algorithm, int which) {
  bench::ThreadCap cap(1);
  IsaCap level(isa);
  if (!check_level(state, isa)) return;
  const Conv2DGeometry g = w8_conv(which), pool = pool_of(g);
  const Buffer<float> x(g.n * g.h * g.w * g.c, 1), filter(g.patch_size() * g.f, 2), bias(g.f, 3);
  Buffer<float> dy(g.out_pixels() * g.f, 4), dx(g.n * g.h * g.w * g.c), dfilter(g.patch_size() * g.f), dbias(g.f);
  Buffer<float> y(g.out_pixels() * g.f), py(pool.out_pixels() * g.f), pdy(pool.out_pixels() * g.f, 5);
  std::vector<std::int32_t> argmax(static_cast<std::size_t>(pool.out_pixels() * g.f));
  // dy as a 2x2 VALID pool's gradient leaves it: zero in the rows and columns no window reads.
  for (std::int64_t p = 0; p < g.out_pixels(); ++p) {
    const std::int64_t oh = p / g.wo % g.ho, ow = p % g.wo;
    if (oh >= 2 * pool.ho || ow >= 2 * pool.wo) std::fill_n(dy.data() + p * g.f, g.f, 0.0f);
  }
  kernels::conv2d_max_pool2d(x.data(), filter.data(), bias.data(), py.data(), argmax.data(), g, pool, false);
  const auto run = [&] {
    switch (product) {
      case Product::kForward: return kernels::conv2d(x.data(), filter.data(), y.data(), g);
      case Product::kInputGrad: return kernels::conv2d_backprop_input(filter.data(), dy.data(), dx.data(), g);
      case Product::kFilterGrad: return kernels::conv2d_backprop_filter(x.data(), dy.data(), dfilter.data(), g);
      case Product::kForwardPool:
        return kernels::conv2d_max_pool2d(x.data(), filter.data(), bias.data(), py.data(), argmax.data(), g, pool,
                                          true);
      case Product::kFilterGradPool:
        if (!kernels::conv2d_backprop_filter_bias_with_argmax(x.data(), pdy.data(), argmax.data(), dfilter.data(),
                                                              dbias.data(), g, pool, static_cast<const float*>(nullptr)))
          throw std::logic_error("conv2d_backprop_filter_bias_with_argmax: bad argmax");
        return;
    }
  };
  ForceAlgorithm force(algorithm);
  try {
    run();  // warm-up, and the forced algorithm's applicability
  } catch (const std::invalid_argument& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(g.out_pixels() * g.f * g.patch_size());
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(cpu_isa_name(cpu_isa())));
}

template <class T>
void register_matmuls(const char* type, CpuIsa isa) {
  const std::string level(cpu_isa_name(isa));
  struct Shape {
    std::int64_t m, k, n;
    const char* name;  // the workload it comes from (comment only)
  };
  // Training products: W1's first and last Dense (batch 128), the LSTM's input and recurrent
  // products (4 x 128 gates), the ViT's qkv projection (128 images x 49 tokens of 64).
  static const Shape shapes[] = {{128, 784, 256, "W1 dense1"}, {128, 256, 10, "W1 dense3"},
                                 {128, 28, 512, "LSTM input"}, {128, 128, 512, "LSTM recurrent"},
                                 {6272, 64, 192, "ViT qkv"}};
  for (const std::int64_t n : {256, 512, 1024})
    benchmark::RegisterBenchmark(("BM_Matmul<" + std::string(type) + ">/" + std::to_string(n) + "/" + level).c_str(),
                                 [=](benchmark::State& s) { bm_matmul<T>(s, isa, n, n, n, 1); })
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(("BM_Matmul<" + std::string(type) + ">/1024/2threads/" + level).c_str(),
                               [=](benchmark::State& s) { bm_matmul<T>(s, isa, 1024, 1024, 1024, 2); })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  for (const Shape& sh : shapes)
    benchmark::RegisterBenchmark(("BM_Matmul<" + std::string(type) + ">/" + std::to_string(sh.m) + "x" +
                                  std::to_string(sh.k) + "x" + std::to_string(sh.n) + "/" + level)
                                     .c_str(),
                                 [=](benchmark::State& s) { bm_matmul<T>(s, isa, sh.m, sh.k, sh.n, 1); })
        ->Unit(benchmark::kMillisecond);
}

void register_convs(CpuIsa isa) {
  using A = ConvAlgorithm;
  using P = Product;
  struct Case {
    P product;
    int which;  // W8's conv1 or conv2
    std::vector<A> algorithms;
  };
  // The algorithms that take each product on each shape (forced_algorithm.h), the library's choice first.
  const std::vector<Case> cases = {
      {P::kForward, 1, {A::kAuto, A::kDirect, A::kIgemm}},
      {P::kInputGrad, 1, {A::kAuto, A::kIm2col, A::kIgemm}},
      {P::kFilterGrad, 1, {A::kAuto, A::kDirect, A::kIm2col}},
      {P::kForwardPool, 1, {A::kAuto, A::kPoolFused, A::kDirect}},
      {P::kFilterGradPool, 1, {A::kAuto, A::kPoolFused, A::kDirect}},
      {P::kForward, 2, {A::kAuto, A::kIgemm, A::kDirect}},
      {P::kInputGrad, 2, {A::kAuto, A::kIgemm, A::kIm2col}},
      {P::kFilterGrad, 2, {A::kAuto, A::kWinograd, A::kFilterGemm, A::kIm2col, A::kDirect}},
      {P::kForwardPool, 2, {A::kAuto, A::kWinograd, A::kIgemm}},
  };
  const std::string level(cpu_isa_name(isa));
  for (const Case& c : cases)
    for (const A a : c.algorithms) {
      const std::string shape = c.which == 1 ? "conv1_28x28x1_26x26x32" : "conv2_13x13x32_11x11x64";
      benchmark::RegisterBenchmark(("BM_Conv2D/" + std::string(product_name(c.product)) + "/" +
                                    std::string(kernels::internal::conv_algorithm_name(a)) + "/" + shape + "/" + level)
                                       .c_str(),
                                   [=](benchmark::State& s) { bm_conv(s, isa, c.product, a, c.which); })
          ->Unit(benchmark::kMillisecond);
    }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // Every level up to the CPU's best, whatever TAPEFLOW_MAX_CPU_ISA says (each benchmark sets its own).
  std::vector<CpuIsa> levels;
  for (const CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (isa <= host_cpu_isa()) levels.push_back(isa);
  for (const CpuIsa isa : levels) register_matmuls<float>("float", isa);
  for (const CpuIsa isa : levels) register_matmuls<double>("double", isa);
  for (const CpuIsa isa : levels) register_convs(isa);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
