// The attention and sequence wings' layers against Keras 3 itself: outputs and gradients (inputs
// and weights) for fixed weights and inputs, float64, from keras_vectors/attention_vectors.json and
// sequence_vectors.json (made by keras_vectors/make_attention_vectors.py and
// make_sequence_vectors.py with the project's pinned Keras 3 on JAX).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/internal/config_json.h"
#include "layers/internal/serialization_json.h"
#include "layers/layers.h"
#include "models/functional.h"
#include "models/sequential.h"
#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
namespace L = tf::layers;
using nlohmann::json;
using tf::testing::all_close;

namespace {

const json& vectors() {
  static const json j = [] {
    json all = json::object();
    all["cases"] = json::array();
    for (const char* file : {"attention_vectors.json", "sequence_vectors.json"}) {
      std::ifstream in(std::string(TAPEFLOW_SOURCE_DIR) + "/tests/layers/keras_vectors/" + file);
      std::stringstream s;
      s << in.rdbuf();
      const json file_cases = json::parse(s.str()).at("cases");
      for (const json& c : file_cases) all["cases"].push_back(c);
    }
    return all;
  }();
  return j;
}

const json& find_case(const std::string& name) {
  for (const json& c : vectors().at("cases"))
    if (c.at("name") == name) return c;
  throw std::runtime_error("no Keras case " + name);
}

tf::Tensor tensor(const json& a) {
  tf::Shape s;
  for (const auto& d : a.at("shape")) s.push_back(d.get<std::int64_t>());
  return tf::constant<double>(a.at("data").get<std::vector<double>>(), s);
}

using CallFn = std::function<tf::Tensor(L::Layer&, const std::vector<tf::Tensor>&)>;

// Makes the layer from the case's Keras config (float64), builds it with one call, loads the
// weights, and compares the output and the gradients of sum(output * w_out) with Keras's.
std::shared_ptr<L::Layer> check_case(const std::string& name, CallFn call, double tol = 1e-12) {
  const json& c = find_case(name);
  json config = c.at("config");
  config["dtype"] = "float64";
  config["name"] = name;
  std::shared_ptr<L::Layer> layer;
  if (c.at("class_name") == "Activation") config["activation"] = "gelu";
  layer = L::deserialize({{"class_name", c.at("class_name")}, {"config", config}});
  std::vector<tf::Tensor> in;
  for (const json& a : c.at("inputs")) in.push_back(tensor(a));
  call(*layer, in);  // builds
  std::vector<tf::Tensor> w;
  for (const json& a : c.at("weights")) w.push_back(tensor(a));
  layer->set_weights(w);
  tf::GradientTape tape({.persistent = true});
  std::vector<tf::Source> sources;
  for (const json& i : c.at("float_inputs")) {
    tape.watch(in[i.get<std::size_t>()]);
    sources.push_back(in[i.get<std::size_t>()]);
  }
  const tf::Tensor y = call(*layer, in);
  const tf::Tensor loss = tf::reduce_sum(y * tensor(c.at("w_out")));
  EXPECT_TRUE(all_close(y, tensor(c.at("output")), tol, tol)) << name << ": output";
  const auto gx = tape.gradient(loss, sources);
  for (std::size_t i = 0; i < gx.size(); ++i)
    EXPECT_TRUE(gx[i] && all_close(*gx[i], tensor(c.at("grad_inputs")[i]), tol, tol)) << name << ": input " << i;
  const std::vector<tf::Variable> vars = layer->variables();
  std::vector<tf::Source> vs(vars.begin(), vars.end());
  const auto gw = tape.gradient(loss, vs);
  EXPECT_EQ(gw.size(), c.at("grad_weights").size());
  for (std::size_t i = 0; i < gw.size() && i < c.at("grad_weights").size(); ++i)
    EXPECT_TRUE(gw[i] && all_close(*gw[i], tensor(c.at("grad_weights")[i]), tol, tol))
        << name << ": weight " << c.at("weight_names")[i];
  return layer;
}

tf::Tensor one(L::Layer& l, const std::vector<tf::Tensor>& in) { return l(in[0]); }

// Keras 3's ops.layer_normalization computes in result_type(x.dtype, "float32"), which is float32
// even for float64 inputs: its float64 results carry float32 rounding (~2e-7).
TEST(KerasVectors, LayerNormalization) {
  check_case("layer_norm_last_axis", one, 2e-6);
  check_case("layer_norm_axes_1_2", one, 2e-6);
  check_case("layer_norm_axis_1_no_center", one, 2e-6);
}

TEST(KerasVectors, MultiHeadAttentionCrossWithKeyMaskAndScores) {
  tf::Tensor scores;
  auto layer = check_case("mha_cross_key_mask_scores", [&](L::Layer& l, const std::vector<tf::Tensor>& in) {
    auto [out, s] = dynamic_cast<L::MultiHeadAttention&>(l).attend(
        in[0], in[1], {.key = in[2], .attention_mask = in[3]});
    scores = s;
    return out;
  });
  EXPECT_TRUE(all_close(scores, tensor(find_case("mha_cross_key_mask_scores").at("scores")), 1e-12, 1e-12));
  // The fully masked query row: zeros, as Keras.
  EXPECT_EQ(tf::reduce_sum(tf::abs(tf::slice(scores, {1, 0, 2, 0}, {1, 2, 1, 5}))).item<double>(), 0.0);
  // Keras's kernel layout.
  EXPECT_EQ(layer->variables()[0].shape(), (tf::Shape{6, 2, 3}));
  EXPECT_EQ(layer->variables()[6].shape(), (tf::Shape{2, 4, 5}));
  EXPECT_EQ(layer->variables()[0].name(), "mha_cross_key_mask_scores/query/kernel:0");
}

TEST(KerasVectors, MultiHeadAttentionSelfCausalAndNoBias) {
  check_case("mha_self_causal", [](L::Layer& l, const std::vector<tf::Tensor>& in) {
    return dynamic_cast<L::MultiHeadAttention&>(l).attend(in[0], in[0], {.use_causal_mask = true}).first;
  });
  check_case("mha_self_no_bias", [](L::Layer& l, const std::vector<tf::Tensor>& in) {
    return l(std::vector<tf::Tensor>{in[0], in[0]});
  });
}

TEST(KerasVectors, EmbeddingAndItsMask) {
  auto layer = check_case("embedding_mask_zero", one);
  const tf::Tensor mask = dynamic_cast<L::Embedding&>(*layer).compute_mask(tensor(find_case("embedding_mask_zero").at("inputs")[0]));
  EXPECT_TRUE(all_close(tf::cast(mask, tf::DType::kFloat64), tensor(find_case("embedding_mask_zero").at("mask")), 0, 0));
}

TEST(KerasVectors, GlobalPooling1D) {
  check_case("global_average_pooling_1d_mask", [](L::Layer& l, const std::vector<tf::Tensor>& in) {
    return dynamic_cast<L::GlobalPooling1D&>(l).call(in[0], in[1], false);
  });
  check_case("global_max_pooling_1d", one);
}

TEST(KerasVectors, PermuteAndGelu) {
  check_case("permute_3_1_2", one);
  check_case("gelu_exact", one);
  const json& c = find_case("gelu_tanh");
  tf::Tensor x = tensor(c.at("inputs")[0]);
  tf::GradientTape tape;
  tape.watch(x);
  const tf::Tensor y = tf::gelu(x, true);
  EXPECT_TRUE(all_close(y, tensor(c.at("output")), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(*tape.gradient(tf::reduce_sum(y * tensor(c.at("w_out"))), x), tensor(c.at("grad_inputs")[0]),
                        1e-12, 1e-12));
}

TEST(KerasVectors, Conv1D) {
  auto layer = check_case("conv1d_valid", one);
  EXPECT_EQ(layer->variables()[0].shape(), (tf::Shape{3, 3, 4}));  // Keras's [kernel_size, channels, filters]
  EXPECT_EQ(layer->variables()[0].name(), "conv1d_valid/kernel:0");
  EXPECT_EQ(layer->variables()[1].name(), "conv1d_valid/bias:0");
  check_case("conv1d_same_strides_2", one);
  check_case("conv1d_causal_dilation_2", one);
  check_case("conv1d_valid_dilation_3_no_bias", one);
  check_case("conv1d_causal_strides_3", one);
}

TEST(KerasVectors, Pooling1D) {
  check_case("max_pooling_1d_valid", one);
  check_case("max_pooling_1d_same", one);
  check_case("average_pooling_1d_valid", one);
  check_case("average_pooling_1d_same", one);
}

// Keras 3's ops.rms_normalization computes in result_type(float64, "float32"), float32 in Keras's
// promotion: its float64 results carry float32 rounding (~1e-7).
TEST(KerasVectors, RMSNormalization) {
  auto layer = check_case("rms_norm_last_axis", one, 2e-6);
  EXPECT_EQ(layer->variables()[0].name(), "rms_norm_last_axis/scale:0");
  layer = check_case("rms_norm_axes_1_2", one, 2e-6);
  EXPECT_EQ(layer->variables()[0].shape(), (tf::Shape{3, 4}));
}

// Masks through the Functional API against Keras 3 Functional models with the same weights: the
// Embedding's mask_zero mask reaches the LSTM / Bidirectional(GRU), MultiHeadAttention and
// GlobalAveragePooling1D as Keras passes it (through Dropout too).
void check_functional(const std::string& name, const std::function<L::KerasTensor(const L::KerasTensor&)>& build) {
  const json& c = find_case(name);
  auto ids = L::Input({.shape = {6}});
  tf::models::Functional model(ids, build(ids));
  std::vector<tf::Tensor> w;
  for (const json& a : c.at("weights")) w.push_back(tensor(a));
  model.set_weights(w);
  const tf::Tensor x = tensor(c.at("inputs")[0]);
  const tf::Tensor y = model(x);
  // Keras's MultiHeadAttention without scores runs jax.nn.dot_product_attention (~2e-8 relative).
  EXPECT_TRUE(all_close(y, tensor(c.at("output")), 1e-7, 1e-7)) << name << ":\n" << y << "\n" << tensor(c.at("output"));
}

template <class T, class O>
std::shared_ptr<T> f64(O o) {
  o.dtype = tf::DType::kFloat64;
  return std::make_shared<T>(std::move(o));
}

TEST(KerasVectors, MasksThroughFunctional) {
  check_functional("functional_embedding_lstm_mha_gap", [](const L::KerasTensor& ids) {
    auto h = (*f64<L::LSTM>(L::LSTMOptions{.units = 4, .return_sequences = true}))(
        (*f64<L::Embedding>(L::EmbeddingOptions{.input_dim = 11, .output_dim = 5, .mask_zero = true}))(ids));
    auto a = (*f64<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 3}))(
        std::vector<L::KerasTensor>{h, h});
    return (*f64<L::Dense>(L::DenseOptions{.units = 3}))((*f64<L::GlobalAveragePooling1D>(L::GlobalPooling1DOptions{}))(a));
  });
  check_functional("functional_embedding_bidirectional_gap", [](const L::KerasTensor& ids) {
    auto e = (*f64<L::Embedding>(L::EmbeddingOptions{.input_dim = 11, .output_dim = 4, .mask_zero = true}))(ids);
    auto b = (*std::make_shared<L::Bidirectional>(f64<L::GRU>(L::GRUOptions{.units = 3, .return_sequences = true}),
                                                  L::BidirectionalOptions{.dtype = tf::DType::kFloat64}))(e);
    return (*f64<L::Dense>(L::DenseOptions{.units = 2}))((*f64<L::GlobalAveragePooling1D>(L::GlobalPooling1DOptions{}))(b));
  });
  check_functional("functional_embedding_lstm_last", [](const L::KerasTensor& ids) {
    auto e = (*f64<L::Embedding>(L::EmbeddingOptions{.input_dim = 11, .output_dim = 4, .mask_zero = true}))(ids);
    auto d = (*f64<L::Dropout>(L::DropoutOptions{.rate = 0.5}))(e);
    return (*f64<L::Dense>(L::DenseOptions{.units = 2}))((*f64<L::LSTM>(L::LSTMOptions{.units = 3}))(d));
  });
}

