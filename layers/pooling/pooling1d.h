// 1-D pooling layers over steps: MaxPooling1D, AveragePooling1D.
//
// Shapes:   [N, steps, C] -> [N, out_steps, C] ("valid": (steps - pool_size) / strides + 1, "same":
//           ceil(steps / strides)).
// Weights:  none.
// Facts:    strides default to pool_size (Keras's strides=None). Runs as max_pool2d / avg_pool2d on a
//           [N, 1, steps, C] image (gradients of any order are theirs). "same" average pooling divides
//           by the number of unpadded steps (TF). channels_last only. `training` changes nothing.
// Errors:   std::invalid_argument at construction for a pool size or stride < 1 or a padding other
//           than "valid"/"same"; at call for inputs that are not rank 3 or shorter than the window
//           (names the layer and the shape).
// Ref:      keras/src/layers/pooling/max_pooling1d.py, average_pooling1d.py, base_pooling.py
#pragma once

#include <optional>

#include "layers/layer.h"

namespace tapeflow::layers {

// MaxPooling1D's and AveragePooling1D's keyword arguments, in Keras's order (channels_last).
// Ref: keras.layers.MaxPooling1D
struct Pooling1DOptions {
  // Length of the pooling window in steps (default 2, >= 1).
  std::int64_t pool_size = 2;
  // Step of the window (>= 1); empty: pool_size (Keras's None).
  std::optional<std::int64_t> strides = std::nullopt;
  // "valid" (default; windows inside the input) or "same" (out_steps = ceil(steps / strides)).
  std::string padding = "valid";
  // The layer's name; empty: the unique snake_case class name ("max_pooling1d", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins;
  // inputs are cast to it.
  std::optional<DType> dtype = std::nullopt;
};

// Shared by MaxPooling1D and AveragePooling1D.
class Pooling1D : public Layer {
 public:
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // The window length in steps.
  std::int64_t pool_size() const { return pool_size_; }
  // The window's step (pool_size when none was given).
  std::int64_t strides() const { return strides_; }
  // "valid" or "same".
  const std::string& padding() const { return padding_; }
  Config get_config() const override;  // Keras's pool_size/strides as 1-element lists, padding, data_format

 protected:
  // class_name: "MaxPooling1D" / "AveragePooling1D"; max: max (true) or average pooling.
  // Errors: std::invalid_argument for a pool size or stride < 1 or a padding other than "valid" / "same".
  Pooling1D(const char* class_name, bool max, Pooling1DOptions options);
  template <class L>
  // The from_config of both subclasses: pool_size, strides ([n] or n), padding; unknown fields
  // ignored. Errors: std::invalid_argument naming the field for data_format other than channels_last
  // or invalid values.
  static std::shared_ptr<L> make_from_config(const Config& config, const char* class_name);

 private:
  bool max_;
  std::int64_t pool_size_, strides_;
  std::string padding_;
};

// The maximum over each pool_size window of steps. Shapes: [N, steps, C] -> [N, out_steps, C].
// Ref: keras.layers.MaxPooling1D
class MaxPooling1D : public Pooling1D {
 public:
  // Errors: std::invalid_argument for a pool size or stride < 1 or an unknown padding.
  explicit MaxPooling1D(Pooling1DOptions options = {});
  // Builds a MaxPooling1D from its Keras config. Errors: std::invalid_argument naming the field.
  static std::shared_ptr<MaxPooling1D> from_config(const Config& config);
};

// The mean over each pool_size window of steps ("same": of its unpadded steps, as TF).
// Shapes: [N, steps, C] -> [N, out_steps, C]. Ref: keras.layers.AveragePooling1D
class AveragePooling1D : public Pooling1D {
 public:
  // Errors: std::invalid_argument for a pool size or stride < 1 or an unknown padding.
  explicit AveragePooling1D(Pooling1DOptions options = {});
  // Builds an AveragePooling1D from its Keras config. Errors: std::invalid_argument naming the field.
  static std::shared_ptr<AveragePooling1D> from_config(const Config& config);
};

}  // namespace tapeflow::layers
