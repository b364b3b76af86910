// Layer / initializer / optimizer / loss configs: Keras's exact fields, round trips, the registry,
// to_json / model_from_json, and the errors for bad configs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "optimizers/internal/serialization_json.h"
#include "models/internal/config_json.h"
#include "layers/internal/serialization_json.h"
#include "tests/serialization/test_models.h"

namespace tapeflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using nlohmann::json;
using namespace testing_io;

// config -> JSON text -> layer -> config must be identical, for every built-in layer.
void expect_round_trip(const layers::Layer& layer) {
  const json first = layers::serialize_json(layer);
  const json parsed = json::parse(first.dump());
  auto again = layers::deserialize(parsed);
  EXPECT_EQ(layers::serialize_json(*again), first) << first.dump(2);
  EXPECT_EQ(again->class_name(), layer.class_name());
}

TEST(LayerConfigTest, EveryBuiltInLayerRoundTrips) {
  expect_round_trip(layers::Dense({.units = 5,
                                   .activation = "softmax",
                                   .use_bias = false,
                                   .kernel_initializer = layers::initializers::random_normal(0.5, 0.2),
                                   .kernel_regularizer_l2 = 0.01,
                                   .name = "d1"}));
  expect_round_trip(layers::Dense({.units = 3, .bias_initializer = layers::initializers::constant(0.1), .dtype = DType::kFloat64}));
  expect_round_trip(layers::BatchNormalization({.axis = 1, .momentum = 0.8, .epsilon = 1e-5, .center = false,
                                                .gamma_initializer = layers::initializers::random_uniform(0.9, 1.1)}));
  expect_round_trip(layers::Dropout({.rate = 0.3, .seed = 7}));
  expect_round_trip(layers::Dropout(0.5));
  expect_round_trip(layers::Flatten());
  expect_round_trip(layers::Reshape({.target_shape = {2, -1}}));
  expect_round_trip(layers::Activation("tanh"));
  expect_round_trip(layers::LeakyReLU({.alpha = 0.1}));
  expect_round_trip(layers::InputLayer({.shape = {28, 28}, .dtype = DType::kFloat64}));
  expect_round_trip(layers::Add());
  expect_round_trip(layers::Multiply());
  expect_round_trip(layers::Average());
  expect_round_trip(layers::Concatenate({.axis = 1}));
  expect_round_trip(layers::Conv2D({.filters = 4, .kernel_size = {3, 2}, .strides = {2, 1}, .padding = "same",
                                     .activation = "relu", .use_bias = false, .kernel_regularizer_l2 = 0.01}));
  expect_round_trip(layers::Conv2D({.filters = 2, .kernel_size = {3, 3}, .dilation_rate = {2, 2}, .dtype = DType::kFloat64}));
  expect_round_trip(layers::Conv2DTranspose({.filters = 3, .kernel_size = {5, 5}, .strides = {2, 2}, .padding = "same"}));
  expect_round_trip(layers::MaxPooling2D({.pool_size = {3, 3}, .strides = std::array<std::int64_t, 2>{2, 2}, .padding = "same"}));
  expect_round_trip(layers::AveragePooling2D());
  expect_round_trip(layers::GlobalAveragePooling2D({.keepdims = true}));
  expect_round_trip(layers::GlobalMaxPooling2D());
  expect_round_trip(layers::UpSampling2D({.size = {2, 3}}));
  expect_round_trip(layers::ZeroPadding2D({.padding = {{{1, 2}, {3, 4}}}}));
  auto frozen = std::make_shared<layers::Dense>(2);
  frozen->set_trainable(false);
  expect_round_trip(*frozen);
  EXPECT_FALSE(layers::deserialize(layers::serialize_json(*frozen))->trainable());
}

TEST(LayerConfigTest, DenseHasKerasFieldsAndDefaults) {
  layers::Dense d({.units = 4, .activation = "relu", .name = "dense_x"});
  const json expected = json::parse(R"({
    "name": "dense_x", "trainable": true, "dtype": "float32", "units": 4, "activation": "relu",
    "use_bias": true,
    "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": null}},
    "bias_initializer": {"class_name": "Zeros", "config": {}},
    "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
    "kernel_constraint": null, "bias_constraint": null})");
  EXPECT_EQ(json_of(d.get_config()), expected);
  EXPECT_EQ(json_of(layers::Dense(2).get_config())["activation"], "linear");
}

