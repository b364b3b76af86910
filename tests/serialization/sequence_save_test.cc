// The sequence wing's 1-D layers in whole models: Conv1D -> MaxPooling1D -> AveragePooling1D ->
// RMSNormalization -> GlobalAveragePooling1D -> Dense through to_json / model_from_json and
// save_model / load_model (.h5 and .keras) give the same predictions bit for bit, with the Keras
// weight names and summary shapes.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/io/zip_archive.h"
#include "models/internal/keras3_config.h"
#include "tests/serialization/test_models.h"

namespace tapeflow {
namespace {

using namespace testing_io;
using ::testing::HasSubstr;
namespace L = layers;

std::shared_ptr<models::Sequential> conv1d_model() {
  auto m = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
      std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = 4, .kernel_size = 3, .padding = "causal", .dilation_rate = 2,
                                                   .activation = "relu", .seed = 1}),
      std::make_shared<L::MaxPooling1D>(L::Pooling1DOptions{.pool_size = 2}),
      std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = 5, .kernel_size = 2, .strides = 2, .padding = "same", .seed = 2}),
      std::make_shared<L::AveragePooling1D>(L::Pooling1DOptions{.pool_size = 2, .strides = 1}),
      std::make_shared<L::RMSNormalization>(L::RMSNormalizationOptions{.epsilon = 1e-5}),
      std::make_shared<L::GlobalAveragePooling1D>(),
      std::make_shared<L::Dense>(L::DenseOptions{.units = 3, .seed = 3})});
  m->build(Shape{1, 12, 2});
  return m;
}

TEST(SequenceSaveModel, Conv1DPoolingRMSNormRoundTrips) {
  auto model = conv1d_model();
  // Non-trivial RMS scales, so a lost weight shows.
  auto w = model->get_weights();
  for (auto& t : w)
    if (t.shape() == Shape{5}) t = constant<float>({0.5f, 1.5f, -1.f, 2.f, 0.25f}, {5});
  model->set_weights(w);
  const Tensor x = random_input({3, 12, 2}, 4);
  const Tensor before = model->predict(x);
  EXPECT_EQ(before.shape(), (Shape{3, 3}));
  const std::string s = model->summary();
  for (const char* row : {"(None, 12, 4)", "(None, 6, 4)", "(None, 3, 5)", "(None, 2, 5)", "(None, 5)", "Conv1D",
                          "MaxPooling1D", "AveragePooling1D", "RMSNormalization"})
    EXPECT_THAT(s, HasSubstr(row));
  for (const char* ext : {"h5", "keras"}) {
    const std::string path = temp_path(std::string("conv1d.") + ext);
    models::save_model(*model, path);
    auto loaded = models::load_model(path, {.compile = false});
    EXPECT_TRUE(same_bits(loaded->predict(x), before)) << ext;
    EXPECT_EQ(models::to_json(*loaded), models::to_json(*model)) << ext;
  }
  const io::ZipReader zip(temp_path("conv1d.keras"));
  const nlohmann::json config = nlohmann::json::parse(zip.read("config.json", 1 << 20));
  EXPECT_EQ(config["config"]["layers"][1]["class_name"], "Conv1D");
  EXPECT_EQ(config["config"]["layers"][1]["module"], "keras.layers");
  auto from_json = models::model_from_json(models::to_json(*model));
  from_json->set_weights(model->get_weights());
  EXPECT_TRUE(same_bits(from_json->predict(x), before));
  std::vector<std::string> names;
  for (const auto& v : model->variables()) names.push_back(v.name());
  EXPECT_THAT(names, ::testing::Contains(HasSubstr("rms_normalization")));
  EXPECT_THAT(names, ::testing::Contains(HasSubstr("/scale:0")));
}

}  // namespace
}  // namespace tapeflow

namespace tapeflow {
namespace {

using namespace testing_io;
using ::testing::HasSubstr;
namespace L = layers;

// Embedding(mask_zero) -> LSTM(return_sequences) -> MultiHeadAttention (self) -> Dense: ids [B, 6] -> [B, 6, 3].
std::shared_ptr<models::Functional> embedding_lstm_attention(std::int64_t units = 8) {
  auto ids = L::Input({.shape = {6}});
  auto e = (*std::make_shared<L::Embedding>(L::EmbeddingOptions{.input_dim = 11, .output_dim = 5, .mask_zero = true, .seed = 1}))(ids);
  auto h = (*std::make_shared<L::LSTM>(L::LSTMOptions{.units = units, .return_sequences = true, .seed = 2}))(e);
  auto a = (*std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 4, .seed = 3}))(
      std::vector<L::KerasTensor>{h, h});
  auto out = (*std::make_shared<L::Dense>(L::DenseOptions{.units = 3, .seed = 4}))(a);
  return std::make_shared<models::Functional>(ids, out);
}

