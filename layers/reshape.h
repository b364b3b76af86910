// Reshape: reshapes every example (the batch axis stays) to `target_shape`.
//
// Shapes:   [b, ...] -> [b, target_shape...]; one entry of target_shape may be -1 (inferred).
// Errors:   std::invalid_argument (naming the layer and shapes) if the element counts do not match,
//           more than one -1, or a dimension < -1.
// Ref:      keras/src/layers/reshaping/reshape.py
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// Reshape's keyword arguments. Ref: keras.layers.Reshape
struct ReshapeOptions {
  // The shape of each example, without the batch axis (required); one entry may be -1
  // (inferred from the element count).
  std::vector<std::int64_t> target_shape;
  // The layer's name; empty: the unique snake_case class name ("reshape", "reshape_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Reshapes every example to target_shape; the batch axis stays.
// Shapes: [b, ...] -> [b, target_shape...]. Ref: keras.layers.Reshape
class Reshape : public Layer {
 public:
  // Errors: std::invalid_argument for more than one -1 or a dimension < -1 (names the layer).
  explicit Reshape(ReshapeOptions options);
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  Config get_config() const override;  // target_shape
  // Builds a Reshape from its Keras config ("target_shape" required; unknown fields ignored).
  // Errors: std::invalid_argument naming the field for a missing or invalid target_shape.
  static std::shared_ptr<Reshape> from_config(const Config& config);

 private:
  std::vector<std::int64_t> target_;
};

}  // namespace tapeflow::layers
