// Checkpoint / CheckpointManager: optimizer round trips, bit-identical resume, extra state,
// functions, the manager's index, and error paths.
#include "models/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>

#include "layers/layers.h"
#include "models/saving.h"
#include "models/sequential.h"
#include "optimizers/optimizers.h"
#include "tape/tapeflow.h"
#include "tests/models_io/io_test_util.h"

namespace tapeflow::models {
namespace {

using io::testing::ScratchDir;
using L = std::shared_ptr<layers::Layer>;
using OptFactory = std::function<std::shared_ptr<optimizers::Optimizer>()>;

std::shared_ptr<Sequential> small_model(std::uint64_t seed) {
  auto m = std::make_shared<Sequential>(std::vector<L>{
      std::make_shared<layers::Dense>(layers::DenseOptions{.units = 8, .activation = "relu", .seed = seed}),
      std::make_shared<layers::BatchNormalization>(),
      std::make_shared<layers::Dense>(layers::DenseOptions{.units = 3, .seed = seed + 1})});
  m->build(Shape{1, 4});
  return m;
}

// Fixed data: 32 examples of 4 features, 3 targets.
const Tensor& data_x() {
  static const Tensor x = [] { Generator g(11); return random_normal(Shape{32, 4}, g); }();
  return x;
}
const Tensor& data_y() {
  static const Tensor y = [] { Generator g(12); return random_normal(Shape{32, 3}, g); }();
  return y;
}

Tensor rows(const Tensor& t, const std::vector<std::int64_t>& idx) {
  const std::int64_t w = t.shape()[1];
  Tensor out = Tensor::empty(Shape{static_cast<std::int64_t>(idx.size()), w}, DType::kFloat32);
  for (std::size_t i = 0; i < idx.size(); ++i)
    std::memcpy(out.mutable_data<float>() + i * w, t.data<float>() + idx[i] * w, sizeof(float) * w);
  return out;
}

// One training step on a batch drawn with `gen`.
void train_step(Sequential& model, optimizers::Optimizer& opt, Generator& gen) {
  std::vector<std::int64_t> idx;
  for (int i = 0; i < 8; ++i) idx.push_back(static_cast<std::int64_t>(gen.uniform_int(32)));
  Tensor x = rows(data_x(), idx), y = rows(data_y(), idx);
  GradientTape tape;
  Tensor d = model(x, true) - y;
  Tensor loss = reduce_mean(d * d);
  auto vars = model.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
}

void expect_bit_identical(const std::vector<Variable>& a, const std::vector<Variable>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape()) << a[i].name();
    ASSERT_EQ(a[i].dtype(), b[i].dtype()) << a[i].name();
    EXPECT_EQ(0, std::memcmp(a[i].value().raw_data(), b[i].value().raw_data(), a[i].value().nbytes()))
        << a[i].name() << " vs " << b[i].name();
  }
}

class CheckpointTest : public ScratchDir {};

class OptimizerRoundTrip : public CheckpointTest, public testing::WithParamInterface<std::pair<const char*, OptFactory>> {};

TEST_P(OptimizerRoundTrip, SlotsAndIterationsContinueIdentically) {
  auto ma = small_model(1);
  auto oa = GetParam().second();
  Generator ga(3);
  for (int i = 0; i < 2; ++i) train_step(*ma, *oa, ga);
  Checkpoint(CheckpointOptions{.model = ma, .optimizer = oa}).write(file("c.h5"));

  auto mb = small_model(50);
  auto ob = GetParam().second();
  Checkpoint cb(CheckpointOptions{.model = mb, .optimizer = ob});
  cb.read(file("c.h5"));
  EXPECT_EQ(ob->iterations(), 2);
  expect_bit_identical(ma->variables(), mb->variables());
  expect_bit_identical(oa->variables(), ob->variables());
  Generator gb = ga;
  train_step(*ma, *oa, ga);
  train_step(*mb, *ob, gb);
  expect_bit_identical(ma->variables(), mb->variables());
  expect_bit_identical(oa->variables(), ob->variables());
}

