// save_model / load_model: bit-identical predictions and optimizer state, continued training,
// Keras's optimizer_weights order, and hostile or inconsistent files.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "optimizers/internal/serialization_json.h"
#include "models/internal/config_json.h"
#include "layers/internal/serialization_json.h"
#include "models/io/h5_io.h"
#include "tests/serialization/test_models.h"

namespace tapeflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using nlohmann::json;
using namespace testing_io;

std::pair<Tensor, Tensor> classification_data(std::int64_t n, std::int64_t features, std::uint64_t seed) {
  Generator g(seed);
  const Tensor x = random_normal({n, features}, g);
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) y.push_back(x.data<float>()[i * features] > 0 ? 1 : (x.data<float>()[i * features + 1] > 0 ? 2 : 0));
  return {x, constant(y, Shape{n})};
}

void expect_same_state(models::Model& a, models::Model& b) {
  const auto wa = a.get_weights(), wb = b.get_weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (std::size_t i = 0; i < wa.size(); ++i) EXPECT_TRUE(same_bits(wa[i], wb[i])) << a.variables()[i].name();
  ASSERT_TRUE(b.compiled());
  const auto oa = optimizers::keras_weights(*a.optimizer(), a.trainable_variables());
  const auto ob = optimizers::keras_weights(*b.optimizer(), b.trainable_variables());
  ASSERT_EQ(oa.size(), ob.size());
  for (std::size_t i = 0; i < oa.size(); ++i) {
    EXPECT_EQ(oa[i].first, ob[i].first);
    EXPECT_TRUE(same_bits(oa[i].second.value(), ob[i].second.value())) << oa[i].first;
  }
  EXPECT_EQ(a.optimizer()->iterations(), b.optimizer()->iterations());
  EXPECT_EQ(optimizers::serialize_json(*a.optimizer()), optimizers::serialize_json(*b.optimizer()));
}

TEST(SaveModelTest, MlpRoundTripIsBitIdentical) {
  auto model = mlp();
  compile_adam(*model, /*amsgrad=*/true);
  auto [x, y] = classification_data(64, 6, 1);
  model->fit(x, y, {.batch_size = 16, .epochs = 2, .verbose = 0});
  const std::string path = temp_path("mlp.h5");
  models::save_model(*model, path);
  auto loaded = models::load_model(path);
  EXPECT_EQ(loaded->class_name(), "Sequential");
  EXPECT_EQ(json_of(loaded->get_config()), json_of(model->get_config()));
  EXPECT_TRUE(same_bits(loaded->predict(x), model->predict(x)));
  expect_same_state(*model, *loaded);
  EXPECT_EQ(loaded->metrics().size(), 1u);
  EXPECT_EQ(loaded->loss()->class_name(), "SparseCategoricalCrossentropy");
  // The file is Keras 2's layout.
  io::H5Reader r(path);
  for (const char* a : {"model_config", "keras_version", "backend", "training_config"}) EXPECT_TRUE(r.has_attribute("", a)) << a;
  EXPECT_EQ(r.read_string_attribute("", "keras_version"), "2.15.0");
  EXPECT_TRUE(r.is_dataset("model_weights/dense/dense/kernel:0") || r.list_group("model_weights").size() == 4);
  const json training = json::parse(r.read_string_attribute("", "training_config"));
  EXPECT_EQ(training["optimizer_config"]["class_name"], "Adam");
  EXPECT_EQ(training["metrics"], json::parse(R"(["accuracy"])"));
  // Without compile: weights only, no optimizer.
  auto bare = models::load_model(path, {.compile = false});
  EXPECT_FALSE(bare->compiled());
  EXPECT_TRUE(same_bits(bare->predict(x), model->predict(x)));
}

TEST(SaveModelTest, ConvnetRoundTripIsBitIdentical) {
  // The Keras convnet of train_classifier --model cnn: Conv2D, MaxPooling2D, Flatten, Dropout, Dense.
  auto model = models::make_classifier_cnn({.seed = 3});
  compile_adam(*model, /*amsgrad=*/false);
  Generator g(5);
  const Tensor x = random_normal({16, 28, 28, 1}, g);
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < 16; ++i) labels.push_back(i % 10);
  model->fit(x, constant(labels, Shape{16}), {.batch_size = 8, .epochs = 1, .verbose = 0});
  const std::string path = temp_path("cnn.h5");
  models::save_model(*model, path);
  auto loaded = models::load_model(path);
  EXPECT_EQ(json_of(loaded->get_config()), json_of(model->get_config()));
  EXPECT_TRUE(same_bits(loaded->predict(x), model->predict(x)));
  expect_same_state(*model, *loaded);
}

