// W1 (../shared/peers/RESULTS.md): one training step of the classifier MLP at batch 128 with Adam
// 1e-3 (ms/step), and one full Fashion-MNIST epoch through Model::fit (s/epoch), on 1 and 2 threads.
// Batches: step k uses training examples [128 (k mod 468), +128) in file order, as the peers do.
// Without the dataset installed, random data of the same shapes is used (the label says so).
// Peers (2 threads, OpenBLAS): PyTorch 0.964 ms/step, libtorch 0.818 ms/step; 0.479 / 0.420 s/epoch.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "bench/bench_data.h"
#include "data/dataset.h"
#include "data/fashion_mnist_tensors.h"
#include "layers/rnn/lstm.h"
#include "models/models.h"
#include "optimizers/adam.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/core/random.h"
#include "tape/kernels/parallel.h"

namespace {

using namespace tapeflow;

constexpr std::int64_t kBatch = 128;

using bench::Data;
using bench::ThreadCap;
using bench::train_data;

// The 468 contiguous batches of W1's BatchCycler, copied once.
const std::vector<data::Example>& w1_batches() {
  static const std::vector<data::Example> batches = [] {
    std::vector<data::Example> out;
    const Data& d = train_data();
    for (std::int64_t b = 0; b < 60000 / kBatch; ++b) {
      std::vector<std::int64_t> rows(kBatch);
      std::iota(rows.begin(), rows.end(), b * kBatch);
      out.push_back({data::gather_rows(d.x, rows), data::gather_rows(d.y, rows)});
    }
    return out;
  }();
  return batches;
}


// The workloads' compile: `optimizer`, sparse softmax cross-entropy from logits, the accuracy metric.
void compile_classifier(models::Model& model, std::shared_ptr<optimizers::Optimizer> optimizer) {
  model.compile({.optimizer = std::move(optimizer),
                 .loss = std::make_shared<models::SparseCategoricalCrossentropy>(
                     models::CrossentropyOptions{.from_logits = true}),
                 .metrics = {"accuracy"}});
}

std::shared_ptr<optimizers::Adam> adam_1e3() {
  return std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 1e-3});
}

std::shared_ptr<models::Sequential> compiled_mlp() {
  auto model = models::make_classifier_mlp({.seed = 0});
  compile_classifier(*model, adam_1e3());
  return model;
}

void label(benchmark::State& state) {
  state.SetLabel(train_data().real ? "fashion-mnist" : "random data (dataset missing)");
}

// `warmup` Model::train_steps, then the timed ones, over W1's batches in order; reports examples/s.
void time_train_steps(benchmark::State& state, models::Model& model, int warmup) {
  const auto& batches = w1_batches();
  std::size_t k = 0;
  for (int i = 0; i < warmup; ++i) model.train_step(batches[k++ % batches.size()]);
  for (auto _ : state) model.train_step(batches[k++ % batches.size()]);
  state.counters["examples/s"] = benchmark::Counter(static_cast<double>(state.iterations() * kBatch),
                                                    benchmark::Counter::kIsRate);
  label(state);
}

// Model::train_step: forward, loss, tape gradient, Adam update, loss tracker and accuracy metric.
void BM_W1TrainStep(benchmark::State& state) {
  ThreadCap cap(static_cast<int>(state.range(0)));
  time_train_steps(state, *compiled_mlp(), 20);
}
BENCHMARK(BM_W1TrainStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// The same step written as a custom loop (tape -> loss -> gradient -> apply_gradients), no metrics:
// the exact work of the PyTorch step.
void BM_W1TapeStep(benchmark::State& state) {
  ThreadCap cap(static_cast<int>(state.range(0)));
  const auto& batches = w1_batches();
  auto model = models::make_classifier_mlp({.seed = 0});
  optimizers::Adam adam({.learning_rate = 1e-3});
  models::SparseCategoricalCrossentropy loss_fn({.from_logits = true});
  std::size_t k = 0;
  auto step = [&] {
    const data::Example& b = batches[k++ % batches.size()];
    GradientTape tape;
    const Tensor loss = loss_fn(b[1], (*model)(b[0], true));
    const auto vars = model->trainable_variables();
    adam.apply_gradients(tape.gradient(loss, vars), vars);
  };
  for (int i = 0; i < 20; ++i) step();
  for (auto _ : state) step();
  label(state);
}
BENCHMARK(BM_W1TapeStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// One epoch of Model::fit on the 60k training set (shuffled, batch 128, 469 steps, loss.item() per step).
void BM_W1FitEpoch(benchmark::State& state) {
  ThreadCap cap(static_cast<int>(state.range(0)));
  const Data& d = train_data();
  auto model = compiled_mlp();
  std::uint64_t seed = 1234;
  for (auto _ : state) model->fit(d.x, d.y, {.batch_size = kBatch, .epochs = 1, .verbose = 0, .seed = seed++});
  label(state);
}
BENCHMARK(BM_W1FitEpoch)->Arg(1)->Arg(2)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1)->Repetitions(3);

// W11 (../shared/peers/py/w11_lstm.py): one Model::train_step of the LSTM classifier (Reshape 28x28 ->
// LSTM 128 -> Dense 10, Adam 1e-3) at batch 128 on W1's real batches (ms/step). Peers (2 threads, same
// machine, see the issue): PyTorch 2.15 11.3-11.6 ms/step, TensorFlow 2.21 XLA 24.4-25.8, libtorch 32.7.
// Arg 2: 1 = the fused LSTMBlockCell step (the layer's default), 0 = the same math composed from ops (A/B).
// Reported as BM_W11Step/<threads>/<fused> (unnamed args and the BM_ prefix, so that
// ../shared/peers/pypi/run.sh, which keeps "^BM_" lines filtered by "W11Step/<threads>/", shows them).
void BM_W11Step(benchmark::State& state) {
  ThreadCap cap(static_cast<int>(state.range(0)));
  auto model = models::make_classifier_lstm({.seed = 0});
  auto lstm = std::dynamic_pointer_cast<layers::LSTM>(model->layers()[1]);
  std::dynamic_pointer_cast<layers::LSTMCell>(lstm->cell())->set_fused(state.range(1) != 0);
  compile_classifier(*model, adam_1e3());
  time_train_steps(state, *model, 5);
}
BENCHMARK(BM_W11Step)
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({1, 0})
    ->Args({2, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

// W12 (../shared/peers/py/w12_vit.py): one Model::train_step of the Keras ViT example for 28x28
// (make_classifier_vit: 49 tokens of 16 pixels, 4 blocks of LayerNorm -> MultiHeadAttention 4x16 ->
// LayerNorm -> MLP 128 gelu, dropout 0.1 in training) with AdamW(1e-3, weight_decay 1e-4) at batch 128
// on W1's real batches (ms/step). Peers (2 threads, same machine, see the issue): PyTorch 2.15
// 165-170 ms/step, TensorFlow 2.21 tf.function 177-186, PyTorch 1.13 205-215, libtorch 213.
void BM_W12Step(benchmark::State& state) {
  ThreadCap cap(static_cast<int>(state.range(0)));
  auto model = models::make_classifier_vit({.seed = 0});
  compile_classifier(*model, std::make_shared<optimizers::AdamW>(
                                 optimizers::AdamWOptions{.learning_rate = 1e-3, .weight_decay = 1e-4}));
  time_train_steps(state, *model, 2);
}
BENCHMARK(BM_W12Step)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);

}  // namespace

BENCHMARK_MAIN();
