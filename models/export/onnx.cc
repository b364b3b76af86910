// export_onnx: walks the model's Keras config (the one to_json, save_model and export_tfjs write)
// and each layer's weights, emitting ONNX nodes through onnx_export::Graph.
#include "models/export/onnx.h"
#include "tape/core/internal/config_json.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <onnx/checker.h>

#include "layers/rnn/bidirectional.h"
#include "layers/rnn/rnn.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "models/config.h"
#include "models/export/internal/onnx_graph.h"
#include "models/functional.h"
#include "models/internal/inbound_node.h"
#include "models/io/atomic_file.h"
#include "models/sequential.h"
#include "tape/ops/array_ops.h"

namespace tapeflow::models {
using nlohmann::json;

namespace {
using onnx_export::Graph;
using onnx_export::Layout;
using onnx_export::Value;

constexpr const char* kMapped =
    "InputLayer, Dense, BatchNormalization, Dropout, Activation, LeakyReLU, Conv2D, Conv2DTranspose, MaxPooling2D, "
    "AveragePooling2D, GlobalAveragePooling2D, GlobalMaxPooling2D, UpSampling2D, ZeroPadding2D, Add, Multiply, "
    "Average, Concatenate, Flatten, Reshape, SimpleRNN, LSTM, GRU, Bidirectional, Embedding, PositionEmbedding, "
    "LayerNormalization, RMSNormalization, MultiHeadAttention, Conv1D, MaxPooling1D, AveragePooling1D, "
    "GlobalAveragePooling1D, GlobalMaxPooling1D, Permute, Sequential, Functional";

// Keras masks (models/internal/functional_masks.h's table): Embedding(mask_zero) makes one; these
// layers consume it, which ONNX export does not express (refused, naming both layers); these pass
// it on; every other layer drops it, so a mask that no consumer reaches changes nothing.
bool consumes_mask(const std::string& cls) {
  return cls == "SimpleRNN" || cls == "LSTM" || cls == "GRU" || cls == "Bidirectional" ||
         cls == "GlobalAveragePooling1D" || cls == "MultiHeadAttention";
}
bool passes_mask(const std::string& cls) {
  return cls == "InputLayer" || cls == "Dense" || cls == "Dropout" || cls == "LayerNormalization" ||
         cls == "BatchNormalization" || cls == "Activation" || cls == "LeakyReLU" || cls == "Add" ||
         cls == "Multiply" || cls == "Average";
}

class Exporter {
 public:
  Exporter(Graph& graph, std::string file) : g_(graph), file_(std::move(file)) {}

  // Emits `model` (a Sequential or Functional) on `inputs`; returns its outputs.
  std::vector<Value> emit_model(const Model& model, const std::vector<Value>& inputs, const std::string& prefix);
  // The model's input dims (without the batch) from its config.
  std::vector<std::vector<std::int64_t>> input_dims(const Model& model);
  // The model's input dtypes as ONNX elem types (float32, or int32 / int64 ids for an Embedding).
  std::vector<std::int32_t> input_types(const Model& model);

 private:
  [[noreturn]] void fail(const layers::Layer& layer, const std::string& problem) const {
    onnx_export::fail(file_, layer, problem);
  }
  // emit_layer_ops with Keras masks followed: the output carries the mask the layer passes on.
  Value emit_layer(const layers::Layer& layer, const std::vector<Value>& inputs, const std::string& prefix);
  Value emit_layer_ops(const layers::Layer& layer, const std::vector<Value>& inputs, const std::string& prefix);
  Value single(const layers::Layer& layer, const std::vector<Value>& inputs) const {
    if (inputs.size() != 1) fail(layer, "expected one input, got " + std::to_string(inputs.size()));
    return inputs[0];
  }
  // The layer's weight "<layer>/<name>:0" as a float32 tensor. Errors: missing or not float32.
  Tensor weight(const layers::Layer& layer, const std::string& name) const;
  // Applies a Keras activation by name to `x` (in its layout; softmax over Keras's last axis).
  Value activation(const layers::Layer& layer, const std::string& name, const Value& x, const std::string& base);
  Value emit_conv(const layers::Layer& layer, const layers::ConfigReader& r, const Value& x, const std::string& base,
                  bool transpose, const std::vector<std::int64_t>& out_dims);
  Value emit_batch_norm(const layers::Layer& layer, const layers::ConfigReader& r, const Value& x,
                        const std::string& base);
  // The output dims of a single-input layer (its compute_output_shape on [1, dims...]).
  std::vector<std::int64_t> out_dims(const layers::Layer& layer, const Value& x) const;