TEST(SaveModelTest, OptimizerWeightsAreInKerasOrderAndNames) {
  auto model = mlp();
  compile_adam(*model, /*amsgrad=*/true);
  auto [x, y] = classification_data(16, 6, 2);
  model->fit(x, y, {.batch_size = 16, .epochs = 1, .verbose = 0});
  const std::string path = temp_path("order.h5");
  models::save_model(*model, path);
  io::H5Reader r(path);
  const auto names = r.read_string_array_attribute("optimizer_weights", "weight_names");
  // Trainable: dense kernel, bias, BN gamma, beta, dense_1 kernel, bias (6); Adam m, v interleaved, then vhats.
  const auto vars = model->trainable_variables();
  ASSERT_EQ(names.size(), 1 + 3 * vars.size());
  EXPECT_EQ(names[0], "iteration:0");
  auto base = [](const Variable& v) { return v.name().substr(0, v.name().size() - 2); };
  for (std::size_t i = 0; i < vars.size(); ++i) {
    EXPECT_EQ(names[1 + 2 * i], "m/" + base(vars[i]) + ":0");
    EXPECT_EQ(names[2 + 2 * i], "v/" + base(vars[i]) + ":0");
    EXPECT_EQ(names[1 + 2 * vars.size() + i], "vhat/" + base(vars[i]) + ":0");
  }
  EXPECT_EQ(r.read_dataset("optimizer_weights/iteration:0").shape, std::vector<std::int64_t>{});
  // RMSprop: every velocity, then every momentum, then every average gradient.
  optimizers::RMSprop rms({.momentum = 0.5, .centered = true});
  const auto kw = optimizers::keras_weights(rms, vars);
  ASSERT_EQ(kw.size(), 1 + 3 * vars.size());
  EXPECT_EQ(kw[1].first, "velocity/" + base(vars[0]) + ":0");
  EXPECT_EQ(kw[vars.size()].first, "velocity/" + base(vars.back()) + ":0");
  EXPECT_EQ(kw[1 + vars.size()].first, "momentum/" + base(vars[0]) + ":0");
  EXPECT_EQ(kw[1 + 2 * vars.size()].first, "average_gradient/" + base(vars[0]) + ":0");
  optimizers::SGD sgd({.momentum = 0.9});
  EXPECT_EQ(optimizers::keras_weights(sgd, vars)[1].first, "m/" + base(vars[0]) + ":0");
}

TEST(SaveModelTest, FunctionalRoundTripIsBitIdentical) {
  auto model = skip_two_inputs();
  compile_adam(*model);
  Generator g(3);
  const Tensor a = random_normal({32, 4}, g), b = random_normal({32, 3}, g);
  const Tensor y = constant(std::vector<std::int64_t>(32, 1), Shape{32});
  model->fit(data::Dataset::from_tensor_slices({a, b, y}).batch(8), {.epochs = 2, .verbose = 0});
  const std::string path = temp_path("functional.h5");
  models::save_model(*model, path);
  auto loaded = models::load_model(path);
  auto* f = dynamic_cast<models::Functional*>(loaded.get());
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(same_bits(f->predict(std::vector<Tensor>{a, b}), model->predict(std::vector<Tensor>{a, b})));
  expect_same_state(*model, *loaded);
}

TEST(SaveModelTest, ContinuedFitMatchesUninterrupted) {
  // No Dropout: its generator is not saved, so only deterministic layers continue bit for bit.
  auto build = [] {
    auto m = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
        std::make_shared<layers::Dense>(layers::DenseOptions{.units = 8, .activation = "relu", .seed = 1}),
        std::make_shared<layers::BatchNormalization>(), std::make_shared<layers::Dense>(layers::DenseOptions{.units = 3, .seed = 2})});
    m->build(Shape{1, 6});
    compile_adam(*m);
    return m;
  };
  auto [x, y] = classification_data(48, 6, 4);
  const models::FitOptions one{.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false};
  auto uninterrupted = build();
  uninterrupted->fit(x, y, one);
  const std::string path = temp_path("continue.h5");
  models::save_model(*uninterrupted, path);
  uninterrupted->fit(x, y, one);
  auto resumed = models::load_model(path);
  resumed->fit(x, y, one);
  EXPECT_TRUE(same_bits(resumed->predict(x), uninterrupted->predict(x)));
  expect_same_state(*uninterrupted, *resumed);
}

