// Layers with several outputs as Functional nodes (out, h, c = LSTM(return_state=True)(x);
// MultiHeadAttention(..., return_attention_scores=True)): Keras 2's inbound_nodes with tensor
// indices and call keyword arguments (initial_state, value, use_causal_mask,
// return_attention_scores) in get_config, from_config and save_model / load_model (.h5 and
// .keras), bit for bit; their errors; and float64 gradients through the state outputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/internal/config_json.h"
#include "layers/internal/serialization_json.h"
#include "models/internal/keras3_config.h"
#include "tests/serialization/test_models.h"
#include "tape/ops/reduction_ops.h"
#include "tests/testing/gradient_check.h"

namespace tapeflow {
namespace {

using namespace testing_io;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
namespace L = layers;
using nlohmann::json;

struct StateModel {
  std::shared_ptr<models::Functional> model;
  std::string lstm, lstm2, dense, mha;
};

// seq [5, 3] -> out, h, c = LSTM(4, return_sequences, return_state); y = LSTM(4)(out,
// initial_state=[h, c]); Dense(2)(h); a, scores = MHA(2, 3)(out, out, causal, scores); outputs
// [y, dense, c, scores, a].
StateModel state_model(std::optional<DType> dtype = std::nullopt) {
  auto seq = L::Input({.shape = {5, 3}, .dtype = dtype.value_or(DType::kFloat32)});
  auto lstm = std::make_shared<L::LSTM>(
      L::LSTMOptions{.units = 4, .return_sequences = true, .return_state = true, .seed = 1, .dtype = dtype});
  const auto s = lstm->call_all({seq});
  auto lstm2 = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 4, .seed = 2, .dtype = dtype});
  auto y = (*lstm2)(std::vector<L::KerasTensor>{s[0], s[1], s[2]});
  auto dense = std::make_shared<L::Dense>(L::DenseOptions{.units = 2, .seed = 3, .dtype = dtype});
  auto d = (*dense)(s[1]);
  auto mha = std::make_shared<L::MultiHeadAttention>(
      L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 3, .seed = 4, .dtype = dtype});
  const auto a = mha->call_all({s[0], s[0]}, {.use_causal_mask = true, .return_attention_scores = true});
  auto model = std::make_shared<models::Functional>(std::vector<L::KerasTensor>{seq},
                                                    std::vector<L::KerasTensor>{y, d, s[2], a[1], a[0]});
  return {model, lstm->name(), lstm2->name(), dense->name(), mha->name()};
}

const json& entry(const json& config, const std::string& name) {
  for (const json& l : config["layers"])
    if (l["name"] == name) return l;
  throw std::runtime_error("no layer " + name);
}

void expect_same_outputs(models::Functional& a, models::Functional& b, const Tensor& x, const std::string& what) {
  const std::vector<Tensor> ya = a.predict_all({x}), yb = b.predict_all({x});
  ASSERT_EQ(ya.size(), yb.size()) << what;
  for (std::size_t k = 0; k < ya.size(); ++k) EXPECT_TRUE(same_bits(ya[k], yb[k])) << what << ": output " << k;
}