  Graph& g_;
  std::string file_;
};

std::vector<std::int64_t> batch_dims(const json& batch_shape) {
  std::vector<std::int64_t> dims;
  for (std::size_t i = 1; i < batch_shape.size(); ++i) dims.push_back(batch_shape[i].get<std::int64_t>());
  return dims;
}

using onnx_export::tf_pads;

std::vector<std::int64_t> pair_of(const layers::ConfigReader& r, const std::string& key, std::int64_t fallback) {
  if (!r.has(key)) return {fallback, fallback};
  std::vector<std::int64_t> v = r.integers(key);
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) r.fail(key, "expected two integers");
  return v;
}

std::vector<std::vector<std::int64_t>> Exporter::input_dims(const Model& model) {
  const json config = json_of(model.get_config());
  std::vector<std::vector<std::int64_t>> out;
  if (dynamic_cast<const Sequential*>(&model)) {
    const json& ls = config.at("layers");
    if (!ls.empty() && ls[0].value("class_name", "") == "InputLayer")
      out.push_back(batch_dims(ls[0]["config"]["batch_input_shape"]));
  } else if (const auto* f = dynamic_cast<const Functional*>(&model)) {
    for (const auto& in : f->inputs()) out.push_back(in.shape());
    for (auto& d : out) d.erase(d.begin());
  }
  if (out.empty())
    throw std::invalid_argument("export_onnx: " + file_ + ": model '" + model.name() +
                                "' has no input shape: build it (model.build({1, ...}) or a first call) before exporting");
  return out;
}

std::vector<std::int32_t> Exporter::input_types(const Model& model) {
  std::vector<DType> dtypes;
  if (dynamic_cast<const Sequential*>(&model)) {
    const json model_config = json_of(model.get_config());
    const json& ls = model_config.at("layers");
    const std::string dt = !ls.empty() && ls[0].value("class_name", "") == "InputLayer"
                               ? ls[0]["config"].value("dtype", "float32") : "float32";
    dtypes.push_back(dt == "int32" ? DType::kInt32 : dt == "int64" ? DType::kInt64 : DType::kFloat32);
  } else if (const auto* f = dynamic_cast<const Functional*>(&model)) {
    for (const auto& in : f->inputs()) dtypes.push_back(in.dtype());
  }
  std::vector<std::int32_t> out;
  for (DType d : dtypes)
    out.push_back(d == DType::kInt32   ? onnx::TensorProto::INT32
                  : d == DType::kInt64 ? onnx::TensorProto::INT64
                                       : onnx::TensorProto::FLOAT);
  return out;
}

Tensor Exporter::weight(const layers::Layer& layer, const std::string& name) const {
  return onnx_export::layer_weight(file_, layer, name);
}

std::vector<std::int64_t> Exporter::out_dims(const layers::Layer& layer, const Value& x) const {
  std::vector<std::int64_t> in{1};
  in.insert(in.end(), x.dims.begin(), x.dims.end());
  std::vector<std::int64_t> out = layer.compute_output_shape(Shape(in)).to_vector();
  out.erase(out.begin());
  return out;
}

Value Exporter::activation(const layers::Layer& layer, const std::string& name, const Value& x,
                           const std::string& base) {
  return onnx_export::activation(g_, file_, layer, name, x, base);
}

Value Exporter::emit_conv(const layers::Layer& layer, const layers::ConfigReader& r, const Value& input,
                          const std::string& base, bool transpose, const std::vector<std::int64_t>& out) {
  if (input.rank() != 4) fail(layer, "expected a rank-4 input");
  const Value x = g_.nchw(input);
  const auto k = pair_of(r, "kernel_size", 1), s = pair_of(r, "strides", 1), d = pair_of(r, "dilation_rate", 1);
  const bool same = r.string("padding", "valid") == "same";
  // Keras's kernel [kh, kw, a, b] -> ONNX [b, a, kh, kw] (Conv: a = C, b = F; ConvTranspose: a = F, b = C).
  const Tensor w = tapeflow::transpose(weight(layer, "kernel"), {3, 2, 0, 1});
  std::vector<std::string> ins = {x.name, g_.initializer(base + "/kernel", w, w.shape().to_vector())};
  if (r.boolean("use_bias", true)) {
    const Tensor b = weight(layer, "bias");
    ins.push_back(g_.initializer(base + "/bias", b, b.shape().to_vector()));
  }
  std::vector<std::int64_t> begin, end, output_padding;
  for (int a = 0; a < 2; ++a) {
    const std::int64_t eff = (k[a] - 1) * d[a] + 1;
    if (!transpose) {
      auto [b, e] = tf_pads(x.dims[a], out[a], s[a], eff, same);
      begin.push_back(b), end.push_back(e);
    } else {
      // The transposed conv is the gradient of a conv from out[a] to x.dims[a]: the same TF pads
      // crop the full output (x - 1) s + eff; output_padding adds what "valid"/"same" need beyond it.
      auto [b, e] = tf_pads(out[a], x.dims[a], s[a], eff, true);
      const std::int64_t full = (x.dims[a] - 1) * s[a] + eff;
      begin.push_back(b), end.push_back(e);
      output_padding.push_back(out[a] - (full - b - e));
      if (output_padding.back() < 0 || output_padding.back() >= std::max(s[a], d[a]))
        fail(layer, "its output size has no ONNX ConvTranspose padding");
    }
  }
  const std::string pre = g_.fresh(base + (transpose ? "/ConvTranspose" : "/Conv"));
  auto* n = g_.node(transpose ? "ConvTranspose" : "Conv", ins, {pre}, pre);
  onnx_export::set_ints(n, "kernel_shape", k);
  onnx_export::set_ints(n, "strides", s);
  onnx_export::set_ints(n, "dilations", d);
  std::vector<std::int64_t> pads = begin;
  pads.insert(pads.end(), end.begin(), end.end());
  onnx_export::set_ints(n, "pads", pads);
  if (transpose) onnx_export::set_ints(n, "output_padding", output_padding);
  return activation(layer, r.string("activation", "linear"), {pre, out, Layout::kNchw}, base);
}

Value Exporter::emit_batch_norm(const layers::Layer& layer, const layers::ConfigReader& r, const Value& input,
                                const std::string& base) {
  std::int64_t axis = r.integer("axis", -1);
  const int rank = input.rank();
  if (axis < 0) axis += rank;
  if (axis <= 0 || axis >= rank) fail(layer, "axis " + std::to_string(r.integer("axis", -1)) + " of a rank-" +
                                                 std::to_string(rank) + " input is not a feature axis");
  const Value x = rank == 4 && axis == 3 ? g_.nchw(input) : input;  // the channels of an image: NCHW
  const int p = onnx_export::axis_in_layout(x, static_cast<int>(axis));
  const Tensor mean = weight(layer, "moving_mean"), var = weight(layer, "moving_variance");
  const std::int64_t c = mean.num_elements();
  const Tensor gamma = r.boolean("scale", true) ? weight(layer, "gamma") : ones(Shape{c});
  const Tensor beta = r.boolean("center", true) ? weight(layer, "beta") : zeros(Shape{c});
  const float eps = static_cast<float>(r.number("epsilon", 1e-3));
  const std::string out = g_.fresh(base);
  if (p == 1) {
    auto* n = g_.node("BatchNormalization",
                      {x.name, g_.initializer(base + "/gamma", gamma, {c}), g_.initializer(base + "/beta", beta, {c}),
                       g_.initializer(base + "/moving_mean", mean, {c}),
                       g_.initializer(base + "/moving_variance", var, {c})},
                      {out}, out);
    onnx_export::set_float(n, "epsilon", eps);
    return {out, x.dims, x.layout};
  }
  // Another axis: y = x * scale + shift, scale = gamma / sqrt(var + eps), shift = beta - mean * scale,
  // shaped [C, 1, ...] to broadcast over the axes after p.
  std::vector<float> scale(c), shift(c);
  for (std::int64_t i = 0; i < c; ++i) {
    scale[i] = gamma.data<float>()[i] / std::sqrt(var.data<float>()[i] + eps);
    shift[i] = beta.data<float>()[i] - mean.data<float>()[i] * scale[i];
  }
  std::vector<std::int64_t> dims{c};
  for (int i = p + 1; i < rank; ++i) dims.push_back(1);
  const std::string scaled = g_.fresh(base + "/Mul");
  g_.node("Mul", {x.name, g_.initializer_floats(base + "/scale", scale, dims)}, {scaled}, scaled);
  g_.node("Add", {scaled, g_.initializer_floats(base + "/shift", shift, dims)}, {out}, out);
  return {out, x.dims, x.layout};
}

Value Exporter::emit_layer(const layers::Layer& layer, const std::vector<Value>& inputs, const std::string& prefix) {
  const std::string cls = layer.class_name();
  if (dynamic_cast<const Model*>(&layer)) return emit_layer_ops(layer, inputs, prefix);  // its layers follow masks
  std::string mask;
  for (const Value& v : inputs)
    if (mask.empty()) mask = v.mask_from;
  if (!mask.empty() && consumes_mask(cls))
    fail(layer, "its input carries the Keras mask of layer '" + mask +
                    "' (Embedding mask_zero), which the ONNX export does not express; export a model without "
                    "mask_zero (padding ids then count as tokens)");
  Value out = emit_layer_ops(layer, inputs, prefix);
  const bool makes = cls == "Embedding" && json_of(layer.get_config()).value("mask_zero", false);
  out.mask_from = makes ? layer.name() : passes_mask(cls) ? mask : "";
  return out;
}

Value Exporter::emit_layer_ops(const layers::Layer& layer, const std::vector<Value>& inputs,
                               const std::string& prefix) {
  const std::string cls = layer.class_name();
  const std::string base = prefix + layer.name();
  if (const auto* m = dynamic_cast<const Model*>(&layer)) {
    std::vector<Value> outs = emit_model(*m, inputs, base + "/");
    if (outs.size() != 1) fail(layer, "a nested model with several outputs is not supported");
    return outs[0];
  }
  const Config layer_config = layer.get_config();
  const json& config = json_of(layer_config);
  const layers::ConfigReader r(layer_config, cls);
  if (cls == "Dropout" || cls == "InputLayer") {
    const Value x = single(layer, inputs);
    const std::string out = g_.fresh(base);
    g_.node("Identity", {x.name}, {out}, out);  // Dropout: the identity in inference mode
    return {out, x.dims, x.layout, x.elem_type};
  }
  if (cls == "Dense") {
    const Value x = g_.keras(single(layer, inputs));
    const Tensor w = weight(layer, "kernel");
    const std::vector<std::int64_t> out = out_dims(layer, x);
    std::string y = g_.fresh(base + "/MatMul");
    g_.node("MatMul", {x.name, g_.initializer(base + "/kernel", w, w.shape().to_vector())}, {y}, y);
    if (r.boolean("use_bias", true)) {
      const Tensor b = weight(layer, "bias");
      const std::string biased = g_.fresh(base + "/BiasAdd");
      g_.node("Add", {y, g_.initializer(base + "/bias", b, b.shape().to_vector())}, {biased}, biased);
      y = biased;
    }
    return activation(layer, r.string("activation", "linear"), {y, out, Layout::kKeras}, base);
  }
  if (cls == "Activation") return activation(layer, r.string("activation", "linear"), single(layer, inputs), base);
  if (cls == "LeakyReLU") {
    const Value x = single(layer, inputs);
    const std::string out = g_.fresh(base);
    onnx_export::set_float(g_.node("LeakyRelu", {x.name}, {out}, out), "alpha",
                           static_cast<float>(r.number("alpha", 0.3)));
    return {out, x.dims, x.layout};
  }
  if (cls == "BatchNormalization") return emit_batch_norm(layer, r, single(layer, inputs), base);
  if (cls == "SimpleRNN" || cls == "LSTM" || cls == "GRU" || cls == "Bidirectional")
    return onnx_export::emit_recurrent(g_, file_, layer, config, single(layer, inputs), base);
  if (onnx_export::is_sequence_layer(cls)) return onnx_export::emit_sequence_layer(g_, file_, layer, config, inputs, base);
  if (cls == "Conv2D" || cls == "Conv2DTranspose") {
    const Value x = single(layer, inputs);
    return emit_conv(layer, r, x, base, cls == "Conv2DTranspose", out_dims(layer, x));
  }
  if (cls == "MaxPooling2D" || cls == "AveragePooling2D") {
    const Value x = g_.nchw(single(layer, inputs));
    const auto k = pair_of(r, "pool_size", 2);
    const auto s = r.has("strides") ? pair_of(r, "strides", 1) : k;
    const std::vector<std::int64_t> out = out_dims(layer, x);
    const bool same = r.string("padding", "valid") == "same";
    const auto [t, b] = tf_pads(x.dims[0], out[0], s[0], k[0], same);
    const auto [l, rt] = tf_pads(x.dims[1], out[1], s[1], k[1], same);
    const std::string y = g_.fresh(base);
    auto* n = g_.node(cls == "MaxPooling2D" ? "MaxPool" : "AveragePool", {x.name}, {y}, y);
    onnx_export::set_ints(n, "kernel_shape", k);
    onnx_export::set_ints(n, "strides", s);
    onnx_export::set_ints(n, "pads", {t, l, b, rt});
    return {y, out, Layout::kNchw};
  }
  if (cls == "GlobalAveragePooling2D" || cls == "GlobalMaxPooling2D") {
    const Value x = g_.nchw(single(layer, inputs));
    const std::string pooled = g_.fresh(base + "/pool");
    g_.node(cls == "GlobalMaxPooling2D" ? "GlobalMaxPool" : "GlobalAveragePool", {x.name}, {pooled}, pooled);
    if (r.boolean("keepdims", false)) return {pooled, {1, 1, x.dims[2]}, Layout::kNchw};
    const std::string y = g_.fresh(base);
    onnx_export::set_int(g_.node("Flatten", {pooled}, {y}, y), "axis", 1);
    return {y, {x.dims[2]}, Layout::kKeras};
  }
  if (cls == "UpSampling2D") {
    const Value x = g_.nchw(single(layer, inputs));
    const auto size = pair_of(r, "size", 2);
    const std::string y = g_.fresh(base);
    const std::string scales = g_.initializer_floats(
        base + "/scales", {1.0f, 1.0f, static_cast<float>(size[0]), static_cast<float>(size[1])}, {4});
    auto* n = g_.node("Resize", {x.name, "", scales}, {y}, y);
    onnx_export::set_string(n, "mode", "nearest");
    onnx_export::set_string(n, "coordinate_transformation_mode", "asymmetric");
    onnx_export::set_string(n, "nearest_mode", "floor");
    return {y, out_dims(layer, x), Layout::kNchw};
  }
  if (cls == "ZeroPadding2D") {
    const Value x = g_.nchw(single(layer, inputs));
    const json& p = config.at("padding");
    const std::int64_t t = p[0][0], b = p[0][1], l = p[1][0], rt = p[1][1];
    const std::string y = g_.fresh(base);
    g_.node("Pad", {x.name, g_.initializer_ints(base + "/pads", {0, 0, t, l, 0, 0, b, rt})}, {y}, y);
    return {y, out_dims(layer, x), Layout::kNchw};
  }
  if (cls == "Flatten") {
    const Value x = g_.keras(single(layer, inputs));  // Keras flattens in NHWC order
    const std::string y = g_.fresh(base);
    onnx_export::set_int(g_.node("Flatten", {x.name}, {y}, y), "axis", 1);
    return {y, out_dims(layer, x), Layout::kKeras};
  }
  if (cls == "Reshape") {
    const Value x = g_.keras(single(layer, inputs));
    const std::vector<std::int64_t> out = out_dims(layer, x);
    if (std::find(out.begin(), out.end(), 0) != out.end()) fail(layer, "a target dimension of 0");
    std::vector<std::int64_t> shape{0};  // 0: copy the batch dimension
    shape.insert(shape.end(), out.begin(), out.end());
    const std::string y = g_.fresh(base);
    g_.node("Reshape", {x.name, g_.initializer_ints(base + "/shape", shape)}, {y}, y);
    return {y, out, Layout::kKeras};
  }
  if (cls == "Add" || cls == "Multiply" || cls == "Average" || cls == "Concatenate") {
    if (inputs.size() < 2) fail(layer, "expected at least two inputs");
    const std::vector<Value> xs = g_.common_layout(inputs);
    std::vector<std::string> names;
    for (const Value& v : xs) names.push_back(v.name);
    const std::string y = g_.fresh(base);
    std::vector<std::int64_t> dims = xs[0].dims;
    if (cls == "Concatenate") {
      std::int64_t axis = r.integer("axis", -1);
      if (axis < 0) axis += xs[0].rank();
      if (axis <= 0 || axis >= xs[0].rank()) fail(layer, "axis " + std::to_string(r.integer("axis", -1)));
      dims[axis - 1] = 0;
      for (const Value& v : xs) dims[axis - 1] += v.dims[axis - 1];
      onnx_export::set_int(g_.node("Concat", names, {y}, y), "axis",
                           onnx_export::axis_in_layout(xs[0], static_cast<int>(axis)));
    } else if (cls == "Multiply") {  // Mul takes two inputs: a chain
      std::string acc = names[0];
      for (std::size_t i = 1; i < names.size(); ++i) {
        const std::string next = i + 1 == names.size() ? y : g_.fresh(base + "/Mul");
        g_.node("Mul", {acc, names[i]}, {next}, next);
        acc = next;
      }
    } else {
      g_.node(cls == "Add" ? "Sum" : "Mean", names, {y}, y);
    }
    return {y, dims, xs[0].layout};
  }
  fail(layer, "no ONNX mapping for class " + cls + " (mapped: " + kMapped + ")");
}

std::vector<Value> Exporter::emit_model(const Model& model, const std::vector<Value>& inputs,
                                        const std::string& prefix) {
  if (dynamic_cast<const Sequential*>(&model)) {
    if (inputs.size() != 1)
      throw std::invalid_argument("export_onnx: " + file_ + ": Sequential '" + model.name() + "' given " +
                                  std::to_string(inputs.size()) + " inputs");
    Value x = inputs[0];
    for (const auto& l : model.layers()) x = emit_layer(*l, {x}, prefix);
    return {x};
  }
  const auto* f = dynamic_cast<const Functional*>(&model);
  if (!f) fail(model, "only Sequential and Functional models are exported");
  const json config = json_of(f->get_config());
  std::map<std::string, const layers::Layer*> by_name;
  for (const auto& l : model.layers()) by_name[l->name()] = l.get();
  // Values by (layer, node index); a node runs once all its inputs exist (a topological order).
  std::map<std::pair<std::string, int>, Value> values;
  const json& ins = config.at("input_layers");
  if (ins.size() != inputs.size())
    throw std::invalid_argument("export_onnx: " + file_ + ": Functional '" + model.name() + "' has " +
                                std::to_string(ins.size()) + " inputs, given " + std::to_string(inputs.size()));
  for (std::size_t i = 0; i < ins.size(); ++i) values[{ins[i][0].get<std::string>(), 0}] = inputs[i];
  struct Pending {
    const layers::Layer* layer;
    int node_index;
    const json* inbound;
  };
  std::vector<Pending> pending;
  for (const json& entry : config.at("layers")) {
    const std::string name = entry.at("name").get<std::string>();
    int k = 0;
    for (const json& node : entry.at("inbound_nodes")) pending.push_back({by_name.at(name), k++, &node});
  }
  while (!pending.empty()) {
    std::vector<Pending> later;
    for (const Pending& p : pending) {
      std::vector<Value> xs;
      bool ready = true;
      // Either node form, read by the Functional reader (read_inbound_node): the call's tensors in
      // call_all's order. Call flags (masks, causal masks, attention scores, training) are not
      // exported (training=False is inference, as exported): refused rather than dropped; so are
      // initial states (the recurrent layers take one input).
      const InboundCall call =
          read_inbound_node(*p.layer, *p.inbound, "export_onnx: " + file_ + ": Functional '" + model.name() + "'");
      if (!call.flags.none() || call.flags.training == true)
        fail(*p.layer, "call arguments " + p.inbound->dump().substr(0, 160) + " are not exported");
      if (dynamic_cast<const layers::RNN*>(p.layer) || dynamic_cast<const layers::Bidirectional*>(p.layer))
        if (call.refs.size() > 1)
          fail(*p.layer, "an initial_state of " + std::to_string(call.refs.size() - 1) + " tensor(s) is not exported");
      for (const json& t : call.refs) {
        if (t[2] != 0) fail(*p.layer, "an input from output " + t[2].dump() + " of layer '" + t[0].get<std::string>() + "'");
        auto it = values.find({t[0].get<std::string>(), t[1].get<int>()});
        if (it == values.end()) {
          ready = false;
          break;
        }
        xs.push_back(it->second);
      }
      if (!ready) {
        later.push_back(p);
        continue;
      }
      const std::string node_prefix = prefix + (p.node_index > 0 ? "node" + std::to_string(p.node_index) + "/" : "");
      values[{p.layer->name(), p.node_index}] = emit_layer(*p.layer, xs, node_prefix);
    }
    if (later.size() == pending.size())
      throw std::logic_error("export_onnx: Functional '" + model.name() + "': a node's inputs never appear");
    pending = std::move(later);
  }
  std::vector<Value> outs;
  for (const json& o : config.at("output_layers")) outs.push_back(values.at({o[0].get<std::string>(), o[1].get<int>()}));
  return outs;
}

}  // namespace

