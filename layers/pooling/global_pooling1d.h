// GlobalAveragePooling1D / GlobalMaxPooling1D: the mean / max over the steps of each sequence.
//
// Shapes:   [batch, steps, features] -> [batch, features] ([batch, 1, features] with keepdims).
// Weights:  none.
// Facts:    channels_last only. call(inputs, mask, training) with a mask [batch, steps] (bool or
//           0/1 numbers): GlobalAveragePooling1D averages the unmasked steps only,
//           sum(x · mask) / sum(mask) (Keras; an all-masked row divides 0 by 0, as Keras);
//           GlobalMaxPooling1D ignores the mask (as Keras 3). `training` changes nothing.
// Errors:   std::invalid_argument naming the layer and the shapes for inputs that are not rank 3
//           or a mask that is not [batch, steps].
// Ref:      keras/src/layers/pooling/global_average_pooling1d.py, global_max_pooling1d.py
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// GlobalAveragePooling1D's and GlobalMaxPooling1D's keyword arguments (channels_last).
// Ref: keras.layers.GlobalAveragePooling1D
struct GlobalPooling1DOptions {
  // Keep the steps axis as size 1: [batch, 1, features] instead of [batch, features] (default false).
  bool keepdims = false;
  // The layer's name; empty: the unique snake_case class name ("global_average_pooling1d", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Shared by GlobalAveragePooling1D and GlobalMaxPooling1D.
class GlobalPooling1D : public Layer {
 public:
  using Layer::call;  // the list form stays visible next to the masked overload below
  Tensor call(const Tensor& inputs, bool training) override;
  // With a mask [batch, steps]; an undefined mask is no mask.
  Tensor call(const Tensor& inputs, const Tensor& mask, bool training);
  Shape compute_output_shape(const Shape& input_shape) const override;
  // Whether the output keeps the steps axis as size 1.
  bool keepdims() const { return keepdims_; }
  Config get_config() const override;  // data_format, keepdims

 protected:
  // class_name: "GlobalAveragePooling1D" / "GlobalMaxPooling1D"; max: max (true) or mean.
  GlobalPooling1D(const char* class_name, bool max, GlobalPooling1DOptions options);
  template <class L>
  // The from_config of both subclasses: keepdims (default false); unknown fields ignored.
  // Errors: std::invalid_argument naming the field for data_format other than channels_last.
  static std::shared_ptr<L> make_from_config(const Config& config, const char* class_name);

 private:
  bool max_;
  bool keepdims_;
};

// The mean over the steps (with a mask: over the unmasked steps).
// Shapes: [batch, steps, features] -> [batch, features]. Ref: keras.layers.GlobalAveragePooling1D
class GlobalAveragePooling1D : public GlobalPooling1D {
 public:
  // Makes the layer (no weights; nothing to check).
  explicit GlobalAveragePooling1D(GlobalPooling1DOptions options = {});
  // Builds the layer from its Keras config. Errors: std::invalid_argument naming the field.
  static std::shared_ptr<GlobalAveragePooling1D> from_config(const Config& config);
};

// The maximum over the steps (a mask is ignored, as Keras 3).
// Shapes: [batch, steps, features] -> [batch, features]. Ref: keras.layers.GlobalMaxPooling1D
class GlobalMaxPooling1D : public GlobalPooling1D {
 public:
  // Makes the layer (no weights; nothing to check).
  explicit GlobalMaxPooling1D(GlobalPooling1DOptions options = {});
  // Builds the layer from its Keras config. Errors: std::invalid_argument naming the field.
  static std::shared_ptr<GlobalMaxPooling1D> from_config(const Config& config);
};

}  // namespace tapeflow::layers
