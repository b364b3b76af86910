// W1 data-parallel (issue 16): training throughput of the classifier MLP (784-256-BN-ReLU-256-BN-
// ReLU-10, Adam 1e-3, sparse softmax CE) under mpirun, and where the gradient reduction's time goes.
//   mpirun -np N bench_distribute_w1 [--threads T] [--batch B] [--per-rank] [--steps S]
// --batch is the global batch (split across ranks) unless --per-rank (then every rank takes B:
// weak scaling, Horovod's convention). Three phases of S timed steps after warm-up, on the same data:
//   overlap      fusion buffers start during the backward pass (the default)
//   no-overlap   every buffer starts after the backward pass (what overlap is compared against)
//   comm-only    only the reductions of precomputed gradients (the communication's own cost)
// Reported by rank 0 (medians over 5 blocks): examples/s (global), ms/step, ms/step blocked waiting
// for the reduction after backward, and hidden = 1 - wait(overlap) / wait(no-overlap).
// Uses the Fashion-MNIST training set if installed, else random data of the same shape.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/fashion_mnist_tensors.h"
#include "distribute/distribute.h"
#include "models/models.h"
#include "optimizers/adam.h"
#include "tape/core/random.h"
#include "tape/kernels/parallel.h"

namespace tf = tapeflow;
using Clock = std::chrono::steady_clock;

namespace {

struct Phase {
  double step_ms = 0, wait_ms = 0, backward_ms = 0, early_buffers = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  tf::distribute::Context ctx(&argc, &argv);
  int threads = 1, steps = 40;
  std::int64_t batch = 128, fusion = 1 << 20;
  bool per_rank = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
    if (a == "--threads") threads = std::stoi(next());
    else if (a == "--batch") batch = std::stoll(next());
    else if (a == "--steps") steps = std::stoi(next());
    else if (a == "--fusion-bytes") fusion = std::stoll(next());
    else if (a == "--per-rank") per_rank = true;
  }
  tf::kernels::set_num_threads(threads);
  spdlog::set_level(spdlog::level::warn);
  const std::int64_t local = per_rank ? batch : batch / ctx.size();
  const std::int64_t global = local * ctx.size();

  tf::Tensor x, y;
  bool real = true;
  try {
    auto t = tf::data::load_fashion_mnist_tensors(tf::data::kDefaultFashionMnistDir, 0, tf::DType::kInt64);
    x = t.x_train;
    y = t.y_train;
  } catch (const std::runtime_error&) {
    real = false;
    tf::Generator g(1);
    x = tf::random_uniform(tf::Shape{60000, 784}, g);
    std::vector<std::int64_t> labels(60000);
    for (auto& v : labels) v = static_cast<std::int64_t>(g.uniform_int(10));
    y = tf::constant(labels, tf::Shape{60000});
  }
  // This rank's batches: global batch k, rows [k·global + rank·local, +local).
  std::vector<tf::data::Example> batches;
  for (std::int64_t k = 0; k < 50; ++k) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(local));
    std::iota(rows.begin(), rows.end(), (k * global + ctx.rank() * local) % (60000 - local));
    batches.push_back({tf::data::gather_rows(x, rows), tf::data::gather_rows(y, rows)});
  }
  auto model = tf::models::make_classifier_mlp({.seed = 1});
  auto loss_fn = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
      tf::models::CrossentropyOptions{.from_logits = true});
  tf::optimizers::Adam adam({.learning_rate = 1e-3});

  std::int64_t step_index = 0;
  auto train_step = [&] {
    const tf::data::Example& b = batches[static_cast<std::size_t>(step_index++ % 50)];
    tf::GradientTape tape;
    const tf::Tensor logits = (*model)(b[0], true);
    const tf::Tensor loss = (*loss_fn)(b[1], logits);
    const auto vars = model->trainable_variables();
    auto grads = ctx.gradient(tape, loss, vars);
    adam.apply_gradients(grads, vars);
  };
  auto run_phase = [&](bool overlap, bool comm_only) {
    ctx.set_fusion(fusion, overlap);
    for (int i = 0; i < 5; ++i) train_step();  // warm-up
    std::vector<std::optional<tf::Tensor>> fixed;
    std::vector<tf::Variable> vars = model->trainable_variables();
    if (comm_only)
      for (const auto& v : vars) fixed.emplace_back(tf::ones(v.shape()));
    std::vector<double> step_ms, wait_ms, backward_ms, early;
    for (int block = 0; block < 5; ++block) {
      std::vector<double> barrier{0};
      ctx.all_reduce(barrier, tf::models::ReduceOp::kSum, "bench: block start");
      ctx.reset_timings();
      const auto t0 = Clock::now();
      for (int s = 0; s < steps; ++s) {
        if (comm_only) ctx.reduce_gradients(fixed, vars);
        else train_step();
      }
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      const auto& t = ctx.timings();
      step_ms.push_back(ms / steps);
      wait_ms.push_back(1e3 * t.wait_seconds / steps);
      backward_ms.push_back(1e3 * t.backward_seconds / steps);
      early.push_back(static_cast<double>(t.started_in_backward) / steps);
    }
    return Phase{median(step_ms), median(wait_ms), median(backward_ms), median(early)};
  };
  const Phase ov = run_phase(true, false);
  const Phase no = run_phase(false, false);
  const Phase comm = run_phase(false, true);
  if (ctx.rank() == 0) {
    std::printf("W1 data-parallel: %d rank(s) x %d thread(s), batch %lld per rank (global %lld), %s data, "
                "fusion %lld bytes, %lld bytes of gradients per step\n",
                ctx.size(), threads, static_cast<long long>(local), static_cast<long long>(global),
                real ? "Fashion-MNIST" : "random", static_cast<long long>(fusion),
                static_cast<long long>(ctx.timings().bytes / std::max<std::int64_t>(1, ctx.timings().reductions)));
    std::printf("  overlap:    %8.0f examples/s  %7.3f ms/step  backward %7.3f ms  wait %6.3f ms  buffers started in "
                "backward %.1f\n",
                1e3 * static_cast<double>(global) / ov.step_ms, ov.step_ms, ov.backward_ms, ov.wait_ms, ov.early_buffers);
    std::printf("  no-overlap: %8.0f examples/s  %7.3f ms/step  backward %7.3f ms  wait %6.3f ms\n",
                1e3 * static_cast<double>(global) / no.step_ms, no.step_ms, no.backward_ms, no.wait_ms);
    std::printf("  comm-only:  %7.3f ms per reduction of all gradients\n", comm.step_ms);
    if (ctx.size() > 1)
      std::printf("  hidden behind backward: %.0f%% (1 - wait overlap / wait no-overlap)\n",
                  100.0 * (1.0 - ov.wait_ms / std::max(no.wait_ms, 1e-9)));
  }
  return 0;
}
