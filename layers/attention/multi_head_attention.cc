#include "layers/attention/multi_head_attention.h"

#include <cmath>
#include <stdexcept>

#include "layers/dropout.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/linalg_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/nn_ops.h"

namespace tapeflow::layers {
namespace {

using Dims = std::vector<std::int64_t>;

}  // namespace

MultiHeadAttention::MultiHeadAttention(MultiHeadAttentionOptions options)
    : Layer("MultiHeadAttention", options.name, options.seed, options.dtype), options_(std::move(options)) {
  if (options_.num_heads < 1 || options_.key_dim < 1)
    throw std::invalid_argument(describe() + ": num_heads and key_dim must be >= 1, got " +
                                std::to_string(options_.num_heads) + " and " + std::to_string(options_.key_dim));
  if (options_.value_dim < 0 || options_.output_shape < 0)
    throw std::invalid_argument(describe() + ": value_dim and output_shape must be >= 0 (0: default), got " +
                                std::to_string(options_.value_dim) + " and " + std::to_string(options_.output_shape));
  if (!(options_.dropout >= 0 && options_.dropout < 1))
    throw std::invalid_argument(describe() + ": dropout must be in [0, 1), got " + std::to_string(options_.dropout));
  value_dim_ = options_.value_dim ? options_.value_dim : options_.key_dim;
  if (options_.dropout > 0)
    dropout_ = track_layer(std::make_shared<Dropout>(DropoutOptions{
        .rate = options_.dropout, .seed = options_.seed, .name = name() + "_dropout", .dtype = options_.dtype}));
}

Generator* MultiHeadAttention::training_generator() { return nullptr; }  // the Dropout sublayer's is tracked

void MultiHeadAttention::build_for(const Shape& q, const Shape& v, const Shape& k) {
  for (const Shape* s : {&q, &v, &k})
    if (s->rank() != 3)
      throw std::invalid_argument(describe() + ": expected query, value and key of rank 3 [batch, steps, dim], got " +
                                  q.to_string() + ", " + v.to_string() + ", " + k.to_string());
  const std::int64_t h = options_.num_heads, kd = options_.key_dim;
  output_dim_ = options_.output_shape ? options_.output_shape : q[2];
  wq_ = add_weight("query/kernel", {q[2], h, kd}, options_.kernel_initializer);
  if (options_.use_bias) bq_ = add_weight("query/bias", {h, kd}, options_.bias_initializer);
  wk_ = add_weight("key/kernel", {k[2], h, kd}, options_.kernel_initializer);
  if (options_.use_bias) bk_ = add_weight("key/bias", {h, kd}, options_.bias_initializer);
  wv_ = add_weight("value/kernel", {v[2], h, value_dim_}, options_.kernel_initializer);
  if (options_.use_bias) bv_ = add_weight("value/bias", {h, value_dim_}, options_.bias_initializer);
  wo_ = add_weight("attention_output/kernel", {h, value_dim_, output_dim_}, options_.kernel_initializer);
  if (options_.use_bias) bo_ = add_weight("attention_output/bias", {output_dim_}, options_.bias_initializer);
  Layer::build(q);
}

void MultiHeadAttention::build(const std::vector<Shape>& shapes) {
  if (shapes.size() < 2 || shapes.size() > 3)
    throw std::invalid_argument(describe() + ": expects [query, value] or [query, value, key], got " +
                                std::to_string(shapes.size()) + " inputs");
  build_for(shapes[0], shapes[1], shapes.size() == 3 ? shapes[2] : shapes[1]);
}

void MultiHeadAttention::build(const Shape& s) { build_for(s, s, s); }

Shape MultiHeadAttention::compute_output_shape(const Shape& s) const {
  Shape out = s;
  if (out.rank() >= 1) out[out.rank() - 1] = options_.output_shape ? options_.output_shape : s.dim(-1);
  return out;
}

Tensor MultiHeadAttention::project(const Tensor& x, const Variable& kernel, const Variable& bias, std::int64_t size,
                                   const char* what) const {
  const Shape& ks = kernel.shape();
  if (x.rank() != 3 || x.shape()[2] != ks[0])
    throw std::invalid_argument(describe() + ": expected " + what + " [batch, steps, " + std::to_string(ks[0]) +
                                "] (the built " + what + " kernel is " + ks.to_string() + "), got shape " +
                                x.shape().to_string());
  const std::int64_t b = x.shape()[0], l = x.shape()[1], h = options_.num_heads;
  Tensor y = matmul(reshape(x, Dims{b * l, ks[0]}), reshape(kernel.read(), Dims{ks[0], h * size}));
  if (bias.defined()) y = y + reshape(bias.read(), Dims{h * size});
  return transpose(reshape(y, Dims{b, l, h, size}), {0, 2, 1, 3});
}

std::pair<Tensor, Tensor> MultiHeadAttention::attend(const Tensor& query_in, const Tensor& value_in,
                                                     const AttentionCall& args, bool training) {
  if (!built())
    build(std::vector<Shape>{query_in.shape(), value_in.shape(), args.key.defined() ? args.key.shape() : value_in.shape()});
  const Tensor query = begin_call(query_in);
  auto cast_like = [&](const Tensor& t) {
    return is_floating(t.dtype()) && t.dtype() != dtype() ? cast(t, dtype()) : t;
  };
  const Tensor value = cast_like(value_in);
  const Tensor key = args.key.defined() ? cast_like(args.key) : value;
  if (query.rank() != 3 || value.rank() != 3 || key.rank() != 3 || value.shape()[0] != query.shape()[0] ||
      key.shape()[0] != query.shape()[0] || key.shape()[1] != value.shape()[1])
    throw std::invalid_argument(describe() + ": expected query [B, T, dq], value [B, S, dv] and key [B, S, dk], got " +
                                query.shape().to_string() + ", " + value.shape().to_string() + ", " +
                                key.shape().to_string());
  const std::int64_t b = query.shape()[0], t = query.shape()[1], s = value.shape()[1], h = options_.num_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(options_.key_dim));
  const Tensor q = project(query, wq_, bq_, options_.key_dim, "query") * scale;
  const Tensor k = project(key, wk_, bk_, options_.key_dim, "key");
  const Tensor v = project(value, wv_, bv_, value_dim_, "value");
  const Tensor scores = matmul(q, k, false, true);  // [B, H, T, S]
  Tensor mask;
  if (args.attention_mask.defined()) {
    const Shape& ms = args.attention_mask.shape();
    const bool ok = (ms.rank() == 3 && ms[0] == b && ms[1] == t && ms[2] == s) || (ms.rank() == 2 && ms[0] == t && ms[1] == s);
    if (!ok)
      throw std::invalid_argument(describe() + ": attention_mask must be [B, T, S] = [" + std::to_string(b) + ", " +
                                  std::to_string(t) + ", " + std::to_string(s) + "] (or [T, S]), got " +
                                  ms.to_string());
    const Tensor m = args.attention_mask.dtype() == DType::kBool
                         ? args.attention_mask
                         : greater(args.attention_mask, scalar_like(args.attention_mask, 0.5));
    mask = ms.rank() == 3 ? reshape(m, Dims{b, 1, t, s}) : m;
  }
  if (args.use_causal_mask) {
    Tensor causal = Tensor::empty(Shape{t, s}, DType::kBool);
    bool* tri = causal.mutable_data<bool>();
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t j = 0; j < s; ++j) tri[i * s + j] = i >= j;
    mask = mask.defined() ? logical_and(mask, causal) : causal;
  }
  const Tensor probs = mask.defined() ? masked_softmax(scores, mask, -1) : softmax(scores, -1);
  const Tensor used = dropout_ && training ? (*dropout_)(probs, true) : probs;
  const Tensor ctx = transpose(matmul(used, v), {0, 2, 1, 3});  // [B, T, H, value_dim]
  const Shape& os = wo_.shape();
  Tensor out = matmul(reshape(ctx, Dims{b * t, h * value_dim_}), reshape(wo_.read(), Dims{h * value_dim_, os[2]}));
  if (bo_.defined()) out = out + bo_.read();
  return {reshape(out, Dims{b, t, os[2]}), probs};
}

