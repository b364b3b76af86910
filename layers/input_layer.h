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

// keras.Input's arguments.
struct InputOptions {
  // The shape of one example, without the batch axis (keras.Input's shape); every dim >= 0.
  std::vector<std::int64_t> shape;
  // The dtype of the values fed in (default float32; an int dtype for Embedding's indices).
  DType dtype = DType::kFloat32;
  // The layer's name; empty: "input_1", "input_2", ... (Keras 2's naming).
  std::string name = "";
};

// The identity layer at the start of a functional model; it holds the input's shape and dtype.
// Shapes: [batch, shape...] -> the same. Ref: keras.layers.InputLayer
class InputLayer : public Layer {
 public:
  // Errors: std::invalid_argument for a negative dimension (names the input and the shape).
  explicit InputLayer(InputOptions options);
  Tensor call(const Tensor& inputs, bool training) override;
  Config get_config() const override;
  // Builds an InputLayer from its Keras config: "batch_input_shape" (Keras 2) or "batch_shape"
  // (Keras 3) [null, d1, ...], "dtype", "name". Errors: std::invalid_argument naming the field for a
  // missing shape, an unknown dimension other than the batch one, sparse or ragged true.
  static std::shared_ptr<InputLayer> from_config(const Config& config);
  // The shape without the batch axis.
  const std::vector<std::int64_t>& shape() const { return options_.shape; }
  // The dtype of the values fed in (InputOptions::dtype).
  DType input_dtype() const { return options_.dtype; }
  // A new node of `layer` (no inputs) and its KerasTensor: what Input() returns.
  static KerasTensor output_of(const std::shared_ptr<InputLayer>& layer);

 private:
  InputOptions options_;
};

// A symbolic input tensor (keras.Input).
KerasTensor Input(InputOptions options);

}  // namespace tapeflow::layers