TEST(LayerConfigTest, BatchNormalizationAndInputLayerHaveKerasFields) {
  layers::BatchNormalization bn({.name = "bn"});
  const json c = json_of(bn.get_config());
  for (const char* k : {"axis", "momentum", "epsilon", "center", "scale", "beta_initializer", "gamma_initializer",
                        "moving_mean_initializer", "moving_variance_initializer", "beta_regularizer",
                        "gamma_regularizer", "beta_constraint", "gamma_constraint", "name", "trainable", "dtype"})
    EXPECT_TRUE(c.contains(k)) << k;
  EXPECT_EQ(c["momentum"], 0.99);
  EXPECT_EQ(c["epsilon"], 1e-3);
  EXPECT_EQ(c["moving_variance_initializer"]["class_name"], "Ones");
  layers::InputLayer in({.shape = {784}, .name = "pixels"});
  EXPECT_EQ(json_of(in.get_config()), json::parse(R"({"batch_input_shape": [null, 784], "dtype": "float32",
                                             "sparse": false, "ragged": false, "name": "pixels"})"));
}

TEST(LayerConfigTest, InitializersSerializeAsKeras) {
  using namespace layers::initializers;
  EXPECT_EQ(layers::serialize_initializer(he_normal()), json::parse(R"({"class_name": "HeNormal", "config": {"seed": null}})"));
  EXPECT_EQ(layers::serialize_initializer(truncated_normal(0.0, 0.02)),
            json::parse(R"({"class_name": "TruncatedNormal", "config": {"mean": 0.0, "stddev": 0.02, "seed": null}})"));
  for (const layers::Initializer& init :
       {glorot_uniform(), glorot_normal(), he_uniform(), he_normal(), zeros(), ones(), constant(2.5),
        random_normal(1, 2), random_uniform(-1, 3), truncated_normal(0, 0.3), variance_scaling(0.5, "fan_out", "uniform")}) {
    const json j = layers::serialize_initializer(init);
    EXPECT_EQ(layers::serialize_initializer(layers::deserialize_initializer(j, "test")), j) << j.dump();
  }
  // TensorFlow.js writes Glorot as VarianceScaling; it reads back as the named initializer.
  EXPECT_EQ(layers::deserialize_initializer(
                json::parse(R"({"class_name": "VarianceScaling", "config": {"scale": 1, "mode": "fan_avg",
                                "distribution": "normal", "seed": null}})"), "t").name(),
            "glorot_normal");
  EXPECT_EQ(layers::deserialize_initializer("he_uniform", "t").name(), "he_uniform");
  // Same draws from the same generator as the original.
  Generator g1(3), g2(3);
  const layers::Initializer vs = variance_scaling(0.5, "fan_out", "uniform");
  const Tensor a = vs({4, 5}, DType::kFloat32, g1);
  const Tensor b = layers::deserialize_initializer(layers::serialize_initializer(vs), "t")({4, 5}, DType::kFloat32, g2);
  EXPECT_TRUE(same_bits(a, b));
}

