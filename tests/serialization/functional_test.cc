// The Functional API: graphs of layer calls, merge layers, shared layers, fit on several inputs,
// summary's Connected to, configs, and graph-building errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/internal/config_json.h"
#include "layers/internal/serialization_json.h"
#include "tests/serialization/test_models.h"

namespace tapeflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using layers::KerasTensor;
using nlohmann::json;
using namespace testing_io;

TEST(FunctionalTest, SkipConnectionComputesWhatTheLayersCompute) {
  auto in = layers::Input({.shape = {4}});
  EXPECT_EQ(in.shape(), (std::vector<std::int64_t>{-1, 4}));
  auto d1 = std::make_shared<layers::Dense>(4, "relu");
  auto d2 = std::make_shared<layers::Dense>(3);
  auto h = (*d1)(in);
  auto s = (*std::make_shared<layers::Add>())({in, h});
  auto out = (*d2)(s);
  EXPECT_EQ(out.shape(), (std::vector<std::int64_t>{-1, 3}));
  models::Functional model(in, out);
  EXPECT_EQ(model.layers().size(), 4u);  // input, dense, add, dense
  EXPECT_EQ(model.layers()[0]->class_name(), "InputLayer");
  EXPECT_EQ(model.count_params(), 4 * 4 + 4 + 4 * 3 + 3);
  const Tensor x = random_input({5, 4}, 3);
  const Tensor want = (*d2)(x + (*d1)(x));
  EXPECT_TRUE(same_bits(model.predict(x), want));
  EXPECT_TRUE(same_bits(model(x), want));
}

TEST(FunctionalTest, TwoInputsFitOnADatasetOfTuplesAndPredict) {
  auto model = skip_two_inputs();
  compile_adam(*model);
  Generator g(5);
  const Tensor a = random_normal({64, 4}, g), b = random_normal({64, 3}, g);
  // Label: which of a's first coordinate and b's first coordinate is larger.
  std::vector<std::int64_t> labels;
  for (int i = 0; i < 64; ++i) labels.push_back(a.data<float>()[i * 4] > b.data<float>()[i * 3] ? 1 : 0);
  const Tensor y = constant(labels, Shape{64});
  auto ds = data::Dataset::from_tensor_slices({a, b, y}).batch(16);
  const models::History h = model->fit(ds, {.epochs = 30, .verbose = 0});
  EXPECT_LT(h["loss"].back(), 0.5 * h["loss"].front());
  const models::Logs ev = model->evaluate(ds);
  // Learned (chance is about 0.5). The bound leaves room for rounding: GCC 12 and clang 16 contract
  // FMAs differently (-ffp-contract fast vs on), so the last bits of training differ between them.
  EXPECT_GE(ev.at("accuracy"), 0.85);
  const Tensor p = model->predict(std::vector<Tensor>{a, b}, {.batch_size = 10});
  EXPECT_EQ(p.shape(), (Shape{64, 2}));
  EXPECT_TRUE(same_bits(p, (*model)(std::vector<Tensor>{a, b})));
  EXPECT_THROW(model->predict(a), std::invalid_argument);  // one tensor for two inputs
  EXPECT_THAT([&] { model->fit(data::Dataset::from_tensor_slices({a, y}).batch(8), {.verbose = 0}); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("expected a batch {x1, ..., x2, y}")));
}