INSTANTIATE_TEST_SUITE_P(
    All, OptimizerRoundTrip,
    testing::Values(
        std::pair<const char*, OptFactory>{"SGD", [] { return std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.momentum = 0.9, .nesterov = true}); }},
        std::pair<const char*, OptFactory>{"Adam", [] { return std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.amsgrad = true}); }},
        std::pair<const char*, OptFactory>{"AdamW", [] { return std::make_shared<optimizers::AdamW>(); }},
        std::pair<const char*, OptFactory>{"RMSprop", [] { return std::make_shared<optimizers::RMSprop>(optimizers::RMSpropOptions{.momentum = 0.5, .centered = true}); }},
        std::pair<const char*, OptFactory>{"Adagrad", [] { return std::make_shared<optimizers::Adagrad>(); }}),
    [](const auto& info) { return std::string(info.param.first); });

TEST_F(CheckpointTest, ResumeIsBitIdenticalToAnUninterruptedRun) {
  auto schedule = [] { return optimizers::ExponentialDecay(1e-2, 2, 0.5); };
  // Uninterrupted: 6 steps.
  auto ma = small_model(1);
  auto oa = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = schedule()});
  Generator ga(7);
  for (int i = 0; i < 6; ++i) train_step(*ma, *oa, ga);

  // Interrupted: 3 steps, save, then a fresh process-like setup (other init, other generator) resumes.
  std::int64_t epoch = 0;
  {
    auto mb = small_model(1);
    auto ob = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = schedule()});
    Generator gb(7);
    for (int i = 0; i < 3; ++i) train_step(*mb, *ob, gb);
    epoch = 3;
    auto ckpt = std::make_shared<Checkpoint>(CheckpointOptions{.model = mb, .optimizer = ob});
    ckpt->track_generator("data", &gb);
    ckpt->track_counter("epoch", &epoch);
    CheckpointManager(ckpt, file("run"), 2).save();
  }
  auto mc = small_model(77);
  auto oc = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = schedule()});
  Generator gc(12345);
  std::int64_t resumed_epoch = 0;
  auto ckpt = std::make_shared<Checkpoint>(CheckpointOptions{.model = mc, .optimizer = oc});
  ckpt->track_generator("data", &gc);
  ckpt->track_counter("epoch", &resumed_epoch);
  CheckpointManager manager(ckpt, file("run"), 2);
  ASSERT_TRUE(manager.restore().has_value());
  EXPECT_EQ(resumed_epoch, 3);
  EXPECT_EQ(oc->iterations(), 3);
  EXPECT_DOUBLE_EQ(oc->current_learning_rate(), oa->learning_rate().at(3));
  for (int i = 0; i < 3; ++i) train_step(*mc, *oc, gc);
  expect_bit_identical(ma->variables(), mc->variables());
  expect_bit_identical(oa->variables(), oc->variables());
  EXPECT_EQ(ga.state(), gc.state());
}