TEST(LayerConfigTest, BadConfigsNameTheLayerAndField) {
  auto err = [](const std::string& text) {
    try {
      layers::deserialize(json::parse(text));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(err(R"({"class_name": "Dense", "config": {"name": "d7"}})"),
              HasSubstr("Dense 'd7': config field 'units': missing"));
  EXPECT_THAT(err(R"({"class_name": "Dense", "config": {"name": "d7", "units": "ten"}})"),
              HasSubstr("config field 'units': expected an integer, got \"ten\""));
  EXPECT_THAT(err(R"({"class_name": "Dense", "config": {"name": "d7", "units": 3, "kernel_constraint": {"class_name": "MaxNorm"}}})"),
              HasSubstr("config field 'kernel_constraint': not supported"));
  EXPECT_THAT(err(R"({"class_name": "Dense", "config": {"units": 3, "activation": "swishy"}})"), HasSubstr("swishy"));
  EXPECT_THAT(err(R"({"class_name": "Dense", "config": {"units": 3, "kernel_initializer": {"class_name": "Identity"}}})"),
              HasSubstr("unknown initializer class 'Identity'"));
  EXPECT_THAT(err(R"({"class_name": "Dense", "config": {"units": 3, "dtype": "float16"}})"), HasSubstr("float16"));
  EXPECT_THAT(err(R"({"class_name": "Dropout", "config": {"name": "dr", "rate": 1.5}})"),
              HasSubstr("Dropout 'dr': config field 'rate': must be in [0, 1)"));
  EXPECT_THAT(err(R"({"class_name": "Conv3D", "config": {"name": "c"}})"),
              AllOf(HasSubstr("unknown layer class 'Conv3D' 'c'"), HasSubstr("Dense"), HasSubstr("register_layer_class")));
  EXPECT_THAT(err(R"({"class_name": "Dense"})"), HasSubstr("no 'config' object"));
  EXPECT_THAT(err(R"([1, 2])"), HasSubstr("class_name"));
  EXPECT_THAT(err(R"({"class_name": "Dense", "config": {"units": 3, "kernel_regularizer": {"class_name": "L1L2", "config": {"l1": 0.1, "l2": 0}}}})"),
              HasSubstr("L1 regularization is not supported"));
  EXPECT_THAT(err(R"({"class_name": "InputLayer", "config": {"batch_input_shape": [null, null, 3]}})"),
              HasSubstr("only the batch dimension may be unknown"));
}

// A user layer: y = x * factor, registered like keras.saving.register_keras_serializable.
class Scale : public layers::Layer {
 public:
  explicit Scale(double factor, std::string name = "") : Layer("Scale", std::move(name)), factor_(factor) {}
  Tensor call(const Tensor& x, bool) override { return x * factor_; }
  Config get_config() const override { return base_config().set("factor", factor_); }

 private:
  double factor_;
};

TEST(LayerConfigTest, UserLayersRegisterByClassName) {
  if (!layers::is_layer_class_registered("Scale"))
    layers::register_layer_class("Scale", [](const Config& c) {
      layers::ConfigReader r(c, "Scale");
      return std::make_shared<Scale>(r.number("factor"), r.name());
    });
  EXPECT_THROW(layers::register_layer_class("Scale", [](const Config&) { return std::shared_ptr<layers::Layer>(); }),
               std::invalid_argument);
  EXPECT_THROW(layers::register_layer_class("Nothing", nullptr), std::invalid_argument);
  Scale s(2.5, "scale_me");
  expect_round_trip(s);
  auto seq = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{std::make_shared<Scale>(3.0)});
  seq->build(Shape{1, 2});
  auto back = models::model_from_json(models::to_json(*seq));
  EXPECT_TRUE(same_bits(back->predict(ones({2, 2})), fill({2, 2}, 3.0)));
}

TEST(ModelConfigTest, SubclassedModelsWithoutConfigSaySo) {
  class MyModel : public models::Model {
   public:
    MyModel() : Model("my_model") {}
    Tensor call(const Tensor& x, bool) override { return x; }
  };
  MyModel m;
  try {
    models::to_json(m);
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("my_model"), HasSubstr("get_config"), HasSubstr("save_weights")));
  }
}

TEST(ModelConfigTest, SequentialToJsonRoundTripsWithKerasLayout) {
  auto m = mlp();
  const json j = json::parse(models::to_json(*m));
  EXPECT_EQ(j["class_name"], "Sequential");
  EXPECT_EQ(j["keras_version"], "2.15.0");
  EXPECT_EQ(j["backend"], "tensorflow");
  ASSERT_EQ(j["config"]["layers"].size(), 5u);
  EXPECT_EQ(j["config"]["layers"][0]["class_name"], "InputLayer");
  EXPECT_EQ(j["config"]["layers"][0]["config"]["batch_input_shape"], json::parse("[null, 6]"));
  EXPECT_EQ(j["config"]["layers"][2]["class_name"], "BatchNormalization");
  auto back = models::model_from_json(models::to_json(*m));
  EXPECT_EQ(json::parse(models::to_json(*back)), j);
  ASSERT_TRUE(back->built());
  back->set_weights(m->get_weights());
  const Tensor x = random_input({5, 6}, 1);
  EXPECT_TRUE(same_bits(back->predict(x), m->predict(x)));
  EXPECT_THAT([] { models::model_from_json("{\"class_name\": "); }, ::testing::Throws<std::invalid_argument>());
  try {
    models::model_from_json(R"({"class_name": "Dense", "config": {"units": 2}})");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a layer, not a model"));
  }
}

