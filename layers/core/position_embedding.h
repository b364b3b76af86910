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

struct PositionEmbeddingOptions {
  std::int64_t sequence_length = 0;
  Initializer initializer = "glorot_uniform";
  std::string name = "";
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<DType> dtype = std::nullopt;
};

class PositionEmbedding : public Layer {
 public:
  explicit PositionEmbedding(PositionEmbeddingOptions options);
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  nlohmann::json get_config() const override;  // sequence_length, initializer
  static std::shared_ptr<PositionEmbedding> from_config(const nlohmann::json& config);

 private:
  void check(const Shape& s) const;
  PositionEmbeddingOptions options_;
  Variable embeddings_;
};

}  // namespace tapeflow::layers