// The same masks through a Sequential model (Keras's Sequential passes them as Functional does).
TEST(KerasVectors, MasksThroughSequential) {
  const json& c = find_case("functional_embedding_lstm_last");
  tf::models::Sequential model({f64<L::Embedding>(L::EmbeddingOptions{.input_dim = 11, .output_dim = 4, .mask_zero = true}),
                                f64<L::Dropout>(L::DropoutOptions{.rate = 0.5}), f64<L::LSTM>(L::LSTMOptions{.units = 3}),
                                f64<L::Dense>(L::DenseOptions{.units = 2})});
  const tf::Tensor x = tensor(c.at("inputs")[0]);
  model(x);  // builds
  std::vector<tf::Tensor> w;
  for (const json& a : c.at("weights")) w.push_back(tensor(a));
  model.set_weights(w);
  // Keras runs the LSTM's tanh in float32 (convert_to_tensor): ~5e-9 here.
  EXPECT_TRUE(all_close(model(x), tensor(c.at("output")), 1e-7, 1e-7)) << model(x) << "\n" << tensor(c.at("output"));
}

}  // namespace

namespace {

// Layers with several outputs as Functional nodes against Keras 3 models with several outputs
// (out, h, c = LSTM(return_state=True)(x) and the like): every output, and the gradients of
// sum_k sum(output_k * w_k) with respect to the float inputs and every weight (Keras order), so the
// gradient through the state and scores outputs is Keras's too.
void check_multi_output(const std::string& name, const std::vector<L::KerasTensor>& ins,
                        const std::vector<L::KerasTensor>& outs, double tol) {
  const json& c = find_case(name);
  tf::models::Functional model(ins, outs);
  std::vector<tf::Tensor> w;
  for (const json& a : c.at("weights")) w.push_back(tensor(a));
  model.set_weights(w);
  std::vector<tf::Tensor> xs;
  for (const json& a : c.at("inputs")) {
    tf::Tensor x = tensor(a);
    if (a.at("data").size() && ins[xs.size()].dtype() == tf::DType::kInt32) x = tf::cast(x, tf::DType::kInt32);
    xs.push_back(x);
  }
  tf::GradientTape tape({.persistent = true});
  std::vector<tf::Source> sources;
  for (const tf::Tensor& x : xs)
    if (x.dtype() == tf::DType::kFloat64) {
      tape.watch(x);
      sources.push_back(x);
    }
  const std::vector<tf::Tensor> ys = model.call_all(xs);
  ASSERT_EQ(ys.size(), c.at("outputs").size()) << name;
  tf::Tensor loss = tf::zeros({}, tf::DType::kFloat64);
  for (std::size_t k = 0; k < ys.size(); ++k) {
    EXPECT_TRUE(all_close(ys[k], tensor(c.at("outputs")[k]), tol, tol))
        << name << ": output " << k << "\n" << ys[k] << "\n" << tensor(c.at("outputs")[k]);
    loss = loss + tf::reduce_sum(ys[k] * tensor(c.at("w_outs")[k]));
  }
  const auto gx = tape.gradient(loss, sources);
  for (std::size_t i = 0; i < gx.size(); ++i)
    EXPECT_TRUE(gx[i] && all_close(*gx[i], tensor(c.at("grad_inputs")[i]), tol, tol)) << name << ": input " << i;
  const std::vector<tf::Variable> vars = model.variables();
  ASSERT_EQ(vars.size(), c.at("grad_weights").size()) << name;
  std::vector<tf::Source> vs(vars.begin(), vars.end());
  const auto gw = tape.gradient(loss, vs);
  for (std::size_t i = 0; i < gw.size(); ++i)
    EXPECT_TRUE(gw[i] && all_close(*gw[i], tensor(c.at("grad_weights")[i]), tol, tol))
        << name << ": weight " << c.at("weight_names")[i] << " (ours " << vars[i].name() << ")";
}

TEST(KerasVectors, ReturnStateOutputsAsFunctionalNodes) {
  // out, h, c = LSTM(4, return_sequences, return_state)(seq); LSTM(4)(out, initial_state=[h, c]);
  // Dense(2)(h); outputs [y, dense, c]. Keras's tanh detours through float32 (~5e-9 here).
  auto seq = L::Input({.shape = {5, 3}, .dtype = tf::DType::kFloat64});
  const auto s = f64<L::LSTM>(L::LSTMOptions{.units = 4, .return_sequences = true, .return_state = true})->call_all({seq});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].index(), 1);
  EXPECT_EQ(s[2].shape_string(), "(None, 4)");
  auto y = (*f64<L::LSTM>(L::LSTMOptions{.units = 4}))(std::vector<L::KerasTensor>{s[0], s[1], s[2]});
  auto d = (*f64<L::Dense>(L::DenseOptions{.units = 2}))(s[1]);
  check_multi_output("functional_lstm_return_state", {seq}, {y, d, s[2]}, 1e-7);

  // Embedding(mask_zero) -> GRU(return_sequences, return_state) -> Bidirectional(SimpleRNN(return_state)):
  // the mask goes with the GRU's sequence output, not with its state.
  auto ids = L::Input({.shape = {6}, .dtype = tf::DType::kInt32});
  auto e = (*f64<L::Embedding>(L::EmbeddingOptions{.input_dim = 11, .output_dim = 4, .mask_zero = true}))(ids);
  const auto g = f64<L::GRU>(L::GRUOptions{.units = 3, .return_sequences = true, .return_state = true})->call_all({e});
  const auto b = std::make_shared<L::Bidirectional>(f64<L::SimpleRNN>(L::SimpleRNNOptions{.units = 2, .return_state = true}),
                                                    L::BidirectionalOptions{.dtype = tf::DType::kFloat64})
                     ->call_all({g[0]});
  ASSERT_EQ(b.size(), 3u);
  auto dh = (*f64<L::Dense>(L::DenseOptions{.units = 2}))(g[1]);
  // Vectors made with Keras's tanh in exact float64 (keras_case.float64_tanh): with Keras 3.15's
  // float32 tanh the weight gradients carry up to 6.2e-7 of rounding (forward SimpleRNN bias; GRU bias
  // 3.6e-7, embeddings 1.3e-7), over a 1e-7 tolerance, while ours equal float64 central differences of
  // our loss and of Keras's (float64 tanh) to 3e-10, as does Keras's jax.grad.
  check_multi_output("functional_masked_gru_bidirectional_states", {ids}, {b[0], dh, b[1], b[2]}, 1e-12);
}

