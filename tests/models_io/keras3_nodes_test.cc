// Functional nodes with call arguments in Keras 3's form (models/functional.h): one writer
// (get_config, the .keras config) gives every node as Keras 3.15 writes it — tensors in args and
// kwargs as __keras_tensor__ with keras_history, flags as plain values (the expected JSON below is
// what Keras 3.15's own config.json holds for these calls, names aside); model_to_config (.h5, JSON)
// keeps tf.keras 2's lists only where Keras 3 reads them the same; the one reader reads Keras 3's
// own spelling (its extra "training": false, "mask": null, NotEqual mask nodes). Keras 3 itself
// loads these files in interop.keras_files_{attention,lstm_state,masked_rnn,explicit_mask}.
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
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

namespace {

json tensor(const std::string& layer, int node, int index, json shape, const std::string& dtype = "float32") {
  return {{"class_name", "__keras_tensor__"},
          {"config", {{"shape", shape}, {"dtype", dtype}, {"keras_history", {layer, node, index}}}}};
}

const json& entry(const json& config, const std::string& name) {
  for (const json& l : config["layers"])
    if (l["name"] == name) return l;
  throw std::runtime_error("no layer " + name);
}

bool same_values(const tf::Tensor& a, const tf::Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (std::int64_t i = 0; i < a.num_elements(); ++i)
    if (a.data<float>()[i] != b.data<float>()[i]) return false;
  return true;
}

// x [8, 6], m [8, 8], mk [8]: MultiHeadAttention(x, v, k, attention_mask=m, use_causal_mask=True,
// return_attention_scores=True); o, h, c = LSTM(4, return_state)(x); LSTM(4)(x, initial_state=[h,
// c]); Dropout(0.3)(LSTM(3)(x, mask=mk), training=False).
std::shared_ptr<tf::models::Functional> call_argument_model() {
  auto x = L::Input({.shape = {8, 6}, .name = "x"});
  auto m = L::Input({.shape = {8, 8}, .name = "m"});
  auto mk = L::Input({.shape = {8}, .name = "mk"});
  auto v = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 6, .name = "v", .seed = 1}))(x);
  auto k = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 5, .name = "k", .seed = 2}))(x);
  const auto a = std::make_shared<L::MultiHeadAttention>(
                     L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 4, .name = "mha", .seed = 3})
                     ->call_all({x, v, k, m}, {.use_causal_mask = true, .return_attention_scores = true,
                                               .attention_mask = true});
  const auto s = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 4, .return_state = true, .name = "l1", .seed = 4})
                     ->call_all({x});
  auto y = (*std::make_shared<L::LSTM>(L::LSTMOptions{.units = 4, .name = "l2", .seed = 5}))(
      std::vector<L::KerasTensor>{x, s[1], s[2]});
  auto z = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 3, .name = "l3", .seed = 6})->call_all({x, mk}, {.mask = true})[0];
  auto d = std::make_shared<L::Dropout>(L::DropoutOptions{.rate = 0.3, .name = "drop"})->call_all({z}, {.training = false})[0];
  return std::make_shared<tf::models::Functional>(std::vector<L::KerasTensor>{x, m, mk},
                                                  std::vector<L::KerasTensor>{a[0], a[1], y, d}, "calls");
}

std::vector<tf::Tensor> call_argument_inputs() {
  tf::Generator g(11);
  std::vector<float> m(2 * 8 * 8), mk(2 * 8);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = (i % 3 != 1 || (i / 8) % 8 == i % 8) ? 1.0f : 0.0f;
  for (std::size_t i = 0; i < mk.size(); ++i) mk[i] = i % 8 < 5 ? 1.0f : 0.0f;
  return {tf::random_normal(tf::Shape{2, 8, 6}, g), tf::constant(m, tf::Shape{2, 8, 8}), tf::constant(mk, tf::Shape{2, 8})};
}

TEST(Keras3Nodes, EveryCallArgumentIsWrittenAsKeras3WritesIt) {
  auto model = call_argument_model();
  const json c = json_of(model->get_config());
  const json seq = json::parse("[null, 8, 6]");
  EXPECT_EQ(entry(c, "mha")["inbound_nodes"],
            json::array({{{"args", {tensor("x", 0, 0, seq), tensor("v", 0, 0, seq), tensor("k", 0, 0, json::parse("[null, 8, 5]"))}},
                          {"kwargs", {{"attention_mask", tensor("m", 0, 0, json::parse("[null, 8, 8]"))},
                                      {"use_causal_mask", true},
                                      {"return_attention_scores", true}}}}}));
  const json state = json::parse("[null, 4]");
  EXPECT_EQ(entry(c, "l2")["inbound_nodes"],
            json::array({{{"args", {tensor("x", 0, 0, seq)}},
                          {"kwargs", {{"initial_state", {tensor("l1", 0, 1, state), tensor("l1", 0, 2, state)}}}}}}));
  EXPECT_EQ(entry(c, "l3")["inbound_nodes"],
            json::array({{{"args", {tensor("x", 0, 0, seq)}}, {"kwargs", {{"mask", tensor("mk", 0, 0, json::parse("[null, 8]"))}}}}}));
  EXPECT_EQ(entry(c, "drop")["inbound_nodes"],
            json::array({{{"args", {tensor("l3", 0, 0, json::parse("[null, 3]"))}}, {"kwargs", {{"training", false}}}}}));
  EXPECT_EQ(entry(c, "v")["inbound_nodes"], json::array({{{"args", {tensor("x", 0, 0, seq)}}, {"kwargs", json::object()}}}));
  EXPECT_EQ(c["output_layers"], json::parse(R"([["mha", 0, 0], ["mha", 0, 1], ["l2", 0, 0], ["drop", 0, 0]])"));
  // The .keras config (to_keras3 of the layer's serialization) keeps these nodes as they are.
  const json k3 = tf::models::to_keras3(tf::layers::serialize_json(*model));
  for (const char* name : {"mha", "l2", "l3", "drop", "v"})
    EXPECT_EQ(entry(k3["config"], name)["inbound_nodes"], entry(c, name)["inbound_nodes"]) << name;
}