Tensor MultiHeadAttention::call(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.size() < 2 || inputs.size() > 3)
    throw std::invalid_argument(describe() + ": expects [query, value] or [query, value, key], got " +
                                std::to_string(inputs.size()) + " inputs");
  return attend(inputs[0], inputs[1], {.key = inputs.size() == 3 ? inputs[2] : Tensor()}, training).first;
}

std::vector<Tensor> MultiHeadAttention::call_outputs(const std::vector<Tensor>& inputs, const CallFlags& flags,
                                                     bool training) {
  CallFlags rest = flags;
  rest.use_causal_mask = rest.return_attention_scores = rest.attention_mask = false;
  refuse_call_flags(rest);
  const std::size_t n = inputs.size() - (flags.attention_mask ? 1 : 0);
  if (inputs.empty() || n == 0 || n > 3)
    throw std::invalid_argument(describe() + ": expects [query], [query, value] or [query, value, key]" +
                                (flags.attention_mask ? std::string(" and the attention_mask") : std::string()) +
                                ", got " + std::to_string(inputs.size()) + " inputs");
  const Tensor& value = n > 1 ? inputs[1] : inputs[0];
  auto [out, scores] = attend(inputs[0], value,
                              {.key = n == 3 ? inputs[2] : Tensor(),
                               .attention_mask = flags.attention_mask ? inputs.back() : Tensor(),
                               .use_causal_mask = flags.use_causal_mask},
                              training);
  if (flags.return_attention_scores) return {out, scores};
  return {out};
}

