// MultiHeadAttention: Keras 3's multi-head scaled dot-product attention with its weight layout.
//
// Shapes:   query [B, T, dq], value [B, S, dv], key [B, S, dk] (default: value) -> [B, T, out]
//           (out = output_shape, default dq); scores [B, num_heads, T, S].
// Weights:  "<name>/query/kernel:0" [dq, num_heads, key_dim], "query/bias" [num_heads, key_dim],
//           "key/kernel" [dk, num_heads, key_dim], "key/bias", "value/kernel" [dv, num_heads,
//           value_dim], "value/bias" [num_heads, value_dim], "attention_output/kernel" [num_heads,
//           value_dim, out], "attention_output/bias" [out] (in this order; biases only with use_bias;
//           kernel_initializer glorot_uniform with Keras's fans for rank 3, bias_initializer zeros).
// Facts:    q = query·Wq + bq, scaled by 1/sqrt(key_dim) in the layer's dtype (Keras 3.15 on JAX
//           with float64 enabled: its explicit path, taken with dropout or return_attention_scores,
//           agrees to 1e-16; its fused jax.nn.dot_product_attention path, taken otherwise, is off by
//           ~2e-8 relative in float64 models); scores = q kᵀ per head (matmul's
//           batch dims); probabilities = masked softmax over S (Keras 3's Softmax with a mask:
//           -1e9 at masked places, zeros for an entirely masked row), dropout on them when training
//           (a tracked Dropout sublayer, seeded from the layer's seed), then probabilities·v and the
//           output projection. attention_mask [B, T, S] (or [T, S], bool or numbers > 0.5 = attend)
//           and use_causal_mask (lower triangle, ANDed with the mask) as Keras. return_attention_scores
//           returns the probabilities before dropout. Called on [query, value] or [query, value, key]
//           (the Functional API passes them so; masks through attend()).
// Errors:   std::invalid_argument for num_heads or key_dim < 1, a negative value_dim / output_shape,
//           dropout outside [0, 1); at call for inputs that are not rank 3, batch or S sizes that
//           differ between query, value and key, last dims that differ from the built kernels', or
//           an attention_mask that is not [B, T, S] / [T, S] (names the layer and the shapes).
// Ref:      keras/src/layers/attention/multi_head_attention.py
#pragma once

#include <utility>

#include "layers/layer.h"

namespace tapeflow::layers {

class Dropout;

// MultiHeadAttention's keyword arguments, in Keras's order. Ref: keras.layers.MultiHeadAttention
struct MultiHeadAttentionOptions {
  // Number of attention heads (required, >= 1).
  std::int64_t num_heads = 0;
  // Size of each head's query and key projections (required, >= 1); scores scale by 1/sqrt(key_dim).
  std::int64_t key_dim = 0;
  // Size of each head's value projection (>= 0); 0: key_dim (Keras's None).
  std::int64_t value_dim = 0;
  // Dropout rate on the attention probabilities in training, in [0, 1) (default 0).
  double dropout = 0.0;
  // Whether the four projections add biases (default true).
  bool use_bias = true;
  // Last dim of the output (>= 0); 0: the query's last dim (Keras's None).
  std::int64_t output_shape = 0;
  // Initializer of the four kernels (default glorot_uniform).
  Initializer kernel_initializer = "glorot_uniform";
  // Initializer of the four biases (default zeros).
  Initializer bias_initializer = "zeros";
  // The layer's name; empty: the unique snake_case class name
  // ("multi_head_attention", "multi_head_attention_1", ...).
  std::string name = "";
  // Seeds the layer's Generator (weights, and the attention dropout's masks); empty: the
  // process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// The call arguments beside the tensors (Keras's keyword arguments).
struct AttentionCall {
  // The key [B, S, dk]; undefined: value (Keras's key=None).
  Tensor key;
  // Where query positions may attend, [B, T, S] or [T, S] (bool, or numbers > 0.5 = attend);
  // undefined: everywhere.
  Tensor attention_mask;
  // Whether position t attends only to positions <= t (lower triangle, ANDed with attention_mask;
  // default false).
  bool use_causal_mask = false;
};

// Multi-head scaled dot-product attention with Keras 3's weights.
// Shapes: query [B, T, dq], value [B, S, dv] (key [B, S, dk]) -> [B, T, output_shape or dq].
// Ref: keras.layers.MultiHeadAttention
class MultiHeadAttention : public Layer {
 public:
  // Errors: std::invalid_argument for num_heads or key_dim < 1, a negative value_dim or output_shape,
  // dropout outside [0, 1) (names the layer and the value).
  explicit MultiHeadAttention(MultiHeadAttentionOptions options);
  void build(const std::vector<Shape>& input_shapes) override;
  void build(const Shape& input_shape) override;  // self-attention shapes
  // inputs = {query, value} or {query, value, key}.
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  // Self-attention: query = value = key = inputs.
  Tensor call(const Tensor& inputs, bool training) override;
  // A Functional node's outputs: {output}, or {output, scores} with flags.return_attention_scores;
  // flags.use_causal_mask as AttentionCall's. inputs as call(inputs) (one: self-attention), then
  // the attention_mask with flags.attention_mask.
  std::vector<Tensor> call_outputs(const std::vector<Tensor>& inputs, const CallFlags& flags, bool training) override;
  // The output and the attention scores [B, num_heads, T, S] (before dropout).
  std::pair<Tensor, Tensor> attend(const Tensor& query, const Tensor& value, const AttentionCall& args = {},
                                   bool training = false);
  Shape compute_output_shape(const Shape& input_shape) const override;
  Config get_config() const override;
  // Builds a MultiHeadAttention from its Keras config (num_heads and key_dim required; output_shape
  // as n or [n]; unknown fields ignored). Errors: std::invalid_argument naming the field for
  // attention_axes, a regularizer or constraint that is not null, an output_shape of several dims,
  // and the constructor's errors.
  static std::shared_ptr<MultiHeadAttention> from_config(const Config& config);
  // The options it was made with.
  const MultiHeadAttentionOptions& options() const { return options_; }
  Generator* training_generator() override;

 private:
  void build_for(const Shape& query, const Shape& value, const Shape& key);
  // x [B, L, d] -> [B, heads, L, size] through kernel [d, heads, size] (+ bias).
  Tensor project(const Tensor& x, const Variable& kernel, const Variable& bias, std::int64_t size,
                 const char* what) const;
  MultiHeadAttentionOptions options_;
  std::int64_t value_dim_ = 0, output_dim_ = 0;
  Variable wq_, bq_, wk_, bk_, wv_, bv_, wo_, bo_;
  std::shared_ptr<Dropout> dropout_;
};

}  // namespace tapeflow::layers