// Dropout masks drawn while training are part of the state a resume must restore: with
// Bidirectional(LSTM(dropout, recurrent_dropout)) both the forward and the backward copy draw
// masks, so a resumed run is bit-identical to an uninterrupted one only if both copies' generators
// are saved (a checkpoint saves each layer's training generator).
TEST_F(CheckpointTest, ResumeWithBidirectionalDropoutIsBitIdentical) {
  auto make = [](std::uint64_t seed) {
    auto lstm = std::make_shared<layers::LSTM>(
        layers::LSTMOptions{.units = 4, .dropout = 0.3, .recurrent_dropout = 0.3, .seed = seed});
    auto m = std::make_shared<Sequential>(std::vector<L>{
        std::make_shared<layers::Bidirectional>(lstm),
        std::make_shared<layers::Dense>(layers::DenseOptions{.units = 3, .seed = seed + 1})});
    m->build(Shape{1, 5, 2});
    return m;
  };
  static const Tensor x = [] { Generator g(21); return random_normal(Shape{8, 5, 2}, g); }();
  static const Tensor y = [] { Generator g(22); return random_normal(Shape{8, 3}, g); }();
  auto step = [](Sequential& model, optimizers::Optimizer& opt) {
    GradientTape tape;
    Tensor d = model(x, true) - y;
    Tensor loss = reduce_mean(d * d);
    auto vars = model.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
  };
  auto ma = make(5);
  auto oa = std::make_shared<optimizers::Adam>();
  for (int i = 0; i < 4; ++i) step(*ma, *oa);
  {
    auto mb = make(5);
    auto ob = std::make_shared<optimizers::Adam>();
    for (int i = 0; i < 2; ++i) step(*mb, *ob);
    Checkpoint(CheckpointOptions{.model = mb, .optimizer = ob}).write(file("bidi.h5"));
  }
  auto mc = make(99);  // other weights and other generators until the checkpoint is read
  auto oc = std::make_shared<optimizers::Adam>();
  Checkpoint(CheckpointOptions{.model = mc, .optimizer = oc}).read(file("bidi.h5"));
  for (int i = 0; i < 2; ++i) step(*mc, *oc);
  expect_bit_identical(ma->variables(), mc->variables());
}

TEST_F(CheckpointTest, ExtraVariablesAndFunctions) {
  Variable v(Tensor({1.0, 2.0}), {.name = "v"});
  auto fn = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0] * 2.0}; };
  Checkpoint a;
  a.track_variable("v", v);
  a.add_function(trace("double_it", fn, {Tensor(1.0f)}));
  a.write(file("e.h5"));
  Variable w(Tensor({0.0, 0.0}), {.name = "w"});
  Checkpoint b;
  b.track_variable("v", w);
  b.read(file("e.h5"));
  EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_THAT(b.loaded_functions(), testing::ElementsAre("double_it"));
  EXPECT_FLOAT_EQ(call_function("double_it", {Tensor(4.0f)})[0].item(), 8.0);
}

TEST_F(CheckpointTest, ReadErrorsNameFileAndProblem) {
  auto m = small_model(1);
  save_weights(*m, file("weights_only.h5"));
  Checkpoint plain;
  EXPECT_RUNTIME_ERROR(plain.read(file("weights_only.h5")), file("weights_only.h5"), "not a tapeflow checkpoint");
  { std::ofstream(file("junk.h5")) << "junk"; }
  EXPECT_RUNTIME_ERROR(plain.read(file("junk.h5")), file("junk.h5"), "not an HDF5 file");

  Checkpoint(CheckpointOptions{.model = m}).write(file("model_only.h5"));
  auto opt = std::make_shared<optimizers::SGD>();
  Checkpoint with_opt(CheckpointOptions{.model = small_model(2), .optimizer = opt});
  EXPECT_RUNTIME_ERROR(with_opt.read(file("model_only.h5")), "missing group 'optimizer_weights'");

  auto adam = std::make_shared<optimizers::Adam>();
  Checkpoint(CheckpointOptions{.model = m, .optimizer = adam}).write(file("const_lr.h5"));
  auto decayed = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = optimizers::CosineDecay(1e-2, 10)});
  Checkpoint sched(CheckpointOptions{.model = small_model(3), .optimizer = decayed});
  EXPECT_RUNTIME_ERROR(sched.read(file("const_lr.h5")), "schedule in file is 'constant'", "'CosineDecay'");
  auto sgd = std::make_shared<optimizers::SGD>();  // no slots: 1 weight vs Adam's 1 + 2 per variable
  Checkpoint count(CheckpointOptions{.model = small_model(3), .optimizer = sgd});
  EXPECT_RUNTIME_ERROR(count.read(file("const_lr.h5")), "optimizer 'SGD'", "optimizer weights");

  Variable v(Tensor({1.0, 2.0}));
  Checkpoint has_v;
  has_v.track_variable("v", v);
  has_v.write(file("v.h5"));
  Variable bigger(Tensor({1.0, 2.0, 3.0}));
  Checkpoint want_bigger;
  want_bigger.track_variable("v", bigger);
  EXPECT_RUNTIME_ERROR(want_bigger.read(file("v.h5")), "variable 'v'", "[2]", "[3]");
  Checkpoint want_missing;
  std::int64_t c = 0;
  want_missing.track_counter("epoch", &c);
  EXPECT_RUNTIME_ERROR(want_missing.read(file("v.h5")), "missing dataset 'counters/epoch'");

  {  // an all-zero generator state, and a function with an op this build does not have
    io::H5Writer w(file("bad.h5"));
    w.write_attribute("", "format", std::string("tapeflow-checkpoint"));
    w.write_attribute("", "format_version", std::int64_t{1});
    std::vector<std::int64_t> zeros(6, 0);
    w.write_dataset("generators/g", DType::kInt64, {6}, zeros.data());
    w.create_group("functions/f");
    w.write_attribute("functions/f", "program",
                      std::string("tapeflow-function 1 inputs 1 float32 0 outputs 1 float32 0 constants 0 nodes 2 "
                                  "in 0 op FancyNewOp 1 1 0 0 0 out 1 0 grad 0 end"));
    w.write_attribute("functions/f", "num_constants", std::int64_t{0});
    w.commit();
  }
  Checkpoint any;
  EXPECT_RUNTIME_ERROR(any.read(file("bad.h5")), file("bad.h5"), "function 'f'", "unknown op 'FancyNewOp'");
  Generator g(1);
  Checkpoint gen;
  gen.track_generator("g", &g);
  std::filesystem::copy_file(file("bad.h5"), file("bad2.h5"));
  EXPECT_THROW(gen.read(file("bad2.h5")), std::runtime_error);
}