TEST(ModelConfigTest, SequentialWithoutInputLayerTakesFirstBatchInputShape) {
  // TensorFlow.js writes Sequential models this way.
  auto m = models::model_from_json(R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
      {"class_name": "Dense", "config": {"units": 3, "batch_input_shape": [null, 5], "name": "dense_Dense1",
       "kernel_initializer": {"class_name": "VarianceScaling", "config": {"scale": 1, "mode": "fan_avg", "distribution": "normal", "seed": null}}}}]}})");
  ASSERT_TRUE(m->built());
  EXPECT_EQ(m->variables()[0].shape(), (Shape{5, 3}));
  EXPECT_EQ(m->variables()[0].name(), "dense_Dense1/kernel:0");
}

TEST(OptimizerConfigTest, KerasFieldsAndRoundTrips) {
  optimizers::Adam adam({.learning_rate = 0.002, .amsgrad = true, .clipnorm = 1.0});
  const json c = json_of(adam.get_config());
  const json expected = json::parse(R"({"name": "Adam", "weight_decay": null, "clipnorm": 1.0, "global_clipnorm": null,
      "clipvalue": null, "use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
      "jit_compile": false, "is_legacy_optimizer": false, "learning_rate": 0.002, "beta_1": 0.9,
      "beta_2": 0.999, "epsilon": 1e-07, "amsgrad": true})");
  EXPECT_EQ(c, expected);
  std::vector<std::shared_ptr<optimizers::Optimizer>> all = {
      std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = optimizers::ExponentialDecay(0.1, 100, 0.5, true)}),
      std::make_shared<optimizers::AdamW>(optimizers::AdamWOptions{.weight_decay = 0.01, .global_clipnorm = 2.0}),
      std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = optimizers::CosineDecay(0.1, 50, 0.1),
                                                               .momentum = 0.9, .nesterov = true, .clipvalue = 0.5}),
      std::make_shared<optimizers::RMSprop>(optimizers::RMSpropOptions{
          .learning_rate = optimizers::PiecewiseConstantDecay({10, 20}, {0.1, 0.01, 0.001}), .momentum = 0.5, .centered = true}),
      std::make_shared<optimizers::Adagrad>(optimizers::AdagradOptions{.initial_accumulator_value = 0.2})};
  for (const auto& o : all) {
    const json j = json::parse(optimizers::serialize_json(*o).dump());
    auto back = optimizers::deserialize(j);
    EXPECT_EQ(optimizers::serialize_json(*back), j) << j.dump(2);
    for (std::int64_t step : {0, 15, 60}) EXPECT_EQ(back->learning_rate().at(step), o->learning_rate().at(step));
  }
  EXPECT_EQ(optimizers::serialize_json(*all[0])["config"]["learning_rate"],
            json::parse(R"({"class_name": "ExponentialDecay", "config": {"initial_learning_rate": 0.1,
                "decay_steps": 100, "decay_rate": 0.5, "staircase": true, "name": null}})"));
}

