// Flatten: collapses every axis but the first (the batch).
//
// Shapes:   [b, d1, ..., dn] -> [b, d1·...·dn]; [b] -> [b, 1].
// Errors:   std::invalid_argument for a scalar input (names the layer).
// Ref:      keras/src/layers/reshaping/flatten.py
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// Flatten's keyword arguments (data_format is always channels_last). Ref: keras.layers.Flatten
struct FlattenOptions {
  // The layer's name; empty: the unique snake_case class name ("flatten", "flatten_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Collapses every axis but the batch. Shapes: [b, d1, ..., dn] -> [b, d1·...·dn]; [b] -> [b, 1].
// Ref: keras.layers.Flatten
class Flatten : public Layer {
 public:
  // Makes the layer (no weights; nothing to check).
  explicit Flatten(FlattenOptions options = {});
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  Config get_config() const override;  // data_format "channels_last"
  // Builds a Flatten from its Keras config (unknown fields ignored). Errors: std::invalid_argument
  // naming the field for a data_format other than "channels_last".
  static std::shared_ptr<Flatten> from_config(const Config& config);
};

}  // namespace tapeflow::layers
