// export_onnx's recurrent layers: SimpleRNN -> RNN, LSTM -> LSTM, GRU -> GRU (models/export/onnx.h).
//
// ONNX runs them time-major (layout 0): x [batch, T, D] -> Transpose -> [T, batch, D]. Weights go
// from Keras's [D, G·u] / [u, G·u] (gate blocks along the columns) to ONNX's W [1, G·u, D] /
// R [1, G·u, u] (gate blocks along the rows), and the bias to B [1, 2·G·u] = input bias, recurrent bias.
// Gate order: Keras's LSTM is i, f, c, o, ONNX's i, o, f, c, so ONNX block k takes Keras block
// {0, 3, 1, 2}[k]; GRU is z, r, h in both (reset_after = linear_before_reset 1, bias rows 0 and 1
// the input and recurrent biases; without it the one bias is the input bias).
#include <limits>

#include <nlohmann/json.hpp>

#include "layers/serialization.h"
#include "models/export/internal/onnx_graph.h"

namespace tapeflow::models::onnx_export {

namespace {

// Keras [rows, G·u] (gate blocks of u columns, Keras order) -> ONNX [G·u, rows] in ONNX gate order.
std::vector<float> gate_rows(const Tensor& k, std::int64_t units, const std::vector<int>& order) {
  const std::int64_t rows = k.shape()[0], cols = k.shape()[1];
  const float* p = k.data<float>();
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  for (std::size_t g = 0; g < order.size(); ++g)
    for (std::int64_t j = 0; j < units; ++j)
      for (std::int64_t r = 0; r < rows; ++r)
        out[(g * units + j) * rows + r] = p[r * cols + order[g] * units + j];
  return out;
}

// A bias of G·u values (Keras order) in ONNX gate order.
std::vector<float> gate_bias(const float* b, std::int64_t units, const std::vector<int>& order) {
  std::vector<float> out;
  for (int g : order) out.insert(out.end(), b + g * units, b + (g + 1) * units);
  return out;
}

std::string onnx_activation(const std::string& file, const layers::Layer& layer, const std::string& name) {
  if (name == "sigmoid") return "Sigmoid";
  if (name == "tanh") return "Tanh";
  if (name == "relu") return "Relu";
  fail(file, layer, "activation '" + name + "' of a recurrent layer has no ONNX mapping (sigmoid, tanh, relu)");
}

}  // namespace

Value emit_recurrent(Graph& g, const std::string& file, const layers::Layer& layer, const nlohmann::json& config,
                     const Value& input, const std::string& base) {
  const std::string cls = layer.class_name();
  const layers::ConfigReader r(config, cls);
  if (input.rank() != 3) fail(file, layer, "expected an input [batch, timesteps, features]");
  if (r.boolean("return_state", false)) fail(file, layer, "return_state (several outputs) is not exported");
  const Value x = g.keras(input);
  const std::int64_t units = r.integer("units"), dim = x.dims[1];
  const bool lstm = cls == "LSTM", gru = cls == "GRU";
  const std::vector<int> order = lstm ? std::vector<int>{0, 3, 1, 2} : gru ? std::vector<int>{0, 1, 2} : std::vector<int>{0};
  const auto gates = static_cast<std::int64_t>(order.size());
  std::vector<std::string> acts;
  if (lstm || gru) acts.push_back(onnx_activation(file, layer, r.string("recurrent_activation", "sigmoid")));
  acts.push_back(onnx_activation(file, layer, r.string("activation", "tanh")));
  if (lstm) acts.push_back(acts.back());

  const std::string xt = g.fresh(base + "/time_major");
  set_ints(g.node("Transpose", {x.name}, {xt}, xt), "perm", {1, 0, 2});
  std::vector<std::string> ins = {
      xt,
      g.initializer_floats(base + "/kernel", gate_rows(layer_weight(file, layer, "kernel"), units, order),
                           {1, gates * units, dim}),
      g.initializer_floats(base + "/recurrent_kernel",
                           gate_rows(layer_weight(file, layer, "recurrent_kernel"), units, order),
                           {1, gates * units, units})};
  const bool reset_after = gru && r.boolean("reset_after", true);
  if (r.boolean("use_bias", true)) {
    const Tensor b = layer_weight(file, layer, "bias");
    std::vector<float> bias = gate_bias(b.data<float>(), units, order);
    if (reset_after) {
      const std::vector<float> rec = gate_bias(b.data<float>() + gates * units, units, order);
      bias.insert(bias.end(), rec.begin(), rec.end());
    } else {
      bias.resize(bias.size() * 2, 0.0f);
    }
    ins.push_back(g.initializer_floats(base + "/bias", bias, {1, 2 * gates * units}));
  }
  const bool sequences = r.boolean("return_sequences", false), backwards = r.boolean("go_backwards", false);
  const std::string y = g.fresh(base + (sequences ? "/Y" : "/Y_h"));
  auto* n = g.node(lstm ? "LSTM" : gru ? "GRU" : "RNN", ins, sequences ? std::vector<std::string>{y}
                                                                          : std::vector<std::string>{"", y},
                   g.fresh(base + "/" + cls));
  set_int(n, "hidden_size", units);
  set_string(n, "direction", backwards ? "reverse" : "forward");
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name("activations");
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const auto& s : acts) a->add_strings(s);
  if (gru) set_int(n, "linear_before_reset", reset_after ? 1 : 0);

  const std::string out = g.fresh(base);
  if (!sequences) {  // Y_h [1, batch, u] -> [batch, u]
    g.node("Squeeze", {y, g.initializer_ints(base + "/axes", {0})}, {out}, out);
    return {out, {units}, Layout::kKeras};
  }
  // Y [T, 1, batch, u] -> [T, batch, u] (-> time reversed: Keras keeps go_backwards's processing
  // order, ONNX's reverse direction the input order) -> [batch, T, u].
  std::string seq = g.fresh(base + "/squeezed");
  g.node("Squeeze", {y, g.initializer_ints(base + "/axes", {1})}, {seq}, seq);
  if (backwards) {
    const std::string rev = g.fresh(base + "/reversed");
    g.node("Slice",
           {seq, g.initializer_ints(base + "/starts", {-1}),
            g.initializer_ints(base + "/ends", {std::numeric_limits<std::int64_t>::min()}),
            g.initializer_ints(base + "/slice_axes", {0}), g.initializer_ints(base + "/steps", {-1})},
           {rev}, rev);
    seq = rev;
  }
  set_ints(g.node("Transpose", {seq}, {out}, out), "perm", {1, 0, 2});
  return {out, {x.dims[0], units}, Layout::kKeras};
}

}  // namespace tapeflow::models::onnx_export
