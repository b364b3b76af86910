// Sequential: a Model that is a plain stack of layers, each feeding the next.
//
// Shapes:   inputs of the first layer -> outputs of the last.
// Facts:    add() appends a layer (its weights join the model's in order).
//           dtype (Keras's argument): the compute dtype, to which call() casts floating inputs;
//           layers added unbuilt without a dtype of their own take it. Without one the model takes
//           its first layer's dtype when that layer has one (given or taken), so a float64 stack
//           gets float64 inputs (Keras 3: inputs are cast to the first layer's compute dtype).
//           build(shape) or the
//           first call builds every layer by running a zero batch of one example through them in
//           inference mode (nothing is recorded, no state changes), so summary() can show shapes.
//           Keras masks pass from layer to layer as in Functional (Embedding(mask_zero) into the
//           recurrent layers, GlobalAveragePooling1D, MultiHeadAttention; models/internal/functional_masks.h).
//           call() runs the layers through the models' one fusion pass
//           (models/internal/fusion.h): a Conv2D/Conv2DTranspose with activation relu that feeds
//           a MaxPooling2D of the same dtype runs as conv -> pool -> relu (one
//           fused_conv2d_max_pool2d op for a Conv2D with a bias), any other Conv2D with a bias and
//           a linear or relu activation as one fused_conv2d op: the values and gradients of the
//           layers as written, bit for bit, but for float 3x3 VALID convolutions of >= 16 channels
//           under a 2x2 pool (Winograd, within rounding; see there). Other layers run as written.
// Errors:   std::invalid_argument for a null layer; std::logic_error for call() with no layers.
// Ref:      keras/src/models/sequential.py
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace tapeflow::models {

// keras.Sequential: a linear stack of layers (see the file comment for dtype, building and the one
// rewrite). Ref: keras.Sequential
class Sequential : public Model {
 public:
  // The stack of `layers` (each added as by add()); name "" gives "sequential", "sequential_1", ...;
  // dtype as in the file comment. Errors: std::invalid_argument for a null layer.
  explicit Sequential(std::vector<std::shared_ptr<layers::Layer>> layers = {}, std::string name = "",
                      std::optional<DType> dtype = std::nullopt);
  // Appends a layer on top of the stack; a first layer with a dtype gives the model its dtype when
  // the model has none. Errors: std::invalid_argument naming the model for a null layer.
  void add(std::shared_ptr<layers::Layer> layer);
  // Runs the layers in order, each on the previous one's output (Conv2D(relu) -> MaxPooling2D as
  // described above). Errors: std::logic_error naming the model when it has no layers.
  Tensor call(const Tensor& inputs, bool training) override;
  void build(const Shape& input_shape) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // Keras 2's {"name", "layers": [InputLayer (when the input shape is known), ...]}.
  Config get_config() const override;
  // Builds the model when the config gives an input shape (an InputLayer or a first layer's
  // batch_input_shape). Errors: std::invalid_argument naming the layer and field.
  static std::shared_ptr<Sequential> from_config(const Config& config);

 protected:
  std::vector<std::string> summary_output_shapes() const override;
};

}  // namespace tapeflow::models
