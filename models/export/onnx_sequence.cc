// export_onnx's sequence and attention layers (models/export/onnx.h): Embedding -> Gather,
// PositionEmbedding -> Expand of its table, LayerNormalization -> LayerNormalization (opset 17, trailing
// axes; else composed), RMSNormalization composed, MultiHeadAttention -> MatMul / Reshape / Transpose /
// Softmax, Conv1D -> Conv, MaxPooling1D / AveragePooling1D -> MaxPool / AveragePool (1-D, on NCW),
// GlobalAveragePooling1D / GlobalMaxPooling1D -> ReduceMean / ReduceMax, Permute -> Transpose.
#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "layers/serialization.h"
#include "tape/core/internal/config_json.h"
#include "layers/internal/serialization_json.h"
#include "models/export/internal/onnx_graph.h"
#include "tape/ops/array_ops.h"

namespace tapeflow::models::onnx_export {

namespace {

using Dims = std::vector<std::int64_t>;

const std::set<std::string>& sequence_classes() {
  static const std::set<std::string> classes = {
      "Embedding",        "PositionEmbedding", "LayerNormalization",     "RMSNormalization",   "MultiHeadAttention",
      "Conv1D",           "MaxPooling1D",      "AveragePooling1D",       "GlobalAveragePooling1D",
      "GlobalMaxPooling1D", "Permute"};
  return classes;
}

// A 1-element list or a number of a Keras 1-D config ("kernel_size": [3]); `fallback` when absent.
std::int64_t one_of(const layers::ConfigReader& r, const std::string& key, std::int64_t fallback) {
  if (!r.has(key)) return fallback;
  if (json_of(r.config()).at(key).is_number_integer()) return r.integer(key);
  const Dims v = r.integers(key);
  if (v.size() != 1) r.fail(key, "expected one integer");
  return v[0];
}

// The normalized axes of a normalization layer's config ("axis": n or [n, ...]) for a rank-`rank`
// input: non-negative, sorted. Errors: fail() for the batch axis (ONNX normalizes per example here).
std::vector<std::int64_t> norm_axes(const std::string& file, const layers::Layer& layer, const nlohmann::json& config,
                                    int rank) {
  const nlohmann::json& a = config.at("axis");
  std::vector<std::int64_t> axes;
  for (const nlohmann::json& v : a.is_array() ? a : nlohmann::json::array({a})) {
    std::int64_t x = v.get<std::int64_t>();
    if (x < 0) x += rank;
    if (x <= 0 || x >= rank) fail(file, layer, "axis " + v.dump() + " of a rank-" + std::to_string(rank) +
                                                   " input is not a feature axis");
    axes.push_back(x);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

// The shape a per-feature weight over `axes` broadcasts with (Keras layout, batch axis 0 left
// out): from the first normalized axis on, the axis's size where normalized, else 1.
Dims broadcast_dims(const Value& x, const std::vector<std::int64_t>& axes) {
  Dims d;
  for (std::int64_t a = axes.front(); a < x.rank(); ++a)
    d.push_back(std::find(axes.begin(), axes.end(), a) != axes.end() ? x.dims[a - 1] : 1);
  return d;
}

std::string binary(Graph& g, const std::string& op, const std::string& a, const std::string& b,
                   const std::string& base) {
  const std::string out = g.fresh(base);
  g.node(op, {a, b}, {out}, out);
  return out;
}

std::string unary(Graph& g, const std::string& op, const std::string& a, const std::string& base) {
  const std::string out = g.fresh(base);
  g.node(op, {a}, {out}, out);
  return out;
}

std::string reduce_mean(Graph& g, const std::string& x, const std::vector<std::int64_t>& axes, const std::string& base) {
  const std::string out = g.fresh(base);
  auto* n = g.node("ReduceMean", {x}, {out}, out);  // opset 13..17: axes an attribute
  set_ints(n, "axes", axes);
  set_int(n, "keepdims", 1);
  return out;
}

// x · 1 / sqrt(m + epsilon) (m: a mean over the normalized axes, kept).
std::string times_rsqrt(Graph& g, const std::string& x, const std::string& m, float epsilon, const std::string& base) {
  const std::string shifted = binary(g, "Add", m, g.initializer_floats(base + "/epsilon", {epsilon}, {}), base + "/var_eps");
  return binary(g, "Mul", x, unary(g, "Reciprocal", unary(g, "Sqrt", shifted, base + "/std"), base + "/rstd"),
                base + "/normalized");
}

Value emit_layer_norm(Graph& g, const std::string& file, const layers::Layer& layer, const layers::ConfigReader& r,
                      const Value& input, const std::string& base) {
  const Value x = g.keras(input);
  const std::vector<std::int64_t> axes = norm_axes(file, layer, json_of(r.config()), x.rank());
  const float eps = static_cast<float>(r.number("epsilon", 1e-3));
  const bool scale = r.boolean("scale", true), center = r.boolean("center", true);
  const Dims pd = broadcast_dims(x, axes);
  bool trailing = true;
  for (std::size_t i = 0; i < axes.size(); ++i)
    trailing = trailing && axes[i] == x.rank() - static_cast<std::int64_t>(axes.size() - i);
  std::int64_t n = 1;
  for (std::int64_t d : pd) n *= d;
  const Tensor gamma = scale ? layer_weight(file, layer, "gamma") : ones(Shape{n});
  const std::string out = g.fresh(base);
  if (trailing && g.opset() >= 17) {
    std::vector<std::string> ins = {x.name, g.initializer(base + "/gamma", gamma, pd)};
    if (center) ins.push_back(g.initializer(base + "/beta", layer_weight(file, layer, "beta"), pd));
    auto* node = g.node("LayerNormalization", ins, {out}, out);
    set_int(node, "axis", axes.front());
    set_float(node, "epsilon", eps);
    return {out, x.dims, Layout::kKeras};
  }
  // Composed (other axes, or opset < 17): (x - mean) / sqrt(var + eps) · gamma + beta, biased variance.
  const std::string d = binary(g, "Sub", x.name, reduce_mean(g, x.name, axes, base + "/mean"), base + "/centered");
  const std::string var = reduce_mean(g, binary(g, "Mul", d, d, base + "/squared"), axes, base + "/variance");
  std::string y = times_rsqrt(g, d, var, eps, base);
  if (scale) y = binary(g, "Mul", y, g.initializer(base + "/gamma", gamma, pd), base + "/scaled");
  if (center) {
    g.node("Add", {y, g.initializer(base + "/beta", layer_weight(file, layer, "beta"), pd)}, {out}, out);
    return {out, x.dims, Layout::kKeras};
  }
  g.node("Identity", {y}, {out}, out);
  return {out, x.dims, Layout::kKeras};
}

// RMSNormalization: x · 1 / sqrt(mean(x², axes) + epsilon) · scale (Keras 3's ops.rms_normalization).
Value emit_rms_norm(Graph& g, const std::string& file, const layers::Layer& layer, const layers::ConfigReader& r,
                    const Value& input, const std::string& base) {
  const Value x = g.keras(input);
  const std::vector<std::int64_t> axes = norm_axes(file, layer, json_of(r.config()), x.rank());
  const std::string ms = reduce_mean(g, binary(g, "Mul", x.name, x.name, base + "/squared"), axes, base + "/mean_square");
  const std::string y = times_rsqrt(g, x.name, ms, static_cast<float>(r.number("epsilon", 1e-6)), base);
  const std::string out = g.fresh(base);
  g.node("Mul", {y, g.initializer(base + "/scale", layer_weight(file, layer, "scale"), broadcast_dims(x, axes))}, {out},
         out);
  return {out, x.dims, Layout::kKeras};
}

// x [B, L, d] -> [B, heads, L, size] (perm {0, 2, 1, 3}) or, for the key, [B, heads, size, L]
// (perm {0, 2, 3, 1}), through kernel [d, heads, size] (+ bias [heads, size]).
std::string project(Graph& g, const std::string& file, const layers::Layer& layer, const Value& x,
                    const std::string& what, bool use_bias, const std::vector<std::int64_t>& perm,
                    const std::string& base) {
  const Tensor k = layer_weight(file, layer, what + "/kernel");
  const std::int64_t d = k.shape()[0], heads = k.shape()[1], size = k.shape()[2];
  if (x.dims.size() != 2 || x.dims[1] != d)
    fail(file, layer, "expected " + what + " [batch, steps, " + std::to_string(d) + "]");
  const std::string b = base + "/" + what;
  std::string y = binary(g, "MatMul", x.name, g.initializer(b + "/kernel", k, {d, heads * size}), b + "/MatMul");
  if (use_bias)
    y = binary(g, "Add", y, g.initializer(b + "/bias", layer_weight(file, layer, what + "/bias"), {heads * size}),
               b + "/BiasAdd");
  y = binary(g, "Reshape", y, g.initializer_ints(b + "/heads", {0, 0, heads, size}), b + "/heads");
  const std::string out = g.fresh(b + "/Transpose");
  set_ints(g.node("Transpose", {y}, {out}, out), "perm", perm);
  return out;
}

// MultiHeadAttention on query [B, T, dq], value [B, S, dv], key (default value): q = (query·Wq + bq)
// / sqrt(key_dim) as [B, h, T, kd]; scores q kᵀ [B, h, T, S]; Softmax over S; · v [B, h, S, vd] ->
// [B, T, h·vd] · Wo [h·vd, out] + bo. A Functional node carries no attention_mask or causal mask
// (models/functional.cc refuses them), and a Keras mask on the inputs is refused before this.
Value emit_attention(Graph& g, const std::string& file, const layers::Layer& layer, const layers::ConfigReader& r,
                     const std::vector<Value>& inputs, const std::string& base) {
  if (inputs.empty() || inputs.size() > 3)
    fail(file, layer, "expected [query, value] or [query, value, key], got " + std::to_string(inputs.size()) + " inputs");
  const Value q = g.keras(inputs[0]);
  const Value v = inputs.size() > 1 ? g.keras(inputs[1]) : q;
  const Value k = inputs.size() > 2 ? g.keras(inputs[2]) : v;
  for (const Value* t : {&q, &v, &k})
    if (t->rank() != 3) fail(file, layer, "expected rank-3 query, value and key [batch, steps, dim]");
  const bool use_bias = r.boolean("use_bias", true);
  const Tensor wq = layer_weight(file, layer, "query/kernel");
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(wq.shape()[2])));
  const std::string qh = binary(g, "Mul", project(g, file, layer, q, "query", use_bias, {0, 2, 1, 3}, base),
                                g.initializer_floats(base + "/scale", {scale}, {}), base + "/query/scaled");
  const std::string kt = project(g, file, layer, k, "key", use_bias, {0, 2, 3, 1}, base);
  const std::string vh = project(g, file, layer, v, "value", use_bias, {0, 2, 1, 3}, base);
  const std::string scores = binary(g, "MatMul", qh, kt, base + "/scores");
  const std::string probs = g.fresh(base + "/probabilities");
  set_int(g.node("Softmax", {scores}, {probs}, probs), "axis", -1);
  const std::string ctx = binary(g, "MatMul", probs, vh, base + "/context");
  const std::string ctx_t = g.fresh(base + "/context_batch_major");
  set_ints(g.node("Transpose", {ctx}, {ctx_t}, ctx_t), "perm", {0, 2, 1, 3});
  const Tensor wo = layer_weight(file, layer, "attention_output/kernel");  // [h, vd, out]
  const std::int64_t hv = wo.shape()[0] * wo.shape()[1], out_dim = wo.shape()[2];
  const std::string merged =
      binary(g, "Reshape", ctx_t, g.initializer_ints(base + "/merge_heads", {0, 0, hv}), base + "/merged");
  std::string y = binary(g, "MatMul", merged, g.initializer(base + "/attention_output/kernel", wo, {hv, out_dim}),
                         base + "/attention_output/MatMul");
  const std::string out = g.fresh(base);
  if (use_bias) {
    g.node("Add", {y, g.initializer(base + "/attention_output/bias", layer_weight(file, layer, "attention_output/bias"),
                                    {out_dim})},
           {out}, out);
  } else {
    g.node("Identity", {y}, {out}, out);
  }
  return {out, {q.dims[0], out_dim}, Layout::kKeras};
}

// Conv1D on NCW: kernel [k, C, F] -> W [F, C, k]; "same" pads as TF, "causal" (k - 1)·d on the left.
Value emit_conv1d(Graph& g, const std::string& file, const layers::Layer& layer, const layers::ConfigReader& r,
                  const Value& input, const std::string& base) {
  if (input.rank() != 3) fail(file, layer, "expected an input [batch, steps, channels]");
  const Value x = g.nchw(input);
  const std::int64_t k = one_of(r, "kernel_size", 1), s = one_of(r, "strides", 1), d = one_of(r, "dilation_rate", 1);
  if (r.integer("groups", 1) != 1) fail(file, layer, "groups " + std::to_string(r.integer("groups", 1)));
  const std::string padding = r.string("padding", "valid");
  const Tensor w = tapeflow::transpose(layer_weight(file, layer, "kernel"), {2, 1, 0});
  const std::int64_t filters = w.shape()[0], eff = (k - 1) * d + 1;
  const std::int64_t steps = padding == "valid" ? (x.dims[0] - eff) / s + 1 : (x.dims[0] + s - 1) / s;
  std::vector<std::string> ins = {x.name, g.initializer(base + "/kernel", w, w.shape().to_vector())};
  if (r.boolean("use_bias", true)) {
    const Tensor b = layer_weight(file, layer, "bias");
    ins.push_back(g.initializer(base + "/bias", b, b.shape().to_vector()));
  }
  const auto [begin, end] = padding == "causal" ? std::pair<std::int64_t, std::int64_t>{eff - 1, 0}
                                                : tf_pads(x.dims[0], steps, s, eff, padding == "same");
  const std::string pre = g.fresh(base + "/Conv");
  auto* n = g.node("Conv", ins, {pre}, pre);
  set_ints(n, "kernel_shape", {k});
  set_ints(n, "strides", {s});
  set_ints(n, "dilations", {d});
  set_ints(n, "pads", {begin, end});
  return activation(g, file, layer, r.string("activation", "linear"), {pre, {steps, filters}, Layout::kNchw}, base);
}

Value emit_pool1d(Graph& g, const layers::Layer& layer, const layers::ConfigReader& r, const Value& input,
                  const std::string& base) {
  const Value x = g.nchw(input);
  const std::int64_t k = one_of(r, "pool_size", 2), s = one_of(r, "strides", k);
  const bool same = r.string("padding", "valid") == "same";
  const std::int64_t steps = same ? (x.dims[0] + s - 1) / s : (x.dims[0] - k) / s + 1;
  const auto [begin, end] = tf_pads(x.dims[0], steps, s, k, same);
  const std::string y = g.fresh(base);
  // AveragePool's count_include_pad 0 (the default): TF divides "same" windows by their unpadded size.
  auto* n = g.node(layer.class_name() == "MaxPooling1D" ? "MaxPool" : "AveragePool", {x.name}, {y}, y);
  set_ints(n, "kernel_shape", {k});
  set_ints(n, "strides", {s});
  set_ints(n, "pads", {begin, end});
  return {y, {steps, x.dims[1]}, Layout::kNchw};
}

}  // namespace

bool is_sequence_layer(const std::string& cls) { return sequence_classes().count(cls) > 0; }

Value emit_sequence_layer(Graph& g, const std::string& file, const layers::Layer& layer, const nlohmann::json& config,
                          const std::vector<Value>& inputs, const std::string& base) {
  const std::string cls = layer.class_name();
  const layers::ConfigReader r(to_config(config), cls);
  if (cls == "MultiHeadAttention") return emit_attention(g, file, layer, r, inputs, base);
  if (inputs.size() != 1) fail(file, layer, "expected one input, got " + std::to_string(inputs.size()));
  const Value& in = inputs[0];
  if (cls == "Embedding") {  // Gather(table [V, D], ids): float ids are cast (truncated) as tapeflow casts them
    const Value x = g.keras(in);
    std::string ids = x.name;
    if (x.elem_type == onnx::TensorProto::FLOAT) {
      ids = g.fresh(base + "/ids");
      set_int(g.node("Cast", {x.name}, {ids}, ids), "to", onnx::TensorProto::INT64);
    }
    const Tensor table = layer_weight(file, layer, "embeddings");
    const std::string out = g.fresh(base);
    set_int(g.node("Gather", {g.initializer(base + "/embeddings", table, table.shape().to_vector()), ids}, {out}, out),
            "axis", 0);
    Dims dims = x.dims;
    dims.push_back(table.shape()[1]);
    return {out, dims, Layout::kKeras};
  }
  if (cls == "PositionEmbedding") {  // the first `steps` rows of the table, expanded to the input's shape
    const Value x = g.keras(in);
    if (x.rank() != 3) fail(file, layer, "expected an input [batch, steps, features]");
    const Tensor table = layer_weight(file, layer, "embeddings");
    if (table.shape()[0] < x.dims[0] || table.shape()[1] != x.dims[1])
      fail(file, layer, "input steps and features [" + std::to_string(x.dims[0]) + ", " + std::to_string(x.dims[1]) +
                            "] do not fit the table " + table.shape().to_string());
    const Tensor rows = tapeflow::slice(table, {0, 0}, {x.dims[0], x.dims[1]});
    const std::string shape = unary(g, "Shape", x.name, base + "/shape");
    const std::string out = g.fresh(base);
    g.node("Expand", {g.initializer(base + "/embeddings", rows, {x.dims[0], x.dims[1]}), shape}, {out}, out);
    return {out, x.dims, Layout::kKeras};
  }
  if (cls == "LayerNormalization") return emit_layer_norm(g, file, layer, r, in, base);
  if (cls == "RMSNormalization") return emit_rms_norm(g, file, layer, r, in, base);
  if (cls == "Conv1D") return emit_conv1d(g, file, layer, r, in, base);
  if (cls == "MaxPooling1D" || cls == "AveragePooling1D") {
    if (in.rank() != 3) fail(file, layer, "expected an input [batch, steps, channels]");
    return emit_pool1d(g, layer, r, in, base);
  }
  if (cls == "GlobalAveragePooling1D" || cls == "GlobalMaxPooling1D") {  // over the steps, in either layout
    if (in.rank() != 3) fail(file, layer, "expected an input [batch, steps, channels]");
    const bool keep = r.boolean("keepdims", false);
    const std::string out = g.fresh(base);
    auto* n = g.node(cls == "GlobalMaxPooling1D" ? "ReduceMax" : "ReduceMean", {in.name}, {out}, out);
    set_ints(n, "axes", {axis_in_layout(in, 1)});
    set_int(n, "keepdims", keep ? 1 : 0);
    if (keep) return {out, {1, in.dims[1]}, in.layout};
    return {out, {in.dims[1]}, Layout::kKeras};
  }
  if (cls == "Permute") {
    const Value x = g.keras(in);
    Dims perm{0}, dims;
    for (const nlohmann::json& d : config.at("dims")) {
      const std::int64_t a = d.get<std::int64_t>();
      if (a < 1 || a >= x.rank()) fail(file, layer, "dims entry " + d.dump() + " is not an axis of the input");
      perm.push_back(a);
      dims.push_back(x.dims[a - 1]);
    }
    if (static_cast<int>(perm.size()) != x.rank()) fail(file, layer, "dims do not name every non-batch axis");
    const std::string out = g.fresh(base);
    set_ints(g.node("Transpose", {x.name}, {out}, out), "perm", perm);
    return {out, dims, Layout::kKeras};
  }
  fail(file, layer, "no ONNX mapping for class " + cls);
}

}  // namespace tapeflow::models::onnx_export
