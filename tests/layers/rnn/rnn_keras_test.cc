// SimpleRNN / LSTM / GRU / Bidirectional against Keras 3 itself: outputs (and final states), and the
// gradients of a weighted sum of them w.r.t. inputs, weights and initial states, in float64, for the
// cases in rnn_vectors.json (made by make_rnn_vectors.py from the project's test venv: masks,
// go_backwards, return_state, initial_state, hard_sigmoid, reset_after true and false, merge modes).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layers/internal/serialization_json.h"
#include "layers/rnn/bidirectional.h"
#include "layers/rnn/rnn.h"
#include "layers/serialization.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
namespace L = tapeflow::layers;
using nlohmann::json;

namespace {

const json& vectors() {
  static const json j = [] {
    std::ifstream in(std::string(TAPEFLOW_SOURCE_DIR) + "/tests/layers/rnn/rnn_vectors.json");
    if (!in) throw std::runtime_error("cannot open tests/layers/rnn/rnn_vectors.json");
    return json::parse(in);
  }();
  return j;
}

tf::Tensor tensor(const json& t) {
  std::vector<std::int64_t> dims = t.at("shape").get<std::vector<std::int64_t>>();
  return tf::constant(t.at("values").get<std::vector<double>>(), tf::Shape(dims), tf::DType::kFloat64);
}

// The layer of a case, from the same config fields Keras was given (plus float64).
std::shared_ptr<L::Layer> make_layer(const json& c) {
  json config = c.at("config");
  config["dtype"] = "float64";
  if (config.contains("layer")) config["layer"]["config"]["dtype"] = "float64";
  return L::deserialize({{"class_name", c.at("class_name")}, {"config", config}});
}

std::vector<tf::Tensor> call(L::Layer& layer, const tf::Tensor& x, const std::vector<tf::Tensor>& states,
                             const std::optional<tf::Tensor>& mask) {
  if (auto* rnn = dynamic_cast<L::RNN*>(&layer)) {
    auto out = rnn->call_with_state(x, states, mask);
    if (!rnn->rnn_options().return_state) out.resize(1);
    return out;
  }
  auto& bi = dynamic_cast<L::Bidirectional&>(layer);
  auto out = bi.call_with_state(x, states, mask);
  if (!bi.forward_layer()->rnn_options().return_state) out.resize(1);
  return out;
}

class RnnKeras : public ::testing::TestWithParam<std::string> {};

TEST_P(RnnKeras, OutputsAndGradientsMatchKeras3) {
  const json* found = nullptr;
  for (const json& c : vectors().at("cases"))
    if (c.at("name") == GetParam()) found = &c;
  ASSERT_NE(found, nullptr);
  const json& c = *found;
  auto layer = make_layer(c);
  const tf::Tensor x = tensor(c.at("input"));
  layer->build(x.shape());
  std::vector<tf::Tensor> weights;
  for (const json& w : c.at("weights")) weights.push_back(tensor(w));
  layer->set_weights(weights);
  std::vector<tf::Tensor> states;
  for (const json& s : c.at("initial_state")) states.push_back(tensor(s));
  std::optional<tf::Tensor> mask;
  if (!c.at("mask").is_null()) {
    const json& m = c.at("mask");
    mask = tf::cast(tf::constant(m.at("values").get<std::vector<double>>(),
                                 tf::Shape(m.at("shape").get<std::vector<std::int64_t>>()), tf::DType::kFloat64),
                    tf::DType::kBool);
  }

  tf::GradientTape tape;
  tape.watch(x);
  for (const tf::Tensor& s : states) tape.watch(s);
  const std::vector<tf::Tensor> outs = call(*layer, x, states, mask);
  ASSERT_EQ(outs.size(), c.at("outputs").size());
  tf::Tensor loss = tf::scalar_like(x, 0.0);
  for (std::size_t k = 0; k < outs.size(); ++k) {
    EXPECT_TRUE(tf::testing::all_close(outs[k], tensor(c.at("outputs")[k]), 1e-10, 1e-12)) << "output " << k;
    loss = loss + tf::reduce_sum(outs[k] * tensor(c.at("coefficients")[k]));
  }
  std::vector<tf::Source> sources{x};
  for (const tf::Variable& v : layer->trainable_variables()) sources.emplace_back(v);
  for (const tf::Tensor& s : states) sources.emplace_back(s);
  const auto g = tape.gradient(loss, sources);
  ASSERT_TRUE(g[0]);
  EXPECT_TRUE(tf::testing::all_close(*g[0], tensor(c.at("grad_input")), 1e-9, 1e-12)) << "d/dx";
  const std::size_t nw = c.at("grad_weights").size();
  ASSERT_EQ(layer->trainable_variables().size(), nw);
  for (std::size_t i = 0; i < nw; ++i) {
    ASSERT_TRUE(g[1 + i]);
    EXPECT_TRUE(tf::testing::all_close(*g[1 + i], tensor(c.at("grad_weights")[i]), 1e-9, 1e-12))
        << "d/d " << layer->trainable_variables()[i].name();
  }
  for (std::size_t i = 0; i < states.size(); ++i) {
    ASSERT_TRUE(g[1 + nw + i]);
    EXPECT_TRUE(tf::testing::all_close(*g[1 + nw + i], tensor(c.at("grad_initial_state")[i]), 1e-9, 1e-12))
        << "d/d initial state " << i;
  }
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const json& c : vectors().at("cases")) names.push_back(c.at("name").get<std::string>());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Vectors, RnnKeras, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
