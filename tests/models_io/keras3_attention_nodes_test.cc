// Keras 3's call nodes for MultiHeadAttention (args [query, value(, key)]) read and written by the
// Functional config, and the Keras 3 config values of MultiHeadAttention that tapeflow accepts or
// refuses. The files themselves are checked by Keras 3 in interop.keras_files_transformer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/internal/config_json.h"
#include "layers/internal/serialization_json.h"
#include "layers/layers.h"
#include "models/internal/keras3_config.h"
#include "models/models.h"
#include "tape/tapeflow.h"

namespace tf = tapeflow;
namespace L = tf::layers;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

namespace {

json keras_tensor(const std::string& layer) {
  return {{"class_name", "__keras_tensor__"},
          {"config", {{"shape", {nullptr, 4, 6}}, {"dtype", "float32"}, {"keras_history", {layer, 0, 0}}}}};
}

TEST(Keras3AttentionNodes, PositionalValueAndKeyBecomeTfKeras2Keywords) {
  const json two = {{"args", {keras_tensor("q"), keras_tensor("v")}}, {"kwargs", json::object()}};
  EXPECT_EQ(tf::models::keras2_inbound_node(two, "MultiHeadAttention"),
            json::parse(R"([["q", 0, 0, {"value": ["v", 0, 0]}]])"));
  const json three = {{"args", {keras_tensor("q"), keras_tensor("v"), keras_tensor("k")}},
                      {"kwargs", json::object()}};
  EXPECT_EQ(tf::models::keras2_inbound_node(three, "MultiHeadAttention"),
            json::parse(R"([["q", 0, 0, {"value": ["v", 0, 0], "key": ["k", 0, 0]}]])"));
  const json key_kw = {{"args", {keras_tensor("q"), keras_tensor("v")}}, {"kwargs", {{"key", keras_tensor("k")}}}};
  EXPECT_EQ(tf::models::keras2_inbound_node(key_kw, "MultiHeadAttention"),
            json::parse(R"([["q", 0, 0, {"key": ["k", 0, 0], "value": ["v", 0, 0]}]])"));
  const json legacy = json::parse(R"([["a", 0, 0, {}]])");
  EXPECT_EQ(tf::models::keras2_inbound_node(legacy, "Dense"), legacy);
}

TEST(Keras3AttentionNodes, WrongArgumentsAreRefusedNamingTheClass) {
  const json q = keras_tensor("q");
  EXPECT_THAT([&] { tf::models::keras2_inbound_node({{"args", {q, q}}, {"kwargs", json::object()}}, "Dense"); },
              ThrowsMessage<std::invalid_argument>(
                  AllOf(HasSubstr("Dense: inbound node with 2 positional arguments"),
                        HasSubstr("one tensor or one list"))));
  const json none = json::object();
  EXPECT_THAT([&] { tf::models::keras2_inbound_node({{"args", {q, q, q, q}}, {"kwargs", none}}, "MultiHeadAttention"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("MultiHeadAttention: inbound node with 4 positional arguments")));
  EXPECT_THAT([&] { tf::models::keras2_inbound_node({{"args", {q}}, {"kwargs", none}}, "MultiHeadAttention"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("MultiHeadAttention: inbound node without the value argument")));
  EXPECT_THAT([&] { tf::models::keras2_inbound_node({{"args", {q, q}}, {"kwargs", {{"value", q}}}}, "MultiHeadAttention"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("MultiHeadAttention: inbound node gives 'value' twice")));
  EXPECT_THAT([&] { tf::models::keras2_inbound_node({{"args", {json::array()}}, {"kwargs", none}}, "Add"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Add: inbound node with an empty list of tensors")));
  EXPECT_THAT([&] { tf::models::keras2_inbound_node({{"args", {json{{"x", 1}}}}, {"kwargs", none}}, "Dense"); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("not a Keras tensor")));
}

TEST(Keras3AttentionNodes, FunctionalWritesKeras3ArgsAndReadsThemBack) {
  auto in = L::Input({.shape = {4, 6}});
  auto mha =
      std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 3, .seed = 1});
  auto out = (*mha)(std::vector<L::KerasTensor>{in, in});
  tf::models::Functional m(in, out);
  const json config = json_of(m.get_config());
  const json& node = config["layers"][1]["inbound_nodes"][0];
  ASSERT_TRUE(node.is_object()) << node.dump();
  EXPECT_EQ(node["args"].size(), 2u);
  EXPECT_EQ(node["args"][1]["config"]["shape"], json::parse("[null, 4, 6]"));
  EXPECT_EQ(node["args"][1]["config"]["keras_history"], json({in.node()->layer->name(), 0, 0}));
  auto back = tf::models::Functional::from_config(tf::to_config(config));
  back->set_weights(m.get_weights());
  tf::Generator g(3);
  const tf::Tensor x = tf::random_normal(tf::Shape{2, 4, 6}, g);
  const tf::Tensor a = m.predict(x), b = back->predict(x);
  ASSERT_EQ(a.num_elements(), b.num_elements());
  for (std::int64_t i = 0; i < a.num_elements(); ++i) EXPECT_EQ(a.data<float>()[i], b.data<float>()[i]) << i;
}

TEST(Keras3AttentionNodes, AttentionAxesOfRank3InputsOnly) {
  json c = {{"name", "att"}, {"num_heads", 2}, {"key_dim", 4}, {"attention_axes", {1}}};
  EXPECT_NO_THROW(L::MultiHeadAttention::from_config(tf::to_config(c)));
  c["attention_axes"] = 1;
  EXPECT_NO_THROW(L::MultiHeadAttention::from_config(tf::to_config(c)));
  c["attention_axes"] = {1, 2};
  EXPECT_THAT([&] { L::MultiHeadAttention::from_config(tf::to_config(c)); },
              ThrowsMessage<std::invalid_argument>(AllOf(HasSubstr("MultiHeadAttention"), HasSubstr("attention_axes"),
                                                         HasSubstr("only null or [1]"))));
}

}  // namespace