TEST_F(CheckpointTest, TrackingMisuse) {
  Checkpoint c;
  std::int64_t n = 0;
  c.track_counter("n", &n);
  EXPECT_THROW(c.track_counter("n", &n), std::invalid_argument);
  EXPECT_THROW(c.track_counter("m", nullptr), std::invalid_argument);
  EXPECT_THROW(c.track_generator("bad/name", nullptr), std::invalid_argument);
  EXPECT_THROW(c.track_variable("v", Variable()), std::invalid_argument);
  auto fn = [](const std::vector<Tensor>& x) { return x; };
  c.add_function(trace("f", fn, {Tensor(1.0f)}));
  EXPECT_THROW(c.add_function(trace("f", fn, {Tensor(1.0f)})), std::invalid_argument);
  EXPECT_THROW(CheckpointManager(nullptr, file("d")), std::invalid_argument);
  EXPECT_THROW(CheckpointManager(std::make_shared<Checkpoint>(), file("d"), 0), std::invalid_argument);
}

TEST_F(CheckpointTest, ManagerKeepsNewestAndContinuesNumbering) {
  auto ckpt = std::make_shared<Checkpoint>();
  std::int64_t step = 0;
  ckpt->track_counter("step", &step);
  {
    CheckpointManager m(ckpt, file("dir"), 2);
    EXPECT_FALSE(m.latest_checkpoint().has_value());
    EXPECT_FALSE(m.restore().has_value());
    for (step = 1; step <= 4; ++step) EXPECT_EQ(m.save(), file("dir/ckpt-" + std::to_string(step) + ".h5"));
    EXPECT_THAT(m.checkpoints(), testing::ElementsAre(file("dir/ckpt-3.h5"), file("dir/ckpt-4.h5")));
  }
  EXPECT_FALSE(std::filesystem::exists(file("dir/ckpt-1.h5")));
  EXPECT_FALSE(std::filesystem::exists(file("dir/ckpt-2.h5")));
  std::ifstream index(file("dir/checkpoint"));
  std::string text((std::istreambuf_iterator<char>(index)), {});
  EXPECT_EQ(text, "tapeflow-checkpoint-index 1\nnext 5\nckpt-3.h5\nckpt-4.h5\n");
  CheckpointManager again(ckpt, file("dir"), 2);
  EXPECT_EQ(again.latest_checkpoint(), file("dir/ckpt-4.h5"));
  step = 0;
  EXPECT_EQ(again.restore(), file("dir/ckpt-4.h5"));
  EXPECT_EQ(step, 4);
  EXPECT_EQ(again.save(), file("dir/ckpt-5.h5"));
}

