// Model / Sequential end to end: fit on synthetic data, evaluate, predict, determinism, errors, summary.
#include "models/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "layers/layers.h"
#include "models/sequential.h"
#include "optimizers/optimizers.h"
#include "tape/core/random.h"
#include "tape/ops/array_ops.h"

namespace tapeflow::models {
namespace {

using ::testing::HasSubstr;

// Three Gaussian blobs in 2-D (centres (0, 3), (3, -2), (-3, -2), sd 0.7), n per class, shuffled order.
std::pair<Tensor, Tensor> blobs(std::int64_t n, std::uint64_t seed) {
  Generator g(seed);
  const double cx[3] = {0, 3, -3}, cy[3] = {3, -2, -2};
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < 3 * n; ++i) {
    const std::int64_t c = static_cast<std::int64_t>(g.uniform_int(3));
    x.push_back(static_cast<float>(cx[c] + 0.7 * g.next_normal()));
    x.push_back(static_cast<float>(cy[c] + 0.7 * g.next_normal()));
    y.push_back(c);
  }
  return {constant(x, Shape{3 * n, 2}), constant(y, Shape{3 * n})};
}

std::shared_ptr<Sequential> small_mlp(std::uint64_t seed) {
  return std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::Dense>(layers::DenseOptions{.units = 16, .activation = "relu", .seed = seed}),
      std::make_shared<layers::Dense>(layers::DenseOptions{.units = 3, .seed = seed + 1})});
}

void compile_adam(Model& m, double lr = 0.01) {
  m.compile({.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = lr}),
             .loss = std::make_shared<SparseCategoricalCrossentropy>(CrossentropyOptions{.from_logits = true}),
             .metrics = {"accuracy"}});
}

// Keras's validation_split: the last fraction of x, y (taken before shuffling) is evaluated as
// val_* after each epoch and never trained on; FitOptions takes Keras's keyword order.
TEST(ModelTest, ValidationSplitHoldsOutTheLastFraction) {
  auto [x, y] = blobs(40, 3);  // 120 examples: 90 train, 30 validate
  auto split_model = small_mlp(20), explicit_model = small_mlp(20);
  compile_adam(*split_model);
  compile_adam(*explicit_model);
  const History h = split_model->fit(x, y, {.batch_size = 16, .epochs = 2, .verbose = 0, .validation_split = 0.25});
  const std::vector<Tensor> xs = split(x, {90, 30}, 0), ys = split(y, {90, 30}, 0);
  const History want = explicit_model->fit(xs[0], ys[0], {.batch_size = 16, .epochs = 2, .verbose = 0,
                                                          .validation_data = {xs[1], ys[1]}});
  ASSERT_EQ(h["val_loss"].size(), 2u);
  EXPECT_EQ(h["val_loss"], want["val_loss"]);
  EXPECT_EQ(h["loss"], want["loss"]);
  EXPECT_EQ(split_model->optimizer()->iterations(), 2 * 6);  // ceil(90 / 16) steps per epoch
  for (double bad : {-0.1, 1.0, 1.5}) {
    try {
      split_model->fit(x, y, {.verbose = 0, .validation_split = bad});
      FAIL() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr("validation_split must be in [0, 1)"));
    }
  }
  EXPECT_THROW(split_model->fit(split(x, {1, 119}, 0)[0], split(y, {1, 119}, 0)[0], {.validation_split = 0.5}),
               std::invalid_argument);  // 1 example cannot be split
  EXPECT_THROW(split_model->fit(data::Dataset::from_tensor_slices({x, y}).batch(8), {.validation_split = 0.2}),
               std::invalid_argument);
  try {  // no examples: said so (was "Dataset::shuffle: buffer_size must be >= 1, got 0")
    split_model->fit(zeros(Shape{0, 2}), zeros(Shape{0}, DType::kInt64), {.verbose = 0});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("Model::fit: x has no examples (shape [0, 2])"));
  }
}

