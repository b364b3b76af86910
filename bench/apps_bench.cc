// W4 and W5 (../shared/peers/RESULTS.md), the workloads of the two bundled apps, on 1 and 2 threads:
//   W4: one GAN step (D + G update, two tapes, batch 128) through models::gan_train_step;
//       peers (2 threads, OpenBLAS): PyTorch 5.55 ms, libtorch 5.09 ms; target <= 3.5 ms.
//   W5: one input-gradient-regularized step (MLP 784-256-10, batch 128, loss = CE + 0.1·‖∂CE/∂x‖₂,
//       Adam 1e-3) through models::input_gradient_regularized_step;
//       peers: PyTorch 1.39 ms, libtorch 1.26 ms; target <= 0.9 ms.
// Batches: step k uses training examples [128 (k mod 468), +128) in file order, as the peers do
// (W4 scales them to [-1, 1]). Without the dataset, random data of the same shapes (label says so).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "data/dataset.h"
#include "data/fashion_mnist_tensors.h"
#include "models/adversarial.h"
#include "models/architectures.h"
#include "models/gan.h"
#include "optimizers/adam.h"
#include "tape/core/random.h"
#include "tape/kernels/parallel.h"
#include "tape/ops/math_ops.h"

namespace {

using namespace tapeflow;

constexpr std::int64_t kBatch = 128;

struct Batches {
  std::vector<Tensor> x, y, x_tanh;  // x in [0, 1], labels, x scaled to [-1, 1]
  bool real = true;
};

const Batches& batches() {
  static const Batches b = [] {
    Tensor x, y;
    bool real = true;
    try {
      auto t = data::load_fashion_mnist_tensors(data::kDefaultFashionMnistDir, 0, DType::kInt64);
      x = t.x_train, y = t.y_train;
    } catch (const std::runtime_error&) {
      Generator g(1);
      x = random_uniform(Shape{60000, 784}, g);
      std::vector<std::int64_t> labels(60000);
      for (auto& v : labels) v = static_cast<std::int64_t>(g.uniform_int(10));
      y = constant(labels, Shape{60000});
      real = false;
    }
    Batches out;
    out.real = real;
    for (std::int64_t k = 0; k < 60000 / kBatch; ++k) {
      std::vector<std::int64_t> rows(kBatch);
      std::iota(rows.begin(), rows.end(), k * kBatch);
      out.x.push_back(data::gather_rows(x, rows));
      out.y.push_back(data::gather_rows(y, rows));
      out.x_tanh.push_back(out.x.back() * 2.0 - 1.0);
    }
    return out;
  }();
  return b;
}

struct ThreadCap {
  explicit ThreadCap(int n) : prev(kernels::set_num_threads(n)) {}
  ~ThreadCap() { kernels::set_num_threads(prev); }
  int prev;
};

void label(benchmark::State& state) {
  state.SetLabel(batches().real ? "fashion-mnist" : "random data (dataset missing)");
}

void BM_W4GanStep(benchmark::State& state) {
  ThreadCap cap(static_cast<int>(state.range(0)));
  const Batches& b = batches();
  auto g = models::make_gan_generator({.seed = 0});
  auto d = models::make_gan_discriminator({.seed = 100});
  optimizers::Adam g_opt({.learning_rate = 2e-4, .beta_1 = 0.5});
  optimizers::Adam d_opt({.learning_rate = 2e-4, .beta_1 = 0.5});
  Generator z_gen(1);
  std::size_t k = 0;
  auto step = [&] {
    const Tensor z = random_normal(Shape{kBatch, 100}, z_gen);
    benchmark::DoNotOptimize(models::gan_train_step(*g, *d, g_opt, d_opt, b.x_tanh[k++ % b.x_tanh.size()], z));
  };
  for (int i = 0; i < 10; ++i) step();  // warm-up
  for (auto _ : state) step();
  label(state);
}
BENCHMARK(BM_W4GanStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

void BM_W5InputGradRegStep(benchmark::State& state) {
  ThreadCap cap(static_cast<int>(state.range(0)));
  const Batches& b = batches();
  auto model = models::make_classifier_mlp({.hidden = {256}, .batch_norm = false, .seed = 0});
  optimizers::Adam adam({.learning_rate = 1e-3, .epsilon = 1e-7});
  std::size_t k = 0;
  auto step = [&] {
    const std::size_t i = k++ % b.x.size();
    benchmark::DoNotOptimize(models::input_gradient_regularized_step(*model, adam, b.x[i], b.y[i], 0.1));
  };
  for (int i = 0; i < 10; ++i) step();
  for (auto _ : state) step();
  label(state);
}
BENCHMARK(BM_W5InputGradRegStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