TEST(Keras3Nodes, ModelToConfigKeepsTfKeras2ListsOnlyWhereKeras3ReadsThem) {
  auto model = call_argument_model();
  const json c = tf::models::model_to_config_json(*model)["config"];
  EXPECT_EQ(entry(c, "v")["inbound_nodes"], json::parse(R"([[["x", 0, 0, {}]]])"));
  EXPECT_EQ(entry(c, "drop")["inbound_nodes"], json::parse(R"([[["l3", 0, 0, {"training": false}]]])"));
  for (const char* name : {"mha", "l2", "l3"}) {  // tensors beside the first argument: Keras 3's form
    EXPECT_TRUE(entry(c, name)["inbound_nodes"][0].is_object()) << name;
    EXPECT_EQ(entry(c, name)["inbound_nodes"], entry(json_of(model->get_config()), name)["inbound_nodes"]) << name;
  }
}

TEST(Keras3Nodes, BothFormsAndKeras3sOwnSpellingReadBackToTheSameModel) {
  auto model = call_argument_model();
  const std::vector<tf::Tensor> xs = call_argument_inputs();
  const std::vector<tf::Tensor> want = model->predict_all(xs);
  json keras3 = json_of(model->get_config());
  // Keras 3 adds "training": false and "mask": null to recurrent calls it made without them.
  for (json& l : keras3["layers"])
    if (l["name"] == "l1") l["inbound_nodes"][0]["kwargs"] = {{"training", false}, {"mask", nullptr}};
  json keras2 = keras3;  // every node in tf.keras 2's lists, as the reader converts them
  for (json& l : keras2["layers"])
    for (json& n : l["inbound_nodes"]) n = tf::models::keras2_inbound_node(n, l["class_name"].get<std::string>());
  EXPECT_EQ(entry(keras2, "l2")["inbound_nodes"][0][0][3]["initial_state"], json::parse(R"([["l1", 0, 1], ["l1", 0, 2]])"));
  // tf.keras 2's other spelling of initial_state: the states as further tensors of the node's list.
  for (json& l : keras2["layers"])
    if (l["name"] == "l2") l["inbound_nodes"] = json::parse(R"([[["x", 0, 0, {}], ["l1", 0, 1, {}], ["l1", 0, 2, {}]]])");
  const std::vector<json> configs = {keras3, keras2, tf::models::model_to_config_json(*model)["config"]};
  for (std::size_t k = 0; k < configs.size(); ++k) {
    const json& config = configs[k];
    auto back = tf::models::Functional::from_config(tf::to_config(config));
    back->set_weights(model->get_weights());
    const std::vector<tf::Tensor> got = back->predict_all(xs);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_values(got[i], want[i])) << "output " << i;
    json want_layers = json_of(model->get_config())["layers"];
    if (k < 2)  // l1's "training": false of Keras 3's spelling, in the config itself: a fixed mode
      for (json& l : want_layers)
        if (l["name"] == "l1") l["inbound_nodes"][0]["kwargs"]["training"] = false;
    EXPECT_EQ(json_of(back->get_config())["layers"], want_layers)
        << "config " << k << ": " << json::diff(json_of(back->get_config())["layers"], want_layers).dump();
  }
  // In a Keras 3 file (from_keras3) a node's training fixes nothing: Keras 3 runs every node in the
  // training mode of the model's call (fit, evaluate, predict always give one).
  const json from_file = tf::models::from_keras3(tf::models::to_keras3({{"class_name", "Functional"}, {"config", keras3}}));
  EXPECT_EQ(entry(from_file["config"], "drop")["inbound_nodes"], json::parse(R"([[["l3", 0, 0, {}]]])"));
  EXPECT_EQ(entry(from_file["config"], "l1")["inbound_nodes"], json::parse(R"([[["x", 0, 0, {"mask": null}]]])"));
  auto fitted = tf::models::Functional::from_config(tf::to_config(from_file["config"]));
  fitted->set_weights(model->get_weights());
  EXPECT_TRUE(same_values(fitted->predict_all(xs)[3], want[3]));
  // The flags are read, not dropped: without use_causal_mask the attention differs.
  json no_causal = keras3;
  for (json& l : no_causal["layers"])
    if (l["name"] == "mha") l["inbound_nodes"][0]["kwargs"].erase("use_causal_mask");
  auto other = tf::models::Functional::from_config(tf::to_config(no_causal));
  other->set_weights(model->get_weights());
  EXPECT_FALSE(same_values(other->predict_all(xs)[0], want[0]));
}

