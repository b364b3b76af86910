// Embedding: maps integer ids to rows of a trainable table.
//
// Shapes:   ids [batch, ...] (any integer or integral-valued float dtype) -> [batch, ..., output_dim].
// Weights:  "<name>/embeddings:0" [input_dim, output_dim] (embeddings_initializer, default Keras 3's
//           "uniform" = random_uniform U(-0.05, 0.05)).
// Facts:    one gather (gradient: unsorted_segment_sum into the table). Float ids are cast to int32
//           (Keras casts to int32 too). compute_mask(ids) = ids != 0 when mask_zero (Keras), else
//           an undefined tensor. `training` changes nothing.
// Errors:   std::invalid_argument for input_dim or output_dim < 1, and for an id outside
//           [0, input_dim) (gather names the id and the table size).
// Ref:      keras/src/layers/core/embedding.py
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// Embedding's keyword arguments, in Keras's order. Ref: keras.layers.Embedding
struct EmbeddingOptions {
  // Size of the vocabulary: ids are in [0, input_dim) (required, >= 1).
  std::int64_t input_dim = 0;
  // Dimension of each embedding vector (required, >= 1).
  std::int64_t output_dim = 0;
  // Initializer of "embeddings" [input_dim, output_dim] (default random_uniform U(-0.05, 0.05),
  // Keras 3's "uniform").
  Initializer embeddings_initializer = "random_uniform";
  // Whether id 0 is padding: compute_mask(ids) = ids != 0 (default false).
  bool mask_zero = false;
  // The layer's name; empty: the unique snake_case class name ("embedding", "embedding_1", ...).
  std::string name = "";
  // Seeds the layer's Generator (its weight initializers); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The table's and output's dtype (float32 or float64); empty: float32, or the dtype of the
  // model it joins. The ids keep theirs.
  std::optional<DType> dtype = std::nullopt;
};

// Maps integer ids to rows of a trainable table.
// Shapes: ids [batch, ...] -> [batch, ..., output_dim]. Ref: keras.layers.Embedding
class Embedding : public Layer {
 public:
  // Errors: std::invalid_argument for input_dim or output_dim < 1 (names the layer).
  explicit Embedding(EmbeddingOptions options);
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // ids != 0 (bool) when mask_zero, else an undefined Tensor.
  Tensor compute_mask(const Tensor& inputs) const;
  Config get_config() const override;
  // Builds an Embedding from its Keras config (input_dim and output_dim required; unknown fields
  // ignored). Errors: std::invalid_argument naming the field for a missing or invalid dim, an
  // embeddings/activity regularizer or constraint that is not null.
  static std::shared_ptr<Embedding> from_config(const Config& config);
  // The options it was made with.
  const EmbeddingOptions& options() const { return options_; }
  // The table "<name>/embeddings:0" [input_dim, output_dim]. Errors: std::logic_error before build.
  const Variable& embeddings() const;

 private:
  EmbeddingOptions options_;
  Variable embeddings_;
};

}  // namespace tapeflow::layers
