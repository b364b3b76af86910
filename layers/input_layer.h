// InputLayer and Input(): the entry points of a functional model.
//
// Shapes:   Input({.shape = {784}}) -> KerasTensor [-1, 784] (the batch axis is free).
// Facts:    InputLayer is the identity; its config is Keras 2's {"batch_input_shape": [null, ...],
//           "dtype", "sparse": false, "ragged": false, "name"}. Default names "input_1",
//           "input_2", ... as Keras 2.
// DTypes:   any (float32 default).
// Errors:   std::invalid_argument for a negative dimension (names the input and the shape).
// Ref:      keras.Input, keras/src/layers/core/input_layer.py
#pragma once

#include <string>
#include <vector>

#include "layers/keras_tensor.h"
#include "layers/layer.h"

namespace tapeflow::layers {

struct InputOptions {
  std::vector<std::int64_t> shape;  // without the batch axis
  DType dtype = DType::kFloat32;
  std::string name = "";
};

class InputLayer : public Layer {
 public:
  explicit InputLayer(InputOptions options);
  Tensor call(const Tensor& inputs, bool training) override;
  nlohmann::json get_config() const override;
  static std::shared_ptr<InputLayer> from_config(const nlohmann::json& config);
  // The shape without the batch axis, and the input dtype.
  const std::vector<std::int64_t>& shape() const { return options_.shape; }
  DType input_dtype() const { return options_.dtype; }
  // A new node of `layer` (no inputs) and its KerasTensor: what Input() returns.
  static KerasTensor output_of(const std::shared_ptr<InputLayer>& layer);

 private:
  InputOptions options_;
};

// A symbolic input tensor (keras.Input).
KerasTensor Input(InputOptions options);

}  // namespace tapeflow::layers
