// W1 / W8 data-parallel (issues 16, 33): training throughput under mpirun of the classifier MLP
// (W1: 784-256-BN-ReLU-256-BN-ReLU-10) or, with --model cnn, the Keras convnet (W8: Conv2D 32 ->
// MaxPool -> Conv2D 64 -> MaxPool -> Dropout -> Dense 10; ~10x W1's compute per gradient byte), both
// Adam 1e-3 with sparse softmax CE, and where the gradient reduction's time goes.
//   mpirun -np N bench_distribute_w1 [--model mlp|cnn] [--threads T] [--batch B] [--per-rank] [--steps S]
//                                    [--only MODE] [--blocks K]
// Across the test hosts of scripts/test_hosts.sh (TCP between namespaces):
//   scripts/test_hosts.sh mpirun --host tfh1:1,tfh2:1 -np 2 build/bench/distribute/bench_distribute_w1 ...
// --batch is the global batch (split across ranks) unless --per-rank (then every rank takes B:
// weak scaling, Horovod's convention). Four modes of S timed steps, interleaved block by block (7
// blocks each, medians reported by rank 0):
//   overlap      fusion buffers start during the backward pass (the default)
//   no-overlap   every buffer starts after the backward pass (what overlap is compared against)
//   local        the same step without any communication (this rank's compute)
//   comm-only    only the reductions of precomputed gradients (the communication's own cost)
//   local+sync   the local step followed by an 8-byte allreduce: what any synchronous step pays on
//                top of local when the ranks' step times vary (each step waits for the slower rank)
// --only MODE runs that mode's blocks alone (and, for modes with communication, only the network sum
// unless the ranks share a machine: then both transports), e.g. `--only comm-only` to profile the
// reduction by itself (perf record on one rank); "of local" needs local, so it is printed only
// with every mode.
// cpu = this rank's CPU time per step, all its threads (a progress thread's polling shows here).
// wait = ms per step blocked after the backward pass until every buffer is reduced (communication
// not hidden, plus waiting for a slower rank); hidden = (wait no-overlap - wait overlap) / comm-only.
// Where the ranks share machines (shared-memory groups), the modes with communication run twice,
// interleaved: through the shared-memory window (the default) and through the network sum
// (ContextOptions::shared_memory off; 2 ranks swap their copies, more use alltoall + allgather), so the
// two transports are compared in one run.
// "of local" = local ms/step / the mode's ms/step: the rate with communication as a share of the rate
// the same ranks reach without any (the machine's own bound: on a shared 2-core machine two ranks
// that never communicate do not run at twice one rank's rate).
// Uses the Fashion-MNIST training set if installed, else random data of the same shape.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
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
  double step_ms = 0, wait_ms = 0, backward_ms = 0, early_buffers = 0, cpu_ms = 0;
};

