// Reshape: reshapes every example (the batch axis stays) to `target_shape`.
//
// Shapes:   [b, ...] -> [b, target_shape...]; one entry of target_shape may be -1 (inferred).
// Errors:   std::invalid_argument (naming the layer and shapes) if the element counts do not match,
//           more than one -1, or a dimension < -1.
// Ref:      keras/src/layers/reshaping/reshape.py
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

struct ReshapeOptions {
  std::vector<std::int64_t> target_shape;
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the dtype of the model it joins
};

class Reshape : public Layer {
 public:
  explicit Reshape(ReshapeOptions options);
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;  // target_shape
  static std::shared_ptr<Reshape> from_config(const nlohmann::json& config);

 private:
  std::vector<std::int64_t> target_;
};

}  // namespace tapeflow::layers