TEST(KerasVectors, AttentionScoresAsFunctionalNodes) {
  // a, s = MHA(2, 3)(q, v, return_attention_scores); c, cs = MHA(1, 2)(a, a, causal, scores).
  auto q = L::Input({.shape = {4, 3}, .dtype = tf::DType::kFloat64});
  auto v = L::Input({.shape = {5, 2}, .dtype = tf::DType::kFloat64});
  const auto a = f64<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 3})
                     ->call_all({q, v}, {.return_attention_scores = true});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].shape_string(), "(None, 2, 4, 5)");
  const auto c = f64<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 1, .key_dim = 2})
                     ->call_all({a[0], a[0]}, {.use_causal_mask = true, .return_attention_scores = true});
  auto d = (*f64<L::Dense>(L::DenseOptions{.units = 2}))(c[0]);
  // Keras scales the query by a float32 1/sqrt(key_dim) (~1e-8 relative).
  check_multi_output("functional_attention_scores", {q, v}, {d, a[1], c[1]}, 1e-7);
}

TEST(KerasVectors, RMSNormalizationAxisListOutOfOrder) {
  // Keras 3.15 sorts the axis list in build (the scale's shape follows the sorted list), and
  // writes the sorted list to its config.
  auto layer = check_case("rms_norm_axes_2_1", one, 2e-6);
  EXPECT_EQ(layer->variables()[0].shape(), (tf::Shape{3, 4}));
  // Given as {2, 1} (Keras's config holds the sorted list): the same weight shape and numbers.
  const json& c = find_case("rms_norm_axes_2_1");
  L::RMSNormalization given({.axis = {2, 1}, .dtype = tf::DType::kFloat64});
  const tf::Tensor x = tensor(c.at("inputs")[0]);
  given(x);
  given.set_weights({tensor(c.at("weights")[0])});
  EXPECT_TRUE(all_close(given(x), tensor(c.at("output")), 2e-6, 2e-6));
  layer = check_case("rms_norm_axes_minus1_1", one, 2e-6);
  EXPECT_EQ(layer->variables()[0].shape(), (tf::Shape{3, 3}));
}

}  // namespace