// CPU time of this process, all threads (the progress thread's polling shows here, not in wall time alone).
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  tf::distribute::Context ctx(&argc, &argv);
  int threads = 1, steps = 40;
  std::string model_name = "mlp";
  std::int64_t batch = 128, fusion = 1 << 20;
  bool per_rank = false;
  CLI::App app{"W1 / W8 data-parallel throughput (run under mpirun)"};
  app.add_option("--model", model_name, "mlp (W1) or cnn (W8)")->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--threads", threads, "threads per rank")->check(CLI::Range(1, 256));
  app.add_option("--batch", batch, "global batch (per rank with --per-rank)")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  app.add_option("--steps", steps, "timed steps per block")->check(CLI::Range(1, 1000000));
  app.add_option("--fusion-bytes", fusion, "fusion buffer threshold")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  app.add_flag("--per-rank", per_rank, "--batch is per rank (weak scaling)");
  std::string compression = "none";
  app.add_option("--compression", compression, "gradients over the network: none (float32) or fp16")
      ->check(CLI::IsMember({"none", "fp16"}));
  std::string only = "all";
  app.add_option("--only", only, "run only this mode (all: every mode, interleaved)")
      ->check(CLI::IsMember({"all", "overlap", "no-overlap", "local", "comm-only", "local+sync"}));
  int blocks = 7;
  app.add_option("--blocks", blocks, "blocks per mode (medians over blocks)")->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);
  tf::kernels::set_num_threads(threads);
  ctx.set_compression(compression == "fp16" ? tf::distribute::Compression::kFp16 : tf::distribute::Compression::kNone);
  spdlog::set_level(spdlog::level::warn);
  const std::int64_t local = per_rank ? batch : batch / ctx.size();
  const std::int64_t global = local * ctx.size();
  if (local < 1) {
    std::fprintf(stderr, "--batch %lld is smaller than the %d ranks: every rank needs an example\n",
                 static_cast<long long>(batch), ctx.size());
    return 2;
  }

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
  const bool cnn = model_name == "cnn";
  auto model = cnn ? tf::models::make_classifier_cnn({.seed = 1}) : tf::models::make_classifier_mlp({.seed = 1});
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
  // One block of `steps` steps in a mode; returns per-step figures.
  enum Mode { kOverlap, kNoOverlap, kLocal, kCommOnly, kLocalSync };
  std::vector<tf::Variable> vars = model->trainable_variables();
  std::vector<std::optional<tf::Tensor>> fixed;
  auto run_block = [&](Mode mode, bool shared_memory) {
    ctx.set_fusion(fusion, mode == kOverlap);
    ctx.set_shared_memory(shared_memory);
    if (vars.empty()) vars = model->trainable_variables();
    if (fixed.empty())
      for (const auto& v : vars) fixed.emplace_back(tf::ones(v.shape()));
    std::vector<double> barrier{0};
    ctx.all_reduce(barrier, tf::models::ReduceOp::kSum, "bench: block start");
    ctx.reset_timings();
    const double c0 = process_cpu_ms();
    const auto t0 = Clock::now();
    for (int s = 0; s < steps; ++s) {
      if (mode == kCommOnly) {
        ctx.reduce_gradients(fixed, vars);
      } else if (mode == kLocal || mode == kLocalSync) {  // this rank's step without gradient communication
        const tf::data::Example& b = batches[static_cast<std::size_t>(step_index++ % 50)];
        tf::GradientTape tape;
        const tf::Tensor loss = (*loss_fn)(b[1], (*model)(b[0], true));
        adam.apply_gradients(tape.gradient(loss, vars), vars);
        if (mode == kLocalSync) {  // then one 8-byte allreduce: the ranks wait for the slowest
          std::vector<double> token{1};
          ctx.all_reduce(token, tf::models::ReduceOp::kSum, "bench: step end");
        }
      } else {
        train_step();
      }
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const auto& t = ctx.timings();
    return Phase{ms / steps, 1e3 * t.wait_seconds / steps, 1e3 * t.backward_seconds / steps,
                 static_cast<double>(t.started_in_backward) / steps, (process_cpu_ms() - c0) / steps};
  };
  for (int i = 0; i < 5; ++i) train_step();  // warm-up (builds the model and the optimizer's slots)
  ctx.set_shared_memory(true);
  const bool have_shared = ctx.uses_shared_memory();
  // Modes interleaved block by block, so that a change of machine load hits them alike; runs[t][m]
  // for transport t (0 shared memory, 1 the network sum).
  std::vector<std::vector<std::vector<Phase>>> runs(2, std::vector<std::vector<Phase>>(5));
  const char* const mode_names[] = {"overlap", "no-overlap", "local", "comm-only", "local+sync"};
  for (int block = 0; block < blocks; ++block)
    for (Mode m : {kOverlap, kNoOverlap, kLocal, kCommOnly, kLocalSync})
      for (int t = have_shared ? 0 : 1; t < 2; ++t)
        if ((only == "all" || only == mode_names[m]) && (t == 1 || (m != kLocal && m != kLocalSync)))
          runs[static_cast<std::size_t>(t)][m].push_back(run_block(m, t == 0));
  auto med = [&](int t, Mode m, double Phase::*field) {
    std::vector<double> v;
    for (const Phase& p : runs[static_cast<std::size_t>(t)][m]) v.push_back(p.*field);
    return median(v);
  };
  std::int64_t gradient_bytes = 0;
  for (const auto& v : vars) gradient_bytes += v.shape().num_elements() * 4;
  std::string layout;  // host (ranks), ...
  for (int r = 0; r < ctx.size(); ++r) {
    if (r > 0 && ctx.host(r) == ctx.host(r - 1)) continue;
    if (!layout.empty()) layout += ", ";
    layout += ctx.host(r);
    layout += " x";
    int n = 0;
    for (int q = 0; q < ctx.size(); ++q) n += ctx.host(q) == ctx.host(r) ? 1 : 0;
    layout += std::to_string(n);
  }
  if (ctx.rank() == 0)
    std::printf("%s data-parallel: %d rank(s) x %d thread(s) on %s, batch %lld per rank (global %lld), %s data, "
                "fusion %lld bytes\n",
                cnn ? "W8" : "W1", ctx.size(), threads, layout.c_str(), static_cast<long long>(local),
                static_cast<long long>(global), real ? "Fashion-MNIST" : "random", static_cast<long long>(fusion));
  if (only != "all") {  // one mode alone: its medians, no ratios
    for (int t = 0; t < 2; ++t)
      for (int m = 0; m < 5; ++m) {
        const auto& r = runs[static_cast<std::size_t>(t)][static_cast<std::size_t>(m)];
        if (r.empty() || ctx.rank() != 0) continue;
        const Mode mode = static_cast<Mode>(m);
        std::printf("  %-11s %s: %7.3f ms/step  wait %6.3f ms  cpu %7.3f ms/step (%d blocks of %d steps)\n",
                    (std::string(mode_names[m]) + ":").c_str(), t == 0 ? "shared-memory window" : "network sum",
                    med(t, mode, &Phase::step_ms), med(t, mode, &Phase::wait_ms), med(t, mode, &Phase::cpu_ms), blocks,
                    steps);
      }
    return 0;
  }
  const double local_ms = med(1, kLocal, &Phase::step_ms);
  if (ctx.rank() == 0) {
    std::printf("  local:      %8.0f examples/s  %7.3f ms/step (this rank's step, no communication)  cpu %7.3f ms/step\n",
                1e3 * static_cast<double>(global) / local_ms, local_ms, med(1, kLocal, &Phase::cpu_ms));
    if (ctx.size() > 1) {
      const double sync_ms = med(1, kLocalSync, &Phase::step_ms);
      std::printf("  local+sync: %8.0f examples/s  %7.3f ms/step  %5.1f%% of local (the same step, then an 8-byte "
                  "allreduce: every step waits for the slower rank)\n",
                  1e3 * static_cast<double>(global) / sync_ms, sync_ms, 100 * local_ms / sync_ms);
    }
  }
  for (int t = have_shared ? 0 : 1; t < 2; ++t) {
    const Phase ov{med(t, kOverlap, &Phase::step_ms), med(t, kOverlap, &Phase::wait_ms),
                   med(t, kOverlap, &Phase::backward_ms), med(t, kOverlap, &Phase::early_buffers),
                   med(t, kOverlap, &Phase::cpu_ms)};
    const Phase no{med(t, kNoOverlap, &Phase::step_ms), med(t, kNoOverlap, &Phase::wait_ms),
                   med(t, kNoOverlap, &Phase::backward_ms), 0, med(t, kNoOverlap, &Phase::cpu_ms)};
    const double comm_ms = med(t, kCommOnly, &Phase::step_ms);
    if (ctx.rank() != 0) continue;
    std::printf(" %s:\n", t == 0              ? "shared-memory window"
                          : ctx.size() == 2 ? "network sum (the 2 ranks swap their copies)"
                                            : "network sum (alltoall + allgather)");
    std::printf("  overlap:    %8.0f examples/s  %7.3f ms/step  %5.1f%% of local  backward %7.3f ms  wait %6.3f ms  "
                "buffers started in backward %.1f  cpu %7.3f ms/step\n",
                1e3 * static_cast<double>(global) / ov.step_ms, ov.step_ms, 100 * local_ms / ov.step_ms, ov.backward_ms,
                ov.wait_ms, ov.early_buffers, ov.cpu_ms);
    std::printf("  no-overlap: %8.0f examples/s  %7.3f ms/step  %5.1f%% of local  backward %7.3f ms  wait %6.3f ms  "
                "cpu %7.3f ms/step\n",
                1e3 * static_cast<double>(global) / no.step_ms, no.step_ms, 100 * local_ms / no.step_ms, no.backward_ms,
                no.wait_ms, no.cpu_ms);
    std::printf("  comm-only:  %7.3f ms per reduction of all gradients (%lld bytes%s)\n", comm_ms,
                static_cast<long long>(gradient_bytes), compression == "fp16" ? ", as half over the network" : "");
    if (ctx.size() > 1)
      std::printf("  hidden behind backward: %.0f%% of the communication ((wait no-overlap - wait overlap) / comm-only)"
                  "; wait overlap / wait no-overlap = %.2f\n",
                  100.0 * (no.wait_ms - ov.wait_ms) / std::max(comm_ms, 1e-9), ov.wait_ms / std::max(no.wait_ms, 1e-9));
  }
  return 0;
}