TEST(MultiOutputNodes, Keras2ConfigRoundTripsBitForBit) {
  StateModel m = state_model();
  const Tensor x = random_input({3, 5, 3}, 9);
  const std::vector<Tensor> ys = m.model->predict_all({x});
  ASSERT_EQ(ys.size(), 5u);
  EXPECT_EQ(ys[2].shape(), (Shape{3, 4}));
  EXPECT_EQ(ys[3].shape(), (Shape{3, 2, 5, 5}));
  // The state outputs are the LSTM's final h and c.
  auto& lstm = dynamic_cast<L::LSTM&>(*m.model->layers()[1]);
  EXPECT_TRUE(same_bits(lstm.call_with_state(x)[2], ys[2]));

  // Keras 3's nodes (get_config), and the tf.keras 2 lists the reader makes of them.
  const json config = json_of(m.model->get_config());
  const json& lstm2_node = entry(config, m.lstm2)["inbound_nodes"][0];
  EXPECT_EQ(lstm2_node["kwargs"]["initial_state"][1],
            json::parse(R"({"class_name": "__keras_tensor__", "config": {"shape": [null, 4], "dtype": "float32",
                        "keras_history": [")" + m.lstm + R"(", 0, 2]}})"));
  EXPECT_EQ(models::keras2_inbound_node(lstm2_node, "LSTM"),
            json::parse(R"([[")" + m.lstm + R"(", 0, 0, {"initial_state": [[")" + m.lstm + R"(", 0, 1], [")" + m.lstm +
                        R"(", 0, 2]]}]])"));
  EXPECT_EQ(entry(models::model_to_config_json(*m.model)["config"], m.dense)["inbound_nodes"],
            json::parse(R"([[[")" + m.lstm + R"(", 0, 1, {}]]])"));
  const json& mha_node = entry(config, m.mha)["inbound_nodes"][0];
  EXPECT_EQ(mha_node["args"].size(), 2u);
  EXPECT_EQ(mha_node["kwargs"], json::parse(R"({"use_causal_mask": true, "return_attention_scores": true})"));
  EXPECT_EQ(models::keras2_inbound_node(mha_node, "MultiHeadAttention"),
            json::parse(R"([[")" + m.lstm + R"(", 0, 0, {"value": [")" + m.lstm +
                        R"(", 0, 0], "use_causal_mask": true, "return_attention_scores": true}]])"));
  EXPECT_EQ(config["output_layers"][2], json::parse(R"([")" + m.lstm + R"(", 0, 2])"));
  EXPECT_EQ(config["output_layers"][3], json::parse(R"([")" + m.mha + R"(", 0, 1])"));
  const std::string s = m.model->summary();
  EXPECT_THAT(s, HasSubstr("[(None, 5, 4), (None, 4), (None, 4)]"));
  EXPECT_THAT(s, HasSubstr("[(None, 5, 4), (None, 2, 5, 5)]"));
  EXPECT_THAT(s, HasSubstr(m.lstm + "[0][1]"));

  auto back = std::dynamic_pointer_cast<models::Functional>(models::model_from_json(models::to_json(*m.model)));
  ASSERT_TRUE(back);
  EXPECT_EQ(models::to_json(*back), models::to_json(*m.model));
  back->set_weights(m.model->get_weights());
  expect_same_outputs(*m.model, *back, x, "model_from_json");
  for (const char* ext : {"h5", "keras"}) {
    const std::string path = temp_path(std::string("multi_output.") + ext);
    models::save_model(*m.model, path);
    auto loaded = std::dynamic_pointer_cast<models::Functional>(models::load_model(path, {.compile = false}));
    ASSERT_TRUE(loaded) << ext;
    EXPECT_EQ(models::to_json(*loaded), models::to_json(*m.model)) << ext;
    expect_same_outputs(*m.model, *loaded, x, ext);
  }
}

TEST(MultiOutputNodes, NestedModelWithSeveralOutputsIsANode) {
  StateModel m = state_model();
  auto x = L::Input({.shape = {5, 3}});
  // Functional::call_all(std::vector<Tensor>) hides the symbolic one.
  const auto inner = m.model->L::Layer::call_all(std::vector<L::KerasTensor>{x});
  ASSERT_EQ(inner.size(), 5u);
  auto sum = (*std::make_shared<L::Add>())(std::vector<L::KerasTensor>{inner[0], inner[2]});  // y + c
  models::Functional outer(x, sum);
  const Tensor xs = random_input({2, 5, 3}, 3);
  const std::vector<Tensor> ys = m.model->predict_all({xs});
  EXPECT_TRUE(same_bits(outer.predict(xs), ys[0] + ys[2]));
}

