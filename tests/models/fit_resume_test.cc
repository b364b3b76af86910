// Model::fit resumed at initial_epoch continues the data order (epoch e is shuffle pass e), so
// restoring a checkpoint and fitting on gives bit for bit the uninterrupted run. TerminateOnNaN
// stops at the first non-finite loss. The baseline step measures its input-gradient norm.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "models/adversarial.h"
#include "models/architectures.h"
#include "models/callbacks.h"
#include "models/checkpoint.h"
#include "optimizers/adam.h"
#include "tape/tapeflow.h"
#include "tests/models_io/io_test_util.h"

namespace tapeflow::models {
namespace {

using io::testing::ScratchDir;
using FitResume = ScratchDir;

struct Data {
  Tensor x, y;
};
Data data() {
  Generator g(21);
  Tensor x = random_uniform(Shape{96, 12}, g);
  std::vector<std::int32_t> labels;
  for (int i = 0; i < 96; ++i) labels.push_back(static_cast<std::int32_t>(g.uniform_int(3)));
  return {x, constant(labels, Shape{96})};
}

std::shared_ptr<Sequential> compiled_model() {
  auto m = make_classifier_mlp({.inputs = 12, .hidden = {16}, .classes = 3, .seed = 5});
  m->compile({.optimizer = std::make_shared<optimizers::Adam>(),
              .loss = std::make_shared<SparseCategoricalCrossentropy>(CrossentropyOptions{.from_logits = true}),
              .metrics = {"accuracy"}});
  m->build(Shape{1, 12});
  return m;
}

std::vector<std::vector<double>> weights(const Sequential& m) {
  std::vector<std::vector<double>> out;
  for (const Variable& v : m.variables()) out.push_back(v.value().to_vector<double>());
  return out;
}

TEST_F(FitResume, ResumedFitIsBitIdenticalToTheUninterruptedOne) {
  const Data d = data();
  auto full = compiled_model();
  full->fit(d.x, d.y, {.batch_size = 16, .epochs = 4, .verbose = 0, .seed = 3});

  auto first = compiled_model();
  first->fit(d.x, d.y, {.batch_size = 16, .epochs = 2, .verbose = 0, .seed = 3});
  Checkpoint({.model = first, .optimizer = first->optimizer()}).write(file("c.h5"));
  auto second = compiled_model();
  Checkpoint({.model = second, .optimizer = second->optimizer()}).read(file("c.h5"));
  second->fit(d.x, d.y, {.batch_size = 16, .epochs = 4, .verbose = 0, .initial_epoch = 2, .seed = 3});
  EXPECT_EQ(weights(*second), weights(*full));

  // Without the data-order state (pass 0's order again) the run differs: the test can fail.
  auto replayed = compiled_model();
  Checkpoint({.model = replayed, .optimizer = replayed->optimizer()}).read(file("c.h5"));
  replayed->fit(d.x, d.y, {.batch_size = 16, .epochs = 2, .verbose = 0, .seed = 3});
  EXPECT_NE(weights(*replayed), weights(*full));
}

// A model whose batch k reports loss script[k] (the batches themselves are ignored).
class ScriptedLoss : public Model {
 public:
  explicit ScriptedLoss(std::vector<double> script) : Model("scripted"), script_(std::move(script)) {
    compile({.optimizer = std::make_shared<optimizers::Adam>(), .loss = "mse"});
  }
  Tensor call(const Tensor& x, bool) override { return x; }
  Logs train_step(const data::Example&) override { return {{"loss", script_.at(calls_++)}}; }

 private:
  std::vector<double> script_;
  std::size_t calls_ = 0;
};

TEST_F(FitResume, TerminateOnNaNStopsAtTheFirstNonFiniteLoss) {
  const double nan = std::nan("");
  ScriptedLoss m({0.5, 0.4, 0.3, 0.2, 0.1, nan, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1});
  auto stop = std::make_shared<TerminateOnNaN>();
  int epochs_seen = 0;
  auto count = std::make_shared<LambdaCallback>(
      LambdaCallbackOptions{.on_epoch_begin = [&](int, const Logs&) { ++epochs_seen; }});
  const Tensor x = zeros(Shape{32, 1});
  m.fit(x, x, {.batch_size = 8, .epochs = 3, .verbose = 0, .callbacks = {count, stop}, .shuffle = false});
  EXPECT_TRUE(stop->terminated());
  EXPECT_EQ(stop->reason(), "loss nan at epoch 2, batch 2");  // 4 batches per epoch: the 6th batch
  EXPECT_EQ(epochs_seen, 2);

  ScriptedLoss fine({1, 1, 1, 1, 1, 1, 1, 1});
  auto quiet = std::make_shared<TerminateOnNaN>();
  fine.fit(x, x, {.batch_size = 8, .epochs = 2, .verbose = 0, .callbacks = {quiet}});
  EXPECT_FALSE(quiet->terminated());
  EXPECT_EQ(quiet->reason(), "");
}

TEST_F(FitResume, BaselineStepMeasuresTheInputGradientNorm) {
  const Data d = data();
  auto a = make_classifier_mlp({.inputs = 12, .hidden = {16}, .classes = 3, .batch_norm = false, .seed = 5});
  auto b = make_classifier_mlp({.inputs = 12, .hidden = {16}, .classes = 3, .batch_norm = false, .seed = 5});
  optimizers::Adam opt_a, opt_b;
  const RegularizedStepResult r = input_gradient_regularized_step(*a, opt_a, d.x, d.y, 0.0);
  // The same norm from a separate tape, before the step (b is a's twin).
  Tensor x = d.x;
  GradientTape tape({.watch_accessed_variables = false});
  tape.watch(x);
  const Tensor ce = reduce_mean(sparse_softmax_cross_entropy_with_logits(d.y, (*b)(x, true)));
  const double want = norm(*tape.gradient(ce, x)).item();
  EXPECT_GT(r.input_gradient_norm, 0.0);
  EXPECT_NEAR(r.input_gradient_norm, want, 1e-6 * want);
  EXPECT_NEAR(r.cross_entropy, ce.item(), 1e-6);
  // The update is the plain cross-entropy step: same weights as a step without the norm.
  b->build(Shape{1, 12});
  {
    GradientTape t;
    const Tensor loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(d.y, (*b)(d.x, true)));
    auto vars = b->trainable_variables();
    opt_b.apply_gradients(t.gradient(loss, vars), vars);
  }
  for (std::size_t i = 0; i < a->variables().size(); ++i)
    EXPECT_EQ(a->variables()[i].value().to_vector<double>(), b->variables()[i].value().to_vector<double>()) << i;
}

}  // namespace
}  // namespace tapeflow::models
