// export_onnx's recurrent layers: SimpleRNN -> RNN, LSTM -> LSTM, GRU -> GRU, Bidirectional -> the
// same op with direction "bidirectional" (models/export/onnx.h).
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
#include "tape/core/internal/config_json.h"
#include "layers/internal/serialization_json.h"
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
  // Bidirectional: one ONNX node of direction "bidirectional" over the forward and backward layers.
  const bool bidirectional = layer.class_name() == "Bidirectional";
  const nlohmann::json& inner = bidirectional ? config.at("layer").at("config") : config;
  const std::string cls = bidirectional ? config.at("layer").at("class_name").get<std::string>() : layer.class_name();
  const layers::ConfigReader r(to_config(inner), cls);
  std::vector<const layers::Layer*> dirs;
  if (bidirectional) {
    for (const auto& l : layer.layers()) dirs.push_back(l.get());  // forward, backward
    if (dirs.size() != 2) fail(file, layer, "expected a forward and a backward layer");
    if (r.boolean("go_backwards", false)) fail(file, layer, "a wrapped layer with go_backwards is not exported");
  } else {
    dirs.push_back(&layer);
  }
  const std::string merge = bidirectional ? config.value("merge_mode", "concat") : "";
  if (bidirectional && merge != "concat" && merge != "sum" && merge != "mul" && merge != "ave")
    fail(file, layer, "merge_mode " + config["merge_mode"].dump() + " is not exported");
  if (cls != "SimpleRNN" && cls != "LSTM" && cls != "GRU") fail(file, layer, "no ONNX mapping for a wrapped " + cls);
  if (input.rank() != 3) fail(file, layer, "expected an input [batch, timesteps, features]");
  if (r.boolean("return_state", false)) fail(file, layer, "return_state (several outputs) is not exported");
  const Value x = g.keras(input);
  const std::int64_t units = r.integer("units"), dim = x.dims[1];
  const auto ndir = static_cast<std::int64_t>(dirs.size());
  const bool lstm = cls == "LSTM", gru = cls == "GRU";
  const std::vector<int> order = lstm ? std::vector<int>{0, 3, 1, 2} : gru ? std::vector<int>{0, 1, 2} : std::vector<int>{0};
  const auto gates = static_cast<std::int64_t>(order.size());
  std::vector<std::string> acts;
  if (lstm || gru) acts.push_back(onnx_activation(file, layer, r.string("recurrent_activation", "sigmoid")));
  acts.push_back(onnx_activation(file, layer, r.string("activation", "tanh")));
  if (lstm) acts.push_back(acts.back());
  if (bidirectional) {
    const std::vector<std::string> forward = acts;  // the backward direction's, the same
    acts.insert(acts.end(), forward.begin(), forward.end());
  }

  const std::string xt = g.fresh(base + "/time_major");
  set_ints(g.node("Transpose", {x.name}, {xt}, xt), "perm", {1, 0, 2});
  const bool reset_after = gru && r.boolean("reset_after", true), use_bias = r.boolean("use_bias", true);
  std::vector<float> w, rw, bias;
  for (const layers::Layer* d : dirs) {
    const std::vector<float> wd = gate_rows(layer_weight(file, *d, "kernel"), units, order);
    const std::vector<float> rd = gate_rows(layer_weight(file, *d, "recurrent_kernel"), units, order);
    w.insert(w.end(), wd.begin(), wd.end());
    rw.insert(rw.end(), rd.begin(), rd.end());
    if (!use_bias) continue;
    const Tensor b = layer_weight(file, *d, "bias");
    std::vector<float> bd = gate_bias(b.data<float>(), units, order);
    if (reset_after) {
      const std::vector<float> rec = gate_bias(b.data<float>() + gates * units, units, order);
      bd.insert(bd.end(), rec.begin(), rec.end());
    } else {
      bd.resize(bd.size() * 2, 0.0f);
    }
    bias.insert(bias.end(), bd.begin(), bd.end());
  }
  std::vector<std::string> ins = {xt, g.initializer_floats(base + "/kernel", w, {ndir, gates * units, dim}),
                                  g.initializer_floats(base + "/recurrent_kernel", rw, {ndir, gates * units, units})};
  if (use_bias) ins.push_back(g.initializer_floats(base + "/bias", bias, {ndir, 2 * gates * units}));
  const bool sequences = r.boolean("return_sequences", false), backwards = r.boolean("go_backwards", false);
  const std::string y = g.fresh(base + (sequences ? "/Y" : "/Y_h"));
  auto* n = g.node(lstm ? "LSTM" : gru ? "GRU" : "RNN", ins, sequences ? std::vector<std::string>{y}
                                                                          : std::vector<std::string>{"", y},
                   g.fresh(base + "/" + cls));
  set_int(n, "hidden_size", units);
  set_string(n, "direction", bidirectional ? "bidirectional" : backwards ? "reverse" : "forward");
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name("activations");
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const auto& s : acts) a->add_strings(s);
  if (gru) set_int(n, "linear_before_reset", reset_after ? 1 : 0);

  const std::string out = g.fresh(base);
  const std::vector<std::int64_t> dims =
      sequences ? std::vector<std::int64_t>{x.dims[0], merge == "concat" ? 2 * units : units}
                : std::vector<std::int64_t>{merge == "concat" ? 2 * units : units};
  if (bidirectional) {
    // Y [T, 2, batch, u] -> [batch, T, 2, u]; Y_h [2, batch, u]. The backward outputs are already in
    // input order (Keras reverses them before merging too). Then forward and backward merged.
    std::string both = y;
    if (sequences) {
      both = g.fresh(base + "/batch_major");
      set_ints(g.node("Transpose", {y}, {both}, both), "perm", {2, 0, 1, 3});
    }
    const std::int64_t axis = sequences ? 2 : 0;
    std::string part[2];
    for (int k = 0; k < 2; ++k) {
      part[k] = g.fresh(base + (k == 0 ? "/forward" : "/backward"));
      set_int(g.node("Gather", {both, g.initializer_scalar(base + "/direction", k)}, {part[k]}, part[k]), "axis", axis);
    }
    if (merge == "concat") {
      set_int(g.node("Concat", {part[0], part[1]}, {out}, out), "axis", -1);
    } else if (merge == "ave") {
      const std::string sum = g.fresh(base + "/sum");
      g.node("Add", {part[0], part[1]}, {sum}, sum);
      g.node("Mul", {sum, g.initializer_floats(base + "/half", {0.5f}, {})}, {out}, out);
    } else {
      g.node(merge == "sum" ? "Add" : "Mul", {part[0], part[1]}, {out}, out);
    }
    return {out, dims, Layout::kKeras};
  }
  if (!sequences) {  // Y_h [1, batch, u] -> [batch, u]
    g.node("Squeeze", {y, g.initializer_ints(base + "/axes", {0})}, {out}, out);
    return {out, dims, Layout::kKeras};
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
  return {out, dims, Layout::kKeras};
}

}  // namespace tapeflow::models::onnx_export