TEST(MultiOutputNodes, Errors) {
  auto seq = L::Input({.shape = {5, 3}});
  auto lstm = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 4, .return_state = true, .name = "rs"});
  EXPECT_THAT([&] { (*lstm)(seq); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("LSTM 'rs': has 3 outputs here (return_state")));
  auto dense = std::make_shared<L::Dense>(L::DenseOptions{.units = 2, .name = "dd"});
  EXPECT_THAT([&] { dense->call_all({seq}, {.return_attention_scores = true}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Dense 'dd': does not take the call argument return_attention_scores")));
  EXPECT_THAT([&] { lstm->call_all({seq}, {.use_causal_mask = true}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("LSTM 'rs': does not take the call argument use_causal_mask")));
  const auto s = lstm->call_all({seq});
  EXPECT_EQ(s[1].describe(), "KerasTensor (None, 4) float32 from LSTM 'rs', output 1");

  StateModel m = state_model();
  json config = json::parse(models::to_json(*m.model));
  json bad = config;
  for (json& l : bad["config"]["layers"])
    if (l["name"] == m.dense) l["inbound_nodes"][0][0][2] = 3;
  EXPECT_THAT([&] { models::model_from_json(bad.dump()); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer '" + m.dense + "': tensor_index 3 of layer '" + m.lstm +
                                                             "' node 0, which has 3 output(s)")));
  bad = config;
  for (json& l : bad["config"]["layers"])
    if (l["name"] == m.mha) l["inbound_nodes"][0]["kwargs"]["return_attention_scores"] = "yes";
  EXPECT_THAT([&] { models::model_from_json(bad.dump()); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer '" + m.mha + "': call argument 'return_attention_scores'")));
  bad = config;
  for (json& l : bad["config"]["layers"])
    if (l["name"] == m.dense) l["inbound_nodes"][0][0][3]["return_attention_scores"] = true;
  EXPECT_THAT([&] { models::model_from_json(bad.dump()); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer '" + m.dense + "': call argument 'return_attention_scores'")));
}

// Float64 gradients (first and second order) through the state outputs: out, h, c = LSTM(...)(x);
// y = LSTM(out, initial_state=[h, c]); GRU(h-dependent) pieces; the model's output sums y and c,
// so d/dx reaches x through the first LSTM's states as well as its sequence output.
TEST(MultiOutputNodes, GradientsFlowThroughStateOutputs) {
  auto x = L::Input({.shape = {3, 2}, .dtype = DType::kFloat64});
  const auto s = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 2, .return_sequences = true, .return_state = true,
                                                          .seed = 5, .dtype = DType::kFloat64})
                     ->call_all({x});
  auto y = (*std::make_shared<L::LSTM>(L::LSTMOptions{.units = 2, .seed = 6, .dtype = DType::kFloat64}))(
      std::vector<L::KerasTensor>{s[0], s[1], s[2]});
  const auto g = std::make_shared<L::GRU>(L::GRUOptions{.units = 2, .return_state = true, .seed = 7, .dtype = DType::kFloat64})
                     ->call_all({s[0]});
  auto sum = (*std::make_shared<L::Add>(L::MergeOptions{.dtype = DType::kFloat64}))(std::vector<L::KerasTensor>{y, s[2], g[1]});
  models::Functional model(x, sum);
  const Tensor in = testing::random_f64({2, 3, 2}, 11);
  EXPECT_TRUE(testing::gradcheck_both([&](const std::vector<Tensor>& v) { return model(v[0]); }, {in}));
  // Only through the states: the model's output is c alone.
  models::Functional states(x, s[2]);
  EXPECT_TRUE(testing::gradcheck_both([&](const std::vector<Tensor>& v) { return states(v[0]); }, {in}));
}

// Keras 2's node kwargs beside initial_state / value: an explicit mask (LSTM(...)(x, mask=m)), an
// attention_mask, and training=True, written and read as tf.keras 2 does.
TEST(MultiOutputNodes, MaskAttentionMaskAndTrainingKwargsRoundTrip) {
  auto seq = L::Input({.shape = {4, 3}});
  auto m = L::Input({.shape = {4}});
  auto am = L::Input({.shape = {4, 4}});
  auto lstm = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 3, .return_sequences = true, .seed = 1});
  auto h = lstm->call_all({seq, m}, {.mask = true})[0];
  auto mha = std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 1, .key_dim = 2, .seed = 2});
  auto a = mha->call_all({h, h, am}, {.attention_mask = true})[0];
  auto drop = std::make_shared<L::Dropout>(L::DropoutOptions{.rate = 0.5, .seed = 3});
  auto d = drop->call_all({a}, {.training = true})[0];
  auto model = std::make_shared<models::Functional>(std::vector<L::KerasTensor>{seq, m, am}, std::vector<L::KerasTensor>{a, d});
  const Tensor x = random_input({2, 4, 3}, 1);
  const Tensor mask = constant<float>({1, 1, 0, 1, 1, 0, 0, 0}, {2, 4});
  const Tensor attn = constant<float>({1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1,
                                      1, 1, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1}, {2, 4, 4});
  const std::vector<Tensor> ys = model->predict_all({x, mask, attn});
  const Tensor want = mha->attend(lstm->call_with_state(x, {}, mask)[0], lstm->call_with_state(x, {}, mask)[0],
                                  {.attention_mask = attn}).first;
  EXPECT_TRUE(same_bits(ys[0], want));
  // training=True on the node: the Dropout drops out in predict too.
  const Tensor zeros_in_d = equal(ys[1], scalar_like(ys[1], 0.0));
  EXPECT_GT(reduce_sum(cast(zeros_in_d, DType::kFloat32)).item(), 0.0);

  // Keras 3's nodes: tensor keywords as __keras_tensor__, flags plain; tf.keras 2's list form only
  // where Keras 3 reads it too (model_to_config: the Dropout's training=True).
  const json config = json_of(model->get_config());
  EXPECT_EQ(entry(config, lstm->name())["inbound_nodes"][0]["kwargs"]["mask"]["config"]["keras_history"],
            json({m.node()->layer->name(), 0, 0}));
  EXPECT_EQ(models::keras2_inbound_node(entry(config, mha->name())["inbound_nodes"][0], "MultiHeadAttention")[0][3],
            json::parse(R"({"value": [")" + lstm->name() + R"(", 0, 0], "attention_mask": [")" + am.node()->layer->name() +
                        R"(", 0, 0]})"));
  EXPECT_EQ(entry(config, drop->name())["inbound_nodes"][0]["kwargs"], json::parse(R"({"training": true})"));
  const json keras2 = models::model_to_config_json(*model)["config"];
  EXPECT_TRUE(entry(keras2, lstm->name())["inbound_nodes"][0].is_object());
  EXPECT_TRUE(entry(keras2, mha->name())["inbound_nodes"][0].is_object());
  EXPECT_EQ(entry(keras2, drop->name())["inbound_nodes"][0][0][3], json::parse(R"({"training": true})"));
  for (const char* ext : {"json", "h5"}) {
    std::shared_ptr<models::Functional> loaded;
    if (std::string(ext) == "json") {
      loaded = std::dynamic_pointer_cast<models::Functional>(models::model_from_json(models::to_json(*model)));
      ASSERT_TRUE(loaded);
      loaded->set_weights(model->get_weights());
    } else {
      const std::string path = temp_path("mask_kwargs.h5");
      models::save_model(*model, path);
      loaded = std::dynamic_pointer_cast<models::Functional>(models::load_model(path, {.compile = false}));
      ASSERT_TRUE(loaded);
    }
    EXPECT_EQ(models::to_json(*loaded), models::to_json(*model)) << ext;
    EXPECT_TRUE(same_bits(loaded->predict_all({x, mask, attn})[0], ys[0])) << ext;
  }

  // An explicit mask replaces the one the input carries (Embedding(mask_zero)): all ones here, so
  // the LSTM runs every step, as without any mask.
  auto ids = L::Input({.shape = {4}});
  auto ones_mask = L::Input({.shape = {4}});
  auto e = (*std::make_shared<L::Embedding>(L::EmbeddingOptions{.input_dim = 5, .output_dim = 3, .mask_zero = true, .seed = 4}))(ids);
  auto rnn = std::make_shared<L::LSTM>(L::LSTMOptions{.units = 2, .seed = 5});
  models::Functional explicit_mask({ids, ones_mask}, {rnn->call_all({e, ones_mask}, {.mask = true})[0]});
  const Tensor id_batch = constant<float>({1, 0, 3, 0, 2, 2, 0, 0}, {2, 4});
  const Tensor emb = explicit_mask.layers()[2]->operator()(id_batch);
  EXPECT_TRUE(same_bits(explicit_mask.predict({id_batch, ones({2, 4}, DType::kFloat32)}),
                        rnn->call_with_state(emb, {}, ones({2, 4}, DType::kFloat32))[0]));

  auto dense = std::make_shared<L::Dense>(L::DenseOptions{.units = 2, .name = "dm"});
  EXPECT_THAT([&] { dense->call_all({seq, m}, {.mask = true}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Dense 'dm': does not take the call argument mask")));
  json bad = json::parse(models::to_json(*model));
  for (json& l : bad["config"]["layers"])
    if (l["name"] == lstm->name()) l["inbound_nodes"][0]["kwargs"]["mask"] = 3;
  EXPECT_THAT([&] { models::model_from_json(bad.dump()); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer '" + lstm->name() + "': call argument 'mask': 3 is not a [layer, node, tensor] reference")));
}

}  // namespace
}  // namespace tapeflow
