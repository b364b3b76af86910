// distribute_child --mode MODE [--timeout S]: an mpirun job that fails on purpose, for
// test_distribute_failures. Modes (rank 1 misbehaves at its 3rd training step):
//   mismatch  ranks hold differently shaped variables (every rank throws; explicit abort)
//   throw     rank 1 throws; the exception unwinds through the Context (its destructor aborts)
//   kill      rank 1 kills itself with SIGKILL (mpirun ends the job)
//   hang      rank 1 says "rank 1 hangs at step 3" and sleeps forever; the others time out and name
//             the missing rank
//   ok        everyone trains 2 epochs and exits 0
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "distribute/distribute.h"
#include "models/architectures.h"
#include "models/losses.h"
#include "optimizers/sgd.h"
#include "tape/ops/reduction_ops.h"

namespace tf = tapeflow;

namespace {

void train(tf::distribute::Context& ctx, const std::string& mode) {
  if (mode == "mismatch") {
    tf::Variable w(tf::zeros(tf::Shape{2, ctx.rank() == 1 ? 3 : 2}), {.name = "w"});
    tf::distribute::DistributedGradientTape tape(ctx);
    tape.gradient(tf::reduce_sum(w.read()), {w});
    return;
  }
  std::vector<float> x(64 * 4);
  std::vector<std::int64_t> y(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 11) / 11.0f;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int64_t>(i % 2);
  int steps = 0;
  const tf::data::Dataset ds =
      tf::data::Dataset::from_tensor_slices({tf::constant(x, tf::Shape{64, 4}), tf::constant(y, tf::Shape{64})})
          .batch(8)
          .map([&](const tf::data::Example& e) {
            if (ctx.rank() == 1 && ++steps == 3) {
              if (mode == "throw") throw std::runtime_error("injected failure on rank 1");
              if (mode == "kill") ::raise(SIGKILL);
              if (mode == "hang") {
                // Said first, so a test can act (pull a link) once the other ranks are in the step's
                // collective and their timeout runs.
                std::fprintf(stderr, "distribute_child: rank 1 hangs at step 3\n");
                std::fflush(stderr);
                ::sleep(600);
              }
            }
            return e;
          });
  auto model = tf::models::make_classifier_mlp({.inputs = 4, .hidden = {8}, .classes = 2, .seed = 1});
  model->compile({.optimizer = std::make_shared<tf::optimizers::SGD>(),
                  .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                      tf::models::CrossentropyOptions{.from_logits = true})});
  auto replicas = std::shared_ptr<tf::distribute::Context>(&ctx, [](tf::distribute::Context*) {});
  model->fit(ds, {.epochs = 2, .verbose = 0, .replica_context = replicas});
  if (ctx.rank() == 0) std::printf("distribute_child: trained %lld steps\n",
                                   static_cast<long long>(model->optimizer()->iterations()));
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "ok";
  double timeout = 20;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
    if (std::strcmp(argv[i], "--timeout") == 0) timeout = std::stod(argv[i + 1]);
  }
  if (mode == "throw") {
    try {
      tf::distribute::Context ctx(&argc, &argv, {.timeout_seconds = timeout});
      train(ctx, mode);  // rank 1 throws: ~Context sees the exception in flight and aborts
    } catch (const std::exception& e) {
      std::fprintf(stderr, "distribute_child: error: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  tf::distribute::Context ctx(&argc, &argv, {.timeout_seconds = timeout});
  try {
    train(ctx, mode);
  } catch (const std::exception& e) {
    ctx.abort(1, std::string("distribute_child: error: ") + e.what());
  }
  return 0;
}