// A damaged index is ignored (the files are the truth): the manager still finds the checkpoints
// and numbers new saves after them.
TEST_F(CheckpointTest, MalformedIndexIsIgnored) {
  auto ckpt = std::make_shared<Checkpoint>();
  std::int64_t step = 0;
  ckpt->track_counter("step", &step);
  step = 7;
  CheckpointManager(ckpt, file("d"), 3).save();
  auto write = [&](const std::string& s) { std::ofstream(file("d/checkpoint")) << s; };
  for (const std::string bad : {"hello\n", "tapeflow-checkpoint-index 1\nnext x\n",
                                "tapeflow-checkpoint-index 1\nnext 3\n../../etc/passwd\n",
                                "tapeflow-checkpoint-index 1\nnext 3\nckpt-7.h5\n"}) {
    write(bad);
    CheckpointManager m(ckpt, file("d"), 3);
    EXPECT_EQ(m.latest_checkpoint(), file("d/ckpt-1.h5")) << bad;
    step = 0;
    EXPECT_EQ(m.restore(), file("d/ckpt-1.h5"));
    EXPECT_EQ(step, 7);
  }
  write("tapeflow-checkpoint-index 1\nnext 3\nckpt-7.h5\n");
  EXPECT_EQ(CheckpointManager(ckpt, file("d"), 3).save(), file("d/ckpt-2.h5"));
}

}  // namespace
}  // namespace tapeflow::models

namespace tapeflow::models {
namespace {

// Flipped bytes anywhere in a checkpoint either give a runtime_error naming the file or (in unused
// space) the exact saved values; truncation always fails.
TEST_F(CheckpointTest, FlippedBytesAndTruncationNeverLoadWrongValues) {
  auto m = small_model(1);
  Variable big(fill(Shape{4096}, 1.5), {.name = "big"});
  {
    Checkpoint w(CheckpointOptions{.model = m});
    w.track_variable("big", big);
    w.write(file("c.h5"));
  }
  const auto size = static_cast<std::int64_t>(std::filesystem::file_size(file("c.h5")));
  std::ifstream in(file("c.h5"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  int failures = 0;
  for (std::int64_t pos = 0; pos < size; pos += std::max<std::int64_t>(1, size / 97)) {
    std::string bad = bytes;
    bad[static_cast<std::size_t>(pos)] = static_cast<char>(bad[static_cast<std::size_t>(pos)] ^ 0x5a);
    { std::ofstream(file("bad.h5"), std::ios::binary) << bad; }
    auto m2 = small_model(9);
    Variable big2(fill(Shape{4096}, 0.0), {.name = "big2"});
    Checkpoint r(CheckpointOptions{.model = m2});
    r.track_variable("big", big2);
    try {
      r.read(file("bad.h5"));
      EXPECT_EQ(big2.value().to_vector<float>(), big.value().to_vector<float>()) << "flip at " << pos;
      expect_bit_identical(m->variables(), m2->variables());
    } catch (const std::runtime_error& e) {
      ++failures;
      EXPECT_THAT(e.what(), testing::HasSubstr(file("bad.h5"))) << "flip at " << pos;
    }
  }
  EXPECT_GT(failures, 10);
  std::filesystem::resize_file(file("c.h5"), static_cast<std::uintmax_t>(size) * 3 / 4);
  Checkpoint r(CheckpointOptions{.model = small_model(9)});
  EXPECT_RUNTIME_ERROR(r.read(file("c.h5")), file("c.h5"));
}

}  // namespace
}  // namespace tapeflow::models