void export_onnx(const Model& model, const std::string& path, const OnnxExportOptions& options) {
  if (options.opset < 13 || options.opset > 17)
    throw std::invalid_argument("export_onnx: " + path + ": opset " + std::to_string(options.opset) +
                                " is outside 13..17 (the ops used need 13; ONNX 1.12 knows up to 17)");
  model_to_config(model);  // a subclassed model without a config: std::logic_error before anything else
  onnx::ModelProto proto;
  proto.set_ir_version(kOnnxIrVersion);
  proto.set_producer_name("tapeflow");
  proto.set_producer_version("0.1.0");
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name(model.name());
  Graph g(graph, options.opset);
  Exporter e(g, path);
  std::vector<Value> inputs;
  std::vector<std::string> input_names;
  if (const auto* f = dynamic_cast<const Functional*>(&model)) {
    for (const auto& in : f->inputs()) input_names.push_back(in.node()->layer->name());
  } else {
    input_names.push_back(model.name() + "_input");
  }
  const auto dims = e.input_dims(model);
  const auto types = e.input_types(model);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int32_t type = i < types.size() ? types[i] : onnx::TensorProto::FLOAT;
    g.input(input_names.at(i), dims[i], type);
    inputs.push_back({input_names[i], dims[i], Layout::kKeras, type});
  }
  const std::vector<Value> outputs = e.emit_model(model, inputs, "");
  for (std::size_t i = 0; i < outputs.size(); ++i) g.output(outputs[i], "output_" + std::to_string(i));
  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& ex) {
    throw std::runtime_error("export_onnx: " + path + ": onnx::checker rejects the exported graph (a tapeflow bug): " +
                             ex.what());
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) throw std::runtime_error("export_onnx: " + path + ": cannot serialize the model");
  io::atomic_write_file(path, bytes);
}

}  // namespace tapeflow::models
