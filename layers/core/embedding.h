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

struct EmbeddingOptions {
  std::int64_t input_dim = 0;
  std::int64_t output_dim = 0;
  Initializer embeddings_initializer = "random_uniform";
  bool mask_zero = false;
  std::string name = "";
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<DType> dtype = std::nullopt;
};

class Embedding : public Layer {
 public:
  explicit Embedding(EmbeddingOptions options);
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // ids != 0 (bool) when mask_zero, else an undefined Tensor.
  Tensor compute_mask(const Tensor& inputs) const;
  nlohmann::json get_config() const override;
  static std::shared_ptr<Embedding> from_config(const nlohmann::json& config);
  const EmbeddingOptions& options() const { return options_; }
  // Errors: std::logic_error before build.
  const Variable& embeddings() const;

 private:
  EmbeddingOptions options_;
  Variable embeddings_;
};

}  // namespace tapeflow::layers