Tensor ids_batch() { return constant<float>({1, 4, 0, 10, 3, 0, 7, 7, 2, 0, 0, 0, 5, 9, 8, 6, 1, 2}, {3, 6}); }

std::string raw(const Tensor& t) { return std::string(static_cast<const char*>(t.raw_data()), t.nbytes()); }

// The child half of FreshProcessLoadIsBitIdentical: load the model named by the environment and
// write its predictions' bytes.
TEST(SequenceSaveModel, FreshProcessChild) {
  const char* model = std::getenv("TAPEFLOW_SEQ_MODEL");
  if (!model) GTEST_SKIP() << "run by FreshProcessLoadIsBitIdentical";
  auto loaded = models::load_model(model, {.compile = false});
  std::ofstream(std::getenv("TAPEFLOW_SEQ_OUT"), std::ios::binary) << raw(loaded->predict(ids_batch()));
}

TEST(SequenceSaveModel, FreshProcessLoadIsBitIdentical) {
  auto model = embedding_lstm_attention();
  const Tensor before = model->predict(ids_batch());
  EXPECT_EQ(before.shape(), (Shape{3, 6, 3}));
  for (const char* ext : {"h5", "keras"}) {
    const std::string path = temp_path(std::string("emb_lstm_mha.") + ext), out = path + ".out";
    models::save_model(*model, path);
    std::filesystem::remove(out);
    const std::string cmd = "TAPEFLOW_SEQ_MODEL=" + path + " TAPEFLOW_SEQ_OUT=" + out + " " +
                            std::filesystem::read_symlink("/proc/self/exe").string() +
                            " --gtest_filter=SequenceSaveModel.FreshProcessChild > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(out, std::ios::binary);
    const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(got.size(), before.nbytes()) << ext;
    EXPECT_TRUE(got == raw(before)) << ext << ": the fresh process's predictions differ";
  }
}

TEST(SequenceSaveModel, MismatchedOrTruncatedWeightsNameTheLayerAndVariable) {
  auto model = embedding_lstm_attention();
  const std::string path = temp_path("emb_lstm_mha.weights.h5");
  model->save_weights(path);
  auto other = embedding_lstm_attention(/*units=*/9);
  try {
    other->load_weights(path);
    ADD_FAILURE() << "loading LSTM 8 weights into LSTM 9 must fail";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("lstm"));
    EXPECT_THAT(e.what(), HasSubstr("kernel"));
    std::cout << "mismatched: " << e.what() << "\n";
  }
  const std::string full = temp_path("emb_lstm_mha.h5");
  models::save_model(*model, full);
  const auto size = std::filesystem::file_size(full);
  const std::string cut = temp_path("emb_lstm_mha_cut.h5");
  std::filesystem::copy_file(full, cut, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(cut, size * 3 / 4);
  try {
    models::load_model(cut, {.compile = false});
    ADD_FAILURE() << "a truncated file must fail";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr(cut));
    std::cout << "truncated: " << e.what() << "\n";
  }
}

}  // namespace
}  // namespace tapeflow

