// PositionEmbedding: a learned embedding per position of a sequence, returned broadcast to the
// inputs' shape (added to them by an Add layer, as the Keras ViT example's position embedding).
//
// Shapes:   inputs [batch, steps, features] -> [batch, steps, features] (the table, not the inputs).
// Weights:  "<name>/embeddings:0" [sequence_length, features] (initializer, default glorot_uniform
//           as keras_hub; the ViT recipe uses random_uniform U(-0.05, 0.05)).
// Facts:    inputs shorter than sequence_length take the first `steps` rows (keras_hub). `training`
//           changes nothing. The inputs get no gradient (only their shape is read).
// Errors:   std::invalid_argument for sequence_length < 1; inputs not of rank 3, longer than
//           sequence_length or with another feature size than built (names the layer and shapes).
// Ref:      keras_hub/src/layers/modeling/position_embedding.py
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// PositionEmbedding's keyword arguments, in keras_hub's order.
// Ref: keras_hub.layers.PositionEmbedding
struct PositionEmbeddingOptions {
  // The longest sequence: the table has this many rows (required, >= 1).
  std::int64_t sequence_length = 0;
  // Initializer of "embeddings" [sequence_length, features] (default glorot_uniform, as keras_hub).
  Initializer initializer = "glorot_uniform";
  // The layer's name; empty: the unique snake_case class name
  // ("position_embedding", "position_embedding_1", ...).
  std::string name = "";
  // Seeds the layer's Generator (its weight initializers); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// A learned vector per position, broadcast to the inputs' shape (add it to them with Add).
// Shapes: [batch, steps, features] -> [batch, steps, features]. Ref: keras_hub.layers.PositionEmbedding
class PositionEmbedding : public Layer {
 public:
  // Errors: std::invalid_argument for sequence_length < 1 (names the layer).
  explicit PositionEmbedding(PositionEmbeddingOptions options);
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Config get_config() const override;  // sequence_length, initializer
  // Builds a PositionEmbedding from its Keras config (sequence_length required, initializer;
  // unknown fields ignored). Errors: std::invalid_argument naming the field for a missing or
  // invalid sequence_length.
  static std::shared_ptr<PositionEmbedding> from_config(const Config& config);

 private:
  void check(const Shape& s) const;
  PositionEmbeddingOptions options_;
  Variable embeddings_;
};

}  // namespace tapeflow::layers
