// Flatten: collapses every axis but the first (the batch).
//
// Shapes:   [b, d1, ..., dn] -> [b, d1·...·dn]; [b] -> [b, 1].
// Errors:   std::invalid_argument for a scalar input (names the layer).
// Ref:      keras/src/layers/reshaping/flatten.py
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

struct FlattenOptions {
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the dtype of the model it joins
};

class Flatten : public Layer {
 public:
  explicit Flatten(FlattenOptions options = {});
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;  // data_format "channels_last"
  static std::shared_ptr<Flatten> from_config(const nlohmann::json& config);
};

}  // namespace tapeflow::layers