namespace tapeflow {
namespace {

using namespace testing_io;
using ::testing::HasSubstr;
namespace L = layers;
using nlohmann::json;

// The node of layer `name` in a model config (tf.keras 2's form, as to_json writes it: [[first input
// ref, kwargs]]) rewritten in the positional form tapeflow wrote before: [[first], [kwargs[key_0]], ...]
// (a list-valued kwarg gives one ref per element).
json as_positional(json config, const std::string& name, const std::vector<std::string>& keys) {
  for (json& l : config["config"]["layers"]) {
    if (l["name"] != name) continue;
    json first = l["inbound_nodes"][0][0];
    const json kwargs = first[3];
    first[3] = json::object();
    json node = json::array({first});
    for (const std::string& k : keys) {
      const json& v = kwargs.at(k);
      for (const json& ref : v[0].is_array() ? v : json::array({v})) node.push_back({ref[0], ref[1], ref[2], json::object()});
    }
    l["inbound_nodes"] = json::array({node});
  }
  return config;
}

TEST(SequenceSaveModel, Keras2NodeKwargsAreRead) {
  // MultiHeadAttention(query, value=..., key=...) as tf.keras 2 stores it.
  auto q = L::Input({.shape = {3, 4}});
  auto v = L::Input({.shape = {5, 4}});
  auto k = L::Input({.shape = {5, 2}});
  auto a = (*std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 3, .seed = 1}))(
      std::vector<L::KerasTensor>{q, v, k});
  auto model = std::make_shared<models::Functional>(std::vector<L::KerasTensor>{q, v, k}, std::vector<L::KerasTensor>{a});
  const std::string mha = model->layers()[3]->name();
  // to_json writes MultiHeadAttention's node in Keras 3's form ({"args": [query, value, key]}, which
  // Keras 3 reads); tf.keras 2's form of the same call, which we read too, is keras2_inbound_node's.
  json keras2 = json::parse(models::to_json(*model));
  for (json& l : keras2["config"]["layers"])
    if (l["name"] == mha) {
      ASSERT_TRUE(l["inbound_nodes"][0].is_object()) << l.dump();
      l["inbound_nodes"][0] = models::keras2_inbound_node(l["inbound_nodes"][0], "MultiHeadAttention");
    }
  ASSERT_NE(keras2.dump().find("\"key\":[\""), std::string::npos) << keras2.dump();
  const json positional = as_positional(keras2, mha, {"value", "key"});
  json with_flags = keras2;
  for (json& l : with_flags["config"]["layers"])
    if (l["name"] == mha) l["inbound_nodes"][0][0][3].update({{"use_causal_mask", false}, {"return_attention_scores", false}, {"training", nullptr}});
  const std::vector<Tensor> xs = {random_input({2, 3, 4}, 1), random_input({2, 5, 4}, 2), random_input({2, 5, 2}, 3)};
  const Tensor before = model->predict(xs);
  for (const json& c : {keras2, with_flags, positional}) {
    auto loaded = std::dynamic_pointer_cast<models::Functional>(models::model_from_json(c.dump()));
    ASSERT_TRUE(loaded);
    loaded->set_weights(model->get_weights());
    EXPECT_TRUE(same_bits(loaded->predict(xs), before)) << c.dump();
  }
  // use_causal_mask: true is a node flag now: the same as the layer called with it.
  json causal = keras2;
  for (json& l : causal["config"]["layers"])
    if (l["name"] == mha) l["inbound_nodes"][0][0][3]["use_causal_mask"] = true;
  auto causal_model = std::dynamic_pointer_cast<models::Functional>(models::model_from_json(causal.dump()));
  ASSERT_TRUE(causal_model);
  causal_model->set_weights(model->get_weights());
  auto& layer = dynamic_cast<L::MultiHeadAttention&>(*model->layers()[3]);
  const Tensor want = layer.attend(xs[0], xs[1], {.key = xs[2], .use_causal_mask = true}).first;
  EXPECT_TRUE(same_bits(causal_model->predict(xs), want));
  EXPECT_FALSE(same_bits(want, before));

  // LSTM(sequences, initial_state=[h, c]).
  auto s = L::Input({.shape = {4, 3}});
  auto h = L::Input({.shape = {2}});
  auto c = L::Input({.shape = {2}});
  auto y = (*std::make_shared<L::LSTM>(L::LSTMOptions{.units = 2, .seed = 4}))(std::vector<L::KerasTensor>{s, h, c});
  auto rnn = std::make_shared<models::Functional>(std::vector<L::KerasTensor>{s, h, c}, std::vector<L::KerasTensor>{y});
  // to_json keeps this node in Keras 3's form (initial_state tensors as __keras_tensor__); tf.keras
  // 2's spelling of it is keras2_inbound_node's.
  json k2 = json::parse(models::to_json(*rnn));
  for (json& l : k2["config"]["layers"])
    if (l["name"] == rnn->layers()[3]->name()) {
      ASSERT_TRUE(l["inbound_nodes"][0].is_object()) << l.dump();
      l["inbound_nodes"][0] = models::keras2_inbound_node(l["inbound_nodes"][0], "LSTM");
    }
  ASSERT_NE(k2.dump().find("\"initial_state\":[[\""), std::string::npos) << k2.dump();
  const std::vector<Tensor> ss = {random_input({2, 4, 3}, 5), random_input({2, 2}, 6), random_input({2, 2}, 7)};
  for (const json& c : {k2, as_positional(k2, rnn->layers()[3]->name(), {"initial_state"})}) {
    auto loaded = std::dynamic_pointer_cast<models::Functional>(models::model_from_json(c.dump()));
    ASSERT_TRUE(loaded);
    loaded->set_weights(rnn->get_weights());
    EXPECT_TRUE(same_bits(loaded->predict(ss), rnn->predict(ss))) << c.dump();
  }
}

}  // namespace
}  // namespace tapeflow