TEST(FunctionalTest, SharedLayersAndSeveralOutputs) {
  auto a = layers::Input({.shape = {3}, .name = "left"});
  auto b = layers::Input({.shape = {3}, .name = "right"});
  auto shared = std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .name = "shared"});
  auto ya = (*shared)(a), yb = (*shared)(b);
  auto avg = (*std::make_shared<layers::Average>())({ya, yb});
  auto prod = (*std::make_shared<layers::Multiply>())({ya, yb});
  models::Functional model({a, b}, {avg, prod}, "siamese");
  EXPECT_EQ(model.variables().size(), 2u);  // the shared kernel and bias, once
  const Tensor xa = random_input({2, 3}, 1), xb = random_input({2, 3}, 2);
  const auto outs = model.predict_all({xa, xb});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_TRUE(same_bits(outs[0], ((*shared)(xa) + (*shared)(xb)) * 0.5));
  EXPECT_TRUE(same_bits(outs[1], (*shared)(xa) * (*shared)(xb)));
  EXPECT_THROW(model.predict(std::vector<Tensor>{xa, xb}), std::invalid_argument);  // two outputs
  // Keras 2 config (model_to_config: these plain nodes in tf.keras 2's lists): the shared layer has
  // two inbound nodes; the second output is from node 0 of multiply.
  const json c = models::model_to_config_json(model)["config"];
  json shared_entry;
  for (const json& l : c["layers"])
    if (l["name"] == "shared") shared_entry = l;
  EXPECT_EQ(shared_entry["inbound_nodes"], json::parse(R"([[["left", 0, 0, {}]], [["right", 0, 0, {}]]])"));
  EXPECT_EQ(c["input_layers"], json::parse(R"([["left", 0, 0], ["right", 0, 0]])"));
  json avg_entry;
  for (const json& l : c["layers"])
    if (l["class_name"] == "Average") avg_entry = l;
  EXPECT_EQ(avg_entry["inbound_nodes"], json::parse(R"([[["shared", 0, 0, {}], ["shared", 1, 0, {}]]])"));
  // Rebuilt from its config: same config, same outputs once the weights are copied.
  auto back = models::model_from_json(models::to_json(model));
  EXPECT_EQ(models::model_to_config_json(*back)["config"], c);
  EXPECT_EQ(json_of(back->get_config()), json_of(model.get_config()));
  // get_config is Keras 3's: {"args": [tensors], "kwargs": {}} per node, as Keras 3's own.
  json keras3_avg;
  const json keras3 = json_of(model.get_config());
  for (const json& l : keras3["layers"])
    if (l["class_name"] == "Average") keras3_avg = l["inbound_nodes"][0];
  EXPECT_EQ(keras3_avg["kwargs"], json::object());
  ASSERT_EQ(keras3_avg["args"].size(), 1u);
  EXPECT_EQ(keras3_avg["args"][0][1], json::parse(R"({"class_name": "__keras_tensor__", "config": {"shape": [null, 2],
            "dtype": "float32", "keras_history": ["shared", 1, 0]}})"));
  back->set_weights(model.get_weights());
  auto* fb = dynamic_cast<models::Functional*>(back.get());
  ASSERT_NE(fb, nullptr);
  const auto outs2 = fb->predict_all({xa, xb});
  EXPECT_TRUE(same_bits(outs2[0], outs[0]));
  EXPECT_TRUE(same_bits(outs2[1], outs[1]));
  const std::string s = model.summary();
  EXPECT_THAT(s, AllOf(HasSubstr("Connected to"), HasSubstr("left[0][0]"), HasSubstr("shared[1][0]")));
}

TEST(FunctionalTest, SummaryHasConnectedToColumn) {
  auto model = skip_two_inputs();
  const std::string s = model->summary();
  EXPECT_THAT(s, HasSubstr("Connected to"));
  EXPECT_THAT(s, HasSubstr("(None, 4)"));
  EXPECT_THAT(s, HasSubstr("[]"));  // input layers
  EXPECT_THAT(s, HasSubstr("Total params: " + std::to_string(model->count_params())));
}

TEST(FunctionalTest, NestedSequentialAsALayer) {
  auto inner = mlp(4);
  auto in = layers::Input({.shape = {4}});
  auto out = (*std::make_shared<layers::Activation>("softmax"))((*inner)(in));
  models::Functional model(in, out);
  const Tensor x = random_input({3, 4}, 9);
  auto back = models::model_from_json(models::to_json(model));
  back->set_weights(model.get_weights());
  EXPECT_TRUE(same_bits(back->predict(x), model.predict(x)));
}

