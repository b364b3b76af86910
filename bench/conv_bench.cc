// W8 and W9 (../shared/peers/RESULTS.md): one training step of the Keras convnet at batch 128 with
// Adam 1e-3 (ms/step) and one DCGAN step (two tapes, Adam 1e-4 each), on 1 and 2 threads; and
// every convolution product of both, forward / input gradient / filter gradient, in GFLOP/s
// (2·N·Ho·Wo·kh·kw·C·F flops each).
// Batches: W8 step k uses training examples [128 (k mod 468), +128) in file order; W9's real batch
// is the same scaled to [-1, 1]. Without the dataset, random data of the same shapes (label says so).
// Peers (2026-11-23, 2 threads / 1 thread, ms/step): W8 PyTorch 53.9 / 80.5, PyTorch channels_last
// 35.3 / 54.1, libtorch 51.0 / 82.1; W9 PyTorch 1,010 / 1,480, libtorch 770 / 1,241.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench_data.h"
#include "data/dataset.h"
#include "data/fashion_mnist_tensors.h"
#include "models/models.h"
#include "optimizers/adam.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/core/random.h"
#include "tape/kernels/parallel.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/conv_ops.h"
#include "tape/ops/math_ops.h"

namespace {

using namespace tapeflow;

constexpr std::int64_t kBatch = 128;

using bench::Data;
using bench::ThreadCap;
using bench::train_data;

data::Example batch(std::int64_t k) {
  const Data& d = train_data();
  std::vector<std::int64_t> rows(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) rows[static_cast<std::size_t>(i)] = (k % 468) * kBatch + i;
  return {data::gather_rows(d.x, rows), data::gather_rows(d.y, rows)};
}


void label(benchmark::State& state) {
  state.SetLabel(train_data().real ? "fashion-mnist" : "random data (dataset missing)");
}

// W8: tape -> sparse softmax CE from logits -> gradient -> Adam.
void BM_W8Step(benchmark::State& state) {
  ThreadCap cap(static_cast<int>(state.range(0)));
  auto model = models::make_classifier_cnn({.seed = 0});
  optimizers::Adam adam({.learning_rate = 1e-3});
  models::SparseCategoricalCrossentropy loss_fn({.from_logits = true});
  std::vector<data::Example> batches;
  for (std::int64_t k = 0; k < 16; ++k) batches.push_back(batch(k));
  std::size_t k = 0;
  auto step = [&] {
    const data::Example& b = batches[k++ % batches.size()];
    GradientTape tape;
    const Tensor loss = loss_fn(b[1], (*model)(b[0], true));
    const auto vars = model->trainable_variables();
    adam.apply_gradients(tape.gradient(loss, vars), vars);
  };
  for (int i = 0; i < 10; ++i) step();
  for (auto _ : state) step();
  state.counters["examples/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBatch), benchmark::Counter::kIsRate);
  label(state);
}
BENCHMARK(BM_W8Step)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// W9: the DCGAN step of the TF tutorial (gan_train_step: both gradients from one forward pass).
void BM_W9Step(benchmark::State& state) {
  ThreadCap cap(static_cast<int>(state.range(0)));
  auto g = models::make_dcgan_generator({.seed = 0});
  auto d = models::make_dcgan_discriminator({.seed = 100});
  optimizers::Adam g_opt({.learning_rate = 1e-4}), d_opt({.learning_rate = 1e-4});
  const Tensor real = reshape(batch(0)[0] * 2.0 - 1.0, Shape{kBatch, 28, 28, 1});
  Generator noise_gen(1);
  auto step = [&] {
    models::gan_train_step(*g, *d, g_opt, d_opt, real, random_normal(Shape{kBatch, 100}, noise_gen));
  };
  for (int i = 0; i < 2; ++i) step();
  for (auto _ : state) step();
  label(state);
}
BENCHMARK(BM_W9Step)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

// The convolution products of W8 and W9 at batch 128 (transposed convs as the conv they invert).
struct ConvCase {
  const char* name;
  Shape input, filter;  // conv2d(input, filter) view
  Size2D strides;
  const char* padding;
};
const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {"W8.conv1 28x28x1->26x26x32", {kBatch, 28, 28, 1}, {3, 3, 1, 32}, {1, 1}, "VALID"},
      {"W8.conv2 13x13x32->11x11x64", {kBatch, 13, 13, 32}, {3, 3, 32, 64}, {1, 1}, "VALID"},
      {"W9.D.conv1 28x28x1->14x14x64", {kBatch, 28, 28, 1}, {5, 5, 1, 64}, {2, 2}, "SAME"},
      {"W9.D.conv2 14x14x64->7x7x128", {kBatch, 14, 14, 64}, {5, 5, 64, 128}, {2, 2}, "SAME"},
      {"W9.G.convT1 7x7x256->7x7x128", {kBatch, 7, 7, 128}, {5, 5, 128, 256}, {1, 1}, "SAME"},
      {"W9.G.convT2 7x7x128->14x14x64", {kBatch, 14, 14, 64}, {5, 5, 64, 128}, {2, 2}, "SAME"},
      {"W9.G.convT3 14x14x64->28x28x1", {kBatch, 28, 28, 1}, {5, 5, 1, 64}, {2, 2}, "SAME"},
  };
  return cases;
}