TEST(Keras3Nodes, BadKeras3CallArgumentsAreRefusedNamingTheLayerAndArgument) {
  json c = json_of(call_argument_model()->get_config());
  json bad = c;
  for (json& l : bad["layers"])
    if (l["name"] == "l3") l["inbound_nodes"][0]["kwargs"]["mask"] = "all";
  EXPECT_THAT([&] { tf::models::Functional::from_config(tf::to_config(bad)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer 'l3': call argument 'mask': \"all\" is not a [layer, node, tensor] reference")));
  bad = c;
  for (json& l : bad["layers"])
    if (l["name"] == "v") l["inbound_nodes"][0]["kwargs"]["frobnicate"] = 1;
  EXPECT_THAT([&] { tf::models::Functional::from_config(tf::to_config(bad)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer 'v': call argument 'frobnicate': 1 is not supported")));
  bad = c;
  for (json& l : bad["layers"])
    if (l["name"] == "l2") l["inbound_nodes"][0]["kwargs"]["initial_state"][0]["config"]["keras_history"] = {"l1", 0};
  EXPECT_THAT([&] { tf::models::Functional::from_config(tf::to_config(bad)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer 'l2': inbound node keras_history is not [layer, node, tensor]")));
}

// Keras 3's Functional writes Embedding(mask_zero)'s mask as a NotEqual op node, not_equal(ids, 0),
// passed as mask= to the layers that take it: read, run as the implicit mask, and written back so.
TEST(Keras3Nodes, NotEqualMaskNodesOfKeras3AreReadAndWrittenBack) {
  auto ids = L::Input({.shape = {5}, .name = "ids"});
  auto emb = std::make_shared<L::Embedding>(L::EmbeddingOptions{.input_dim = 7, .output_dim = 3, .mask_zero = true,
                                                                .name = "emb", .seed = 1});
  auto e = (*emb)(ids);
  auto ne = (*std::make_shared<L::NotEqual>(L::NotEqualOptions{.x2 = 0, .name = "not_equal"}))(ids);
  auto lstm = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 2, .name = "rnn", .seed = 2});
  tf::models::Functional explicit_mask(ids, lstm->call_all({e, ne}, {.mask = true})[0]);
  tf::models::Functional implicit(ids, (*lstm)(e));
  const tf::Tensor x = tf::constant<float>({1, 2, 0, 0, 0, 3, 3, 3, 6, 0}, tf::Shape{2, 5});
  EXPECT_TRUE(same_values(explicit_mask.predict(x), implicit.predict(x)));
  EXPECT_FALSE(same_values(implicit.predict(x), lstm->call_with_state(emb->operator()(x))[0]))
      << "the mask must matter here";
  const json c = json_of(explicit_mask.get_config());
  EXPECT_EQ(entry(c, "not_equal")["inbound_nodes"],
            json::array({{{"args", {tensor("ids", 0, 0, json::parse("[null, 5]")), 0}}, {"kwargs", json::object()}}}));
  EXPECT_EQ(entry(c, "not_equal")["config"], json::parse(R"({"name": "not_equal"})"));
  EXPECT_EQ(entry(c, "rnn")["inbound_nodes"][0]["kwargs"]["mask"], tensor("not_equal", 0, 0, json::parse("[null, 5]"), "bool"));
  const json k3 = tf::models::to_keras3(tf::layers::serialize_json(explicit_mask));
  EXPECT_EQ(entry(k3["config"], "not_equal")["module"], "keras.src.ops.numpy");
  EXPECT_EQ(entry(k3["config"], "not_equal")["registered_name"], "NotEqual");
  auto back = tf::models::Functional::from_config(tf::to_config(tf::models::from_keras3(k3)["config"]));
  back->set_weights(explicit_mask.get_weights());
  EXPECT_TRUE(same_values(back->predict(x), implicit.predict(x)));
  EXPECT_EQ(json_of(back->get_config()), c);
  // not_equal(ids, 2) is another mask: the constant is read.
  json two = c;
  for (json& l : two["layers"])
    if (l["name"] == "not_equal") l["inbound_nodes"][0]["args"][1] = 2;
  auto other = tf::models::Functional::from_config(tf::to_config(two));
  other->set_weights(explicit_mask.get_weights());
  EXPECT_FALSE(same_values(other->predict(x), implicit.predict(x)));
  for (json& l : two["layers"])
    if (l["name"] == "not_equal") l["inbound_nodes"][0]["args"][1] = "zero";
  EXPECT_THAT([&] { tf::models::Functional::from_config(tf::to_config(two)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer 'not_equal': call argument 'x2': \"zero\" is not supported")));
}

}  // namespace