TEST(ModelTest, FitLearnsThreeBlobs) {
  auto [x, y] = blobs(100, 1);
  auto [xv, yv] = blobs(50, 2);
  auto model = small_mlp(10);
  compile_adam(*model);
  const History h = model->fit(x, y, {.batch_size = 32, .epochs = 15, .verbose = 0, .validation_data = {xv, yv}});
  ASSERT_EQ(h.epoch.size(), 15u);
  EXPECT_LT(h["loss"].back(), h["loss"].front());
  EXPECT_GE(h["accuracy"].back(), 0.95);     // stated target: >= 95% train accuracy after 15 epochs
  EXPECT_GE(h["val_accuracy"].back(), 0.95);
  const Logs ev = model->evaluate(xv, yv, {.batch_size = 64});
  EXPECT_NEAR(ev.at("accuracy"), h["val_accuracy"].back(), 1e-12);
  EXPECT_NEAR(ev.at("loss"), h["val_loss"].back(), 1e-6);
  const Tensor logits = model->predict(xv, {.batch_size = 7});
  EXPECT_EQ(logits.shape(), (Shape{150, 3}));
  SparseCategoricalAccuracy acc;
  acc.update_state(yv, logits);
  EXPECT_DOUBLE_EQ(acc.result(), ev.at("accuracy"));
  EXPECT_EQ(model->optimizer()->iterations(), 15 * 10);  // ceil(300 / 32) steps per epoch
}

TEST(ModelTest, SameSeedGivesBitIdenticalTraining) {
  auto run = [](std::uint64_t shuffle_seed) {
    auto [x, y] = blobs(40, 3);
    auto model = small_mlp(20);
    compile_adam(*model);
    const History h = model->fit(x, y, {.batch_size = 16, .epochs = 3, .verbose = 0, .seed = shuffle_seed});
    return std::make_pair(h["loss"], model->variables()[0].value().to_vector<float>());
  };
  const auto a = run(5), b = run(5), c = run(6);
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(a.second, b.second);
  EXPECT_NE(a.first, c.first);  // another shuffle seed, other batches
}

TEST(ModelTest, FitOnADatasetAndStepsPerEpoch) {
  auto [x, y] = blobs(30, 4);
  auto model = small_mlp(30);
  compile_adam(*model);
  const data::Dataset ds = data::Dataset::from_tensor_slices({x, y}).shuffle(90, 1).batch(30);
  History h = model->fit(ds, {.epochs = 2, .verbose = 0});
  EXPECT_EQ(model->optimizer()->iterations(), 6);
  h = model->fit(ds.repeat(), {.epochs = 2, .verbose = 0, .steps_per_epoch = 5});
  EXPECT_EQ(model->optimizer()->iterations(), 16);
  EXPECT_EQ(h.epoch.size(), 2u);
  EXPECT_THROW(model->fit(ds.repeat(), {.epochs = 1, .verbose = 0}), std::invalid_argument);
  const Logs ev = model->evaluate(ds);
  EXPECT_TRUE(ev.contains("loss"));
  EXPECT_TRUE(ev.contains("accuracy"));
}

TEST(ModelTest, Errors) {
  auto model = small_mlp(40);
  auto [x, y] = blobs(5, 5);
  try {
    model->fit(x, y);
    FAIL();
  } catch (const std::logic_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("fit needs a compiled model"));
  }
  EXPECT_THROW(model->evaluate(x, y), std::logic_error);
  EXPECT_THROW(model->compile({.loss = "mse"}), std::invalid_argument);
  EXPECT_THROW(model->compile({.optimizer = std::make_shared<optimizers::SGD>()}), std::invalid_argument);
  try {
    model->compile({.optimizer = std::make_shared<optimizers::SGD>(), .loss = "mse", .metrics = {"auc"}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown metric 'auc'"));
  }
  compile_adam(*model);
  try {
    model->fit(x, zeros(Shape{3}, DType::kInt64), {.verbose = 0});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("got x [15, 2], y [3]"));
  }
  EXPECT_THROW(model->fit(x, y, {.batch_size = 0}), std::invalid_argument);
  EXPECT_THROW(model->fit(x, y, {.epochs = -1}), std::invalid_argument);
  EXPECT_THROW(model->fit(x, y, {.verbose = 0, .validation_data = {x}}), std::invalid_argument);
  EXPECT_THROW(model->train_step({x}), std::invalid_argument);
  EXPECT_THROW(model->predict(Tensor(1.0)), std::invalid_argument);
  EXPECT_THROW(model->evaluate(data::Dataset::from_tensor_slices({x, y}).take(0).batch(4)), std::invalid_argument);
  Sequential empty;
  EXPECT_THROW(empty(x), std::logic_error);
  EXPECT_THROW(empty.add(nullptr), std::invalid_argument);
}