// range(0): case, range(1): 0 forward / 1 input gradient / 2 filter gradient, range(2): threads.
void BM_ConvProduct(benchmark::State& state) {
  const ConvCase& c = conv_cases()[static_cast<std::size_t>(state.range(0))];
  ThreadCap cap(static_cast<int>(state.range(2)));
  Generator gen(3);
  const Tensor x = random_uniform(c.input, gen), f = random_uniform(c.filter, gen);
  const Tensor y = conv2d(x, f, c.strides, c.padding);
  const Tensor dy = random_uniform(y.shape(), gen);
  const int which = static_cast<int>(state.range(1));
  for (auto _ : state) {
    Tensor r = which == 0   ? conv2d(x, f, c.strides, c.padding)
               : which == 1 ? conv2d_backprop_input(x.shape(), f, dy, c.strides, c.padding)
                            : conv2d_backprop_filter(x, f.shape(), dy, c.strides, c.padding);
    benchmark::DoNotOptimize(r.raw_data());
  }
  const double flops = 2.0 * static_cast<double>(y.num_elements()) * static_cast<double>(c.filter.num_elements()) /
                       static_cast<double>(c.filter[3]);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(c.name) + (which == 0 ? " forward" : which == 1 ? " input-grad" : " filter-grad"));
}
BENCHMARK(BM_ConvProduct)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {0, 1, 2}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

// W8's conv2 as the step runs it: 0 the fused conv + bias + 2x2 pool + relu (Winograd F(2x2, 3x3)
// on floats), 1 the input gradient and 2 the filter gradient (Winograd F(3x3, 2x2)) of a dy with
// the pool gradient's zero last row and column; range(1): threads. GFLOP/s counts the direct
// product's FLOPs over the full 11 x 11 output (as BM_ConvProduct), so Winograd can pass the peak.
void BM_W8Conv2AsTrained(benchmark::State& state) {
  ThreadCap cap(static_cast<int>(state.range(1)));
  Generator gen(5);
  const Tensor x = random_uniform(Shape{kBatch, 13, 13, 32}, gen), f = random_uniform(Shape{3, 3, 32, 64}, gen);
  const Tensor b = random_uniform(Shape{64}, gen);
  Tensor dy = random_uniform(Shape{kBatch, 11, 11, 64}, gen);
  float* d = dy.mutable_data<float>();
  for (std::int64_t p = 0; p < kBatch * 121; ++p)
    if (p % 121 / 11 == 10 || p % 11 == 10) std::fill_n(d + p * 64, 64, 0.0f);
  const int which = static_cast<int>(state.range(0));
  for (auto _ : state) {
    Tensor r = which == 0   ? fused_conv2d_max_pool2d(x, f, b, {1, 1}, "VALID", {1, 1}, {2, 2}, {2, 2}, "VALID", "relu").first
               : which == 1 ? conv2d_backprop_input(x.shape(), f, dy, {1, 1}, "VALID")
                            : conv2d_backprop_filter(x, f.shape(), dy, {1, 1}, "VALID");
    benchmark::DoNotOptimize(r.raw_data());
  }
  const double flops = 2.0 * kBatch * 121 * 64 * 9 * 32;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(which == 0 ? "fused conv+pool forward" : which == 1 ? "input-grad (pool's dy)" : "filter-grad (pool's dy)");
}
BENCHMARK(BM_W8Conv2AsTrained)->ArgsProduct({{0, 1, 2}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

// W8's two max pools (2x2 stride 2 on [128,26,26,32] and on [128,11,11,64], where the last row and
// column fall outside every window), forward and gradient; GB/s counts the bytes each pass must
// move (forward: x read, y written; gradient: x and dy read, dx written), so the figure compares
// with BM_AddF32's memory bandwidth.
void BM_MaxPool(benchmark::State& state) {
  const Shape input = state.range(0) == 0 ? Shape{128, 26, 26, 32} : Shape{128, 11, 11, 64};
  ThreadCap cap(static_cast<int>(state.range(2)));
  Generator gen(4);
  const Tensor x = random_uniform(input, gen);
  const Tensor y = max_pool2d(x, {2, 2}, {2, 2}, "VALID");
  const Tensor dy = random_uniform(y.shape(), gen);
  const bool grad = state.range(1) == 1;
  for (auto _ : state) {
    Tensor r = grad ? max_pool2d_grad(x, dy, {2, 2}, {2, 2}, "VALID") : max_pool2d(x, {2, 2}, {2, 2}, "VALID");
    benchmark::DoNotOptimize(r.raw_data());
  }
  const double bytes = 4.0 * static_cast<double>(grad ? 2 * x.num_elements() + y.num_elements()
                                                      : x.num_elements() + y.num_elements());
  state.counters["GB/s"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(state.range(0) == 0 ? "W8.pool1" : "W8.pool2") + (grad ? " gradient" : " forward"));
}
BENCHMARK(BM_MaxPool)->ArgsProduct({{0, 1}, {0, 1}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

}  // namespace

BENCHMARK_MAIN();