TEST(OptimizerConfigTest, BadOptimizerConfigsNameTheField) {
  auto err = [](const std::string& text) {
    try {
      optimizers::deserialize(json::parse(text));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(err(R"({"class_name": "Nadam", "config": {}})"), HasSubstr("unknown optimizer class 'Nadam'"));
  EXPECT_THAT(err(R"({"class_name": "Adam", "config": {"beta_1": "x"}})"),
              HasSubstr("optimizer Adam: config field 'beta_1': expected a number"));
  EXPECT_THAT(err(R"({"class_name": "Adam", "config": {"use_ema": true}})"), HasSubstr("use_ema"));
  EXPECT_THAT(err(R"({"class_name": "SGD", "config": {"weight_decay": 0.1}})"), HasSubstr("weight_decay"));
  EXPECT_THAT(err(R"({"class_name": "Adam", "config": {"beta_1": 1.5}})"), HasSubstr("beta"));
  EXPECT_THAT(err(R"({"class_name": "Adam", "config": {"learning_rate": {"class_name": "InverseTimeDecay", "config": {}}}})"),
              HasSubstr("unknown learning-rate schedule class 'InverseTimeDecay'"));
  EXPECT_THAT(err(R"({"class_name": "Adam", "config": {"learning_rate": {"class_name": "ExponentialDecay", "config": {"decay_rate": 0.5}}}})"),
              HasSubstr("config field 'decay_steps': missing"));
}

TEST(LossConfigTest, KerasFieldsRoundTripsAndNames) {
  models::SparseCategoricalCrossentropy scce({.from_logits = true});
  EXPECT_EQ(models::serialize_loss_json(scce), json::parse(R"({"class_name": "SparseCategoricalCrossentropy", "config":
      {"reduction": "auto", "name": "sparse_categorical_crossentropy", "from_logits": true, "ignore_class": null}})"));
  std::vector<std::shared_ptr<models::Loss>> all = {
      std::make_shared<models::SparseCategoricalCrossentropy>(models::CrossentropyOptions{.reduction = models::Reduction::kSum}),
      std::make_shared<models::CategoricalCrossentropy>(models::CrossentropyOptions{.from_logits = true}),
      std::make_shared<models::BinaryCrossentropy>(models::CrossentropyOptions{.reduction = models::Reduction::kNone, .name = "bce"}),
      std::make_shared<models::MeanSquaredError>()};
  for (const auto& l : all) {
    const json j = models::serialize_loss_json(*l);
    EXPECT_EQ(models::serialize_loss_json(*models::deserialize_loss(j)), j);
  }
  EXPECT_EQ(models::deserialize_loss("mse")->class_name(), "MeanSquaredError");
  EXPECT_THROW(models::deserialize_loss(json::parse(R"({"class_name": "Huber"})")), std::invalid_argument);
  EXPECT_THROW(models::deserialize_loss(json::parse(R"({"class_name": "CategoricalCrossentropy", "config": {"label_smoothing": 0.1}})")),
               std::invalid_argument);
}

}  // namespace
}  // namespace tapeflow

namespace tapeflow {
namespace {

TEST(LayerConfigTest, Conv2DHasKerasFieldsAndReadsKerasShorthands) {
  layers::Conv2D c({.filters = 8, .kernel_size = {3, 3}, .name = "conv2d_x"});
  const nlohmann::json expected = nlohmann::json::parse(R"({
    "name": "conv2d_x", "trainable": true, "dtype": "float32", "filters": 8, "kernel_size": [3, 3],
    "strides": [1, 1], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1],
    "groups": 1, "activation": "linear", "use_bias": true,
    "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": null}},
    "bias_initializer": {"class_name": "Zeros", "config": {}},
    "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
    "kernel_constraint": null, "bias_constraint": null})");
  EXPECT_EQ(json_of(c.get_config()), expected) << json_of(c.get_config()).dump(2);
  // Keras and TensorFlow.js may write one integer for both dimensions.
  auto p = layers::deserialize(nlohmann::json::parse(
      R"({"class_name": "MaxPooling2D", "config": {"name": "mp", "pool_size": 3, "padding": "valid"}})"));
  EXPECT_EQ(json_of(p->get_config())["pool_size"], nlohmann::json::parse("[3, 3]"));
  EXPECT_EQ(json_of(p->get_config())["strides"], nlohmann::json::parse("[3, 3]"));  // Keras: strides default to pool_size
}

TEST(LayerConfigTest, ConvConfigErrorsNameTheLayerAndField) {
  auto bad = [](const char* text) { return nlohmann::json::parse(text); };
  EXPECT_THAT([&] { layers::deserialize(bad(R"({"class_name": "Conv2D", "config": {"name": "c", "filters": 2,
      "kernel_size": [3, 3], "data_format": "channels_first"}})")); },
              ::testing::ThrowsMessage<std::invalid_argument>(
                  AllOf(HasSubstr("Conv2D"), HasSubstr("data_format"), HasSubstr("channels_first"))));
  EXPECT_THAT([&] { layers::deserialize(bad(R"({"class_name": "Conv2D", "config": {"name": "c", "filters": 2,
      "kernel_size": [3, 3, 3]}})")); },
              ::testing::ThrowsMessage<std::invalid_argument>(AllOf(HasSubstr("Conv2D"), HasSubstr("kernel_size"))));
  EXPECT_THAT([&] { layers::deserialize(bad(R"({"class_name": "Conv2D", "config": {"name": "c", "filters": 0,
      "kernel_size": [3, 3]}})")); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("Conv2D")));
}

}  // namespace
}  // namespace tapeflow