// A subclassed model: custom call() and a train_step that also reports the gradient norm.
class TwoLayer : public Model {
 public:
  TwoLayer() : Model("two_layer") {
    hidden_ = track_layer(std::make_shared<layers::Dense>(layers::DenseOptions{.units = 8, .activation = "tanh", .seed = 1}));
    out_ = track_layer(std::make_shared<layers::Dense>(layers::DenseOptions{.units = 3, .seed = 2}));
  }
  Tensor call(const Tensor& x, bool training) override { return (*out_)((*hidden_)(x, training), training); }
  Logs train_step(const data::Example& batch) override {
    Logs logs = Model::train_step(batch);
    logs.set("steps", static_cast<double>(++steps_));
    return logs;
  }

 private:
  std::shared_ptr<layers::Dense> hidden_, out_;
  int steps_ = 0;
};

TEST(ModelTest, SubclassedModelTrainsAndOverridesTrainStep) {
  auto [x, y] = blobs(50, 6);
  TwoLayer model;
  compile_adam(model, 0.05);
  const History h = model.fit(x, y, {.batch_size = 50, .epochs = 10, .verbose = 0});
  EXPECT_EQ(h["steps"].back(), 30.0);
  EXPECT_GE(h["accuracy"].back(), 0.9);
  EXPECT_EQ(model.trainable_variables().size(), 4u);
  const std::string s = model.summary();
  EXPECT_THAT(s, HasSubstr("Model: \"two_layer\""));
  EXPECT_THAT(s, HasSubstr("dense"));
  EXPECT_THAT(s, HasSubstr("Total params: 51 (204.00 B)"));  // 2*8+8 + 8*3+3
}

TEST(ModelTest, PlainModelWithoutCallThrows) {
  struct Bare : Model {
    Bare() : Model("bare") {}
  } bare;
  EXPECT_THROW(bare(zeros(Shape{1, 2})), std::logic_error);
}

TEST(ModelTest, SequentialSummaryShowsShapesAndCounts) {
  Sequential model({std::make_shared<layers::Dense>(layers::DenseOptions{.units = 4, .name = "hidden"}),
                    std::make_shared<layers::BatchNormalization>(layers::BatchNormalizationOptions{.name = "bn"}),
                    std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .name = "logits"})},
                   "tiny");
  EXPECT_THAT(model.summary(), HasSubstr(" hidden (Dense)              ?                        0 (unbuilt)\n"));
  model.build(Shape{1, 3});
  const std::string expected =
      "Model: \"tiny\"\n"
      "__________________________________________________________________\n"
      " Layer (type)                Output Shape                Param #\n"
      "==================================================================\n"
      " hidden (Dense)              (None, 4)                        16\n"
      " bn (BatchNormalization)     (None, 4)                        16\n"
      " logits (Dense)              (None, 2)                        10\n"
      "==================================================================\n"
      "Total params: 42 (168.00 B)\n"
      "Trainable params: 34 (136.00 B)\n"
      "Non-trainable params: 8 (32.00 B)\n"
      "__________________________________________________________________\n";
  EXPECT_EQ(model.summary(), expected);
  EXPECT_EQ(model.count_params(), 42);
  EXPECT_EQ(model.compute_output_shape(Shape{5, 3}), (Shape{5, 2}));
  EXPECT_EQ(batch_shape_string(Shape{7}), "(None,)");
}

}  // namespace
}  // namespace tapeflow::models

namespace tapeflow::models {
namespace {

TEST(ModelTest, ValidationDatasetIsEvaluatedEveryEpoch) {
  auto [x, y] = blobs(20, 8);
  auto model = small_mlp(50);
  compile_adam(*model);
  const data::Dataset val = data::Dataset::from_tensor_slices({x, y}).batch(25);
  const History h = model->fit(x, y, {.batch_size = 20, .epochs = 2, .verbose = 0, .validation_dataset = val});
  ASSERT_EQ(h["val_loss"].size(), 2u);
  EXPECT_NEAR(h["val_loss"].back(), model->evaluate(x, y).at("loss"), 1e-6);
  EXPECT_EQ(model->predict(x).shape(), (Shape{60, 3}));
}

}  // namespace
}  // namespace tapeflow::models