TEST(FunctionalTest, GraphBuildingErrorsNameTheLayers) {
  auto a = layers::Input({.shape = {3}, .name = "in_a"});
  auto b = layers::Input({.shape = {4}, .name = "in_b"});
  auto add = std::make_shared<layers::Add>(layers::MergeOptions{.name = "adder"});
  EXPECT_THAT([&] { (*add)({a, b}); },
              ::testing::ThrowsMessage<std::invalid_argument>(
                  AllOf(HasSubstr("Add 'adder'"), HasSubstr("in_a"), HasSubstr("in_b"), HasSubstr("same shape"))));
  EXPECT_THAT([&] { (*add)(a); }, ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("list of at least 2")));
  auto dense = std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .name = "dd"});
  auto h = (*dense)(a);
  EXPECT_THAT([&] { (*dense)(b); },  // built for 3 features
              ::testing::ThrowsMessage<std::invalid_argument>(AllOf(HasSubstr("Dense 'dd'"), HasSubstr("in_b"))));
  EXPECT_THAT([&] { models::Functional(b, h); },
              ::testing::ThrowsMessage<std::invalid_argument>(
                  AllOf(HasSubstr("graph disconnected"), HasSubstr("in_a"), HasSubstr("in_b"))));
  EXPECT_THAT([&] { models::Functional(h, h); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("is not an Input")));
  EXPECT_THAT([&] { models::Functional({a, a}, {h}); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("given twice")));
  auto twin = (*std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .name = "dd"}))(a);
  EXPECT_THAT([&] { models::Functional(a, (*std::make_shared<layers::Add>())({h, twin})); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("two different layers are named 'dd'")));
  layers::Dense on_stack(2);
  EXPECT_THROW(on_stack(a), std::logic_error);
  models::Functional model(a, h);
  EXPECT_THAT([&] { model(random_input({2, 5}, 1)); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("expects shape (None, 3)")));
  EXPECT_THROW(model(std::vector<Tensor>{random_input({2, 3}, 1), random_input({2, 3}, 1)}), std::invalid_argument);
}

TEST(FunctionalTest, BadFunctionalConfigsNameTheLayer) {
  auto err = [](const std::string& text) {
    try {
      models::model_from_json(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string in = R"({"class_name": "InputLayer", "config": {"batch_input_shape": [null, 2], "name": "x"}, "name": "x", "inbound_nodes": []})";
  EXPECT_THAT(err(R"({"class_name": "Functional", "config": {"name": "m", "layers": [)" + in +
                  R"(, {"class_name": "Dense", "config": {"units": 1, "name": "d"}, "name": "d", "inbound_nodes": [[["ghost", 0, 0, {}]]]}],
                  "input_layers": [["x", 0, 0]], "output_layers": [["d", 0, 0]]}})"),
              HasSubstr("layer 'd' is connected to unknown layer 'ghost'"));
  EXPECT_THAT(err(R"({"class_name": "Functional", "config": {"name": "m", "layers": [)" + in +
                  R"(, {"class_name": "Dense", "config": {"units": 1, "name": "d"}, "name": "d", "inbound_nodes": [[["d", 0, 0, {}]]]}],
                  "input_layers": [["x", 0, 0]], "output_layers": [["d", 0, 0]]}})"),
              HasSubstr("layer 'd' node 0 depends on layer outputs that no node produces"));
  EXPECT_THAT(err(R"({"class_name": "Functional", "config": {"name": "m", "layers": [)" + in +
                  R"(], "input_layers": [["x", 0, 0]], "output_layers": [["x", 3, 0]]}})"),
              HasSubstr("output_layers"));
  EXPECT_THAT(err(R"({"class_name": "Model", "config": {"name": "m", "layers": [)" + in + "," + in +
                  R"(], "input_layers": [["x", 0, 0]], "output_layers": [["x", 0, 0]]}})"),
              HasSubstr("two layers are named 'x'"));
}

}  // namespace
}  // namespace tapeflow