TEST(SaveModelTest, UncompiledAndSubclassedModels) {
  auto model = mlp();
  const std::string path = temp_path("uncompiled.h5");
  models::save_model(*model, path);
  auto loaded = models::load_model(path);
  EXPECT_FALSE(loaded->compiled());
  EXPECT_FALSE(io::H5Reader(path).has_attribute("", "training_config"));
  class Sub : public models::Model {
   public:
    Sub() : Model("sub") {}
    Tensor call(const Tensor& x, bool) override { return x; }
  };
  Sub s;
  EXPECT_THAT([&] { models::save_model(s, temp_path("sub.h5")); },
              ::testing::ThrowsMessage<std::logic_error>(AllOf(HasSubstr("get_config"), HasSubstr("save_weights"))));
  EXPECT_FALSE(std::filesystem::exists(temp_path("sub.h5")));
}

// Writes a file with the given model_config / training_config text and the weights of `weights_of`.
void write_file(const std::string& path, const std::string& model_config, const models::Model& weights_of,
                const std::string& training = "") {
  io::H5Writer w(path);
  w.write_attribute("", "model_config", model_config);
  if (!training.empty()) w.write_attribute("", "training_config", training);
  models::write_keras_weights(w, "model_weights", weights_of);
  w.commit();
}

TEST(SaveModelTest, HostileAndInconsistentFilesFailClearly) {
  auto model = mlp();
  const std::string config = models::to_json(*model);
  auto err = [](const std::string& path) {
    try {
      models::load_model(path);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string p = temp_path("hostile.h5");
  models::save_weights(*model, p);
  EXPECT_THAT(err(p), HasSubstr("no 'model_config' attribute"));
  write_file(p, "{not json", *model);
  EXPECT_THAT(err(p), AllOf(HasSubstr(p), HasSubstr("'model_config' is not valid JSON")));
  std::string unknown = config;
  unknown.replace(unknown.find("\"BatchNormalization\""), 20, "\"SpectralNormalization\"");
  write_file(p, unknown, *model);
  EXPECT_THAT(err(p), AllOf(HasSubstr("model_config"), HasSubstr("unknown layer class 'SpectralNormalization'")));
  // The config says 9 units where the weights have 8.
  json j = json::parse(config);
  j["config"]["layers"][1]["config"]["units"] = 9;
  write_file(p, j.dump(), *model);
  EXPECT_THAT(err(p), AllOf(HasSubstr("weight"), HasSubstr("shape in file [6, 8], model expects [6, 9]")));
  // Optimizer weights that do not fit the optimizer.
  compile_adam(*model);
  auto [x, y] = classification_data(16, 6, 5);
  model->fit(x, y, {.epochs = 1, .verbose = 0});
  models::save_model(*model, p);
  {
    io::H5Reader r(p);
    json training = json::parse(r.read_string_attribute("", "training_config"));
    training["optimizer_config"]["config"]["amsgrad"] = true;  // 3 slots per variable expected, 2 stored
    const std::string t = training.dump();
    io::H5Writer w(p + "2");
    w.write_attribute("", "model_config", config);
    w.write_attribute("", "training_config", t);
    models::write_keras_weights(w, "model_weights", *model);
    auto kw = optimizers::keras_weights(*model->optimizer(), model->trainable_variables());
    std::vector<std::string> names;
    for (auto& [n, v] : kw) {
      names.push_back(n);
      models::write_tensor(w, "optimizer_weights/" + n, v.value());
    }
    w.write_attribute("optimizer_weights", "weight_names", names);
    w.commit();
  }
  EXPECT_THAT(err(p + "2"), AllOf(HasSubstr("optimizer_weights has 13 weights"), HasSubstr("has 19")));
  write_file(p, config, *model, R"({"loss": "hinge", "optimizer_config": {"class_name": "Adam", "config": {}}})");
  EXPECT_THAT(err(p), AllOf(HasSubstr("training_config"), HasSubstr("hinge")));
  EXPECT_THAT(err(temp_path("missing.h5")), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace tapeflow