Tensor MultiHeadAttention::call(const Tensor& inputs, bool training) { return attend(inputs, inputs, {}, training).first; }

Config MultiHeadAttention::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["num_heads"] = options_.num_heads;
  c["key_dim"] = options_.key_dim;
  c["value_dim"] = value_dim_;
  c["dropout"] = options_.dropout;
  c["use_bias"] = options_.use_bias;
  c["output_shape"] = options_.output_shape ? nlohmann::json(options_.output_shape) : nlohmann::json(nullptr);
  c["attention_axes"] = nullptr;
  c["kernel_initializer"] = serialize_initializer(options_.kernel_initializer);
  c["bias_initializer"] = serialize_initializer(options_.bias_initializer);
  for (const char* k : {"kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
                        "bias_constraint"})
    c[k] = nullptr;
  c["seed"] = options_.seed ? nlohmann::json(*options_.seed) : nlohmann::json(nullptr);
  return config;
}

std::shared_ptr<MultiHeadAttention> MultiHeadAttention::from_config(const Config& config) {
  ConfigReader r(config, "MultiHeadAttention");
  for (const char* k : {"kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
                        "bias_constraint"})
    r.require_null(k);
  // Keras 3 writes the axes it built for, [1] for rank-3 inputs: the one axis tapeflow attends over.
  if (r.has("attention_axes") && !json_of(r.config()).at("attention_axes").is_null()) {
    const auto& j = json_of(r.config()).at("attention_axes");
    const bool axis_1 = j.is_array() ? r.integers("attention_axes") == std::vector<std::int64_t>{1}
                                     : r.integer("attention_axes") == 1;
    if (!axis_1) r.fail("attention_axes", "only null or [1] (attention over the steps of [B, T, d] inputs) is supported");
  }
  std::int64_t out = 0;
  if (r.has("output_shape")) {
    const auto& j = json_of(r.config()).at("output_shape");
    if (j.is_array()) {
      const auto dims = r.integers("output_shape");
      if (dims.size() != 1) r.fail("output_shape", "only a last-axis size is supported");
      out = dims[0];
    } else {
      out = r.integer("output_shape");
    }
  }
  MultiHeadAttentionOptions o{.num_heads = r.integer("num_heads"),
                              .key_dim = r.integer("key_dim"),
                              .value_dim = r.has("value_dim") ? r.integer("value_dim") : 0,
                              .dropout = r.number("dropout", 0.0),
                              .use_bias = r.boolean("use_bias", true),
                              .output_shape = out,
                              .kernel_initializer = r.initializer("kernel_initializer", "glorot_uniform"),
                              .bias_initializer = r.initializer("bias_initializer", "zeros"),
                              .name = r.name(),
                              .seed = r.seed("seed"),
                              .dtype = r.dtype()};
  try {
    return r.finish(std::make_shared<MultiHeadAttention>(std::move(o)));
  } catch (const std::invalid_argument& e) {
    r.fail("num_heads/key_dim", e.what());
  }
}

}  // namespace tapeflow::layers
