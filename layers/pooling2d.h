// 2-D pooling layers: MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, GlobalMaxPooling2D.
//
// Shapes:   MaxPooling2D / AveragePooling2D: [N, H, W, C] -> [N, Ho, Wo, C] ("valid": floor((H - k) / s) + 1,
//           "same": ceil(H / s)); Global*: [N, H, W, C] -> [N, C] ([N, 1, 1, C] with keepdims).
// Weights:  none.
// Facts:    strides default to pool_size (Keras's strides=None). "same" average pooling divides by
//           the number of unpadded elements (TF). channels_last only. `training` changes nothing.
// Errors:   std::invalid_argument at construction for a pool size or stride < 1 or a padding other
//           than "valid"/"same"; at call for inputs that are not rank 4 or too small for the window
//           (names the layer and the shape).
// Ref:      keras/src/layers/pooling/max_pooling2d.py, average_pooling2d.py,
//           global_average_pooling2d.py, global_max_pooling2d.py
#pragma once

#include <array>
#include <optional>

#include "layers/layer.h"

namespace tapeflow::layers {

// MaxPooling2D's and AveragePooling2D's keyword arguments, in Keras's order (channels_last).
// Ref: keras.layers.MaxPooling2D
struct Pooling2DOptions {
  // Height and width of the pooling window (default 2, 2; each >= 1).
  std::array<std::int64_t, 2> pool_size = {2, 2};
  // Step of the window along height and width (each >= 1); empty: pool_size (Keras's None).
  std::optional<std::array<std::int64_t, 2>> strides = std::nullopt;
  // "valid" (default; windows inside the input) or "same" (output size ceil(input / stride)).
  std::string padding = "valid";
  // The layer's name; empty: the unique snake_case class name ("max_pooling2d", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins;
  // inputs are cast to it.
  std::optional<DType> dtype = std::nullopt;
};

// Shared by MaxPooling2D and AveragePooling2D.
class Pooling2D : public Layer {
 public:
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // The window's height and width.
  const std::array<std::int64_t, 2>& pool_size() const { return pool_size_; }
  // The window's steps (pool_size when none were given).
  const std::array<std::int64_t, 2>& strides() const { return strides_; }
  // "valid" or "same".
  const std::string& padding() const { return padding_; }
  Config get_config() const override;  // Keras's pool_size/padding/strides/data_format

 protected:
  // class_name: "MaxPooling2D" / "AveragePooling2D"; max: max (true) or average pooling.
  // Errors: std::invalid_argument for a pool size or stride < 1 or a padding other than "valid" / "same".
  Pooling2D(const char* class_name, bool max, Pooling2DOptions options);

 private:
  bool max_;
  std::array<std::int64_t, 2> pool_size_, strides_;
  std::string padding_;
};

// The maximum over each pool_size window. Shapes: [N, H, W, C] -> [N, Ho, Wo, C].
// Ref: keras.layers.MaxPooling2D
class MaxPooling2D : public Pooling2D {
 public:
  // Errors: std::invalid_argument for a pool size or stride < 1 or an unknown padding.
  explicit MaxPooling2D(Pooling2DOptions options = {});
  // Builds a MaxPooling2D from its Keras config (pool_size, strides, padding; unknown fields
  // ignored). Errors: std::invalid_argument naming the field for data_format other than
  // channels_last or invalid values.
  static std::shared_ptr<MaxPooling2D> from_config(const Config& config);
};

// The mean over each pool_size window ("same": of its unpadded elements, as TF).
// Shapes: [N, H, W, C] -> [N, Ho, Wo, C]. Ref: keras.layers.AveragePooling2D
class AveragePooling2D : public Pooling2D {
 public:
  // Errors: std::invalid_argument for a pool size or stride < 1 or an unknown padding.
  explicit AveragePooling2D(Pooling2DOptions options = {});
  // Builds an AveragePooling2D from its Keras config (as MaxPooling2D::from_config).
  // Errors: std::invalid_argument naming the field.
  static std::shared_ptr<AveragePooling2D> from_config(const Config& config);
};

// GlobalAveragePooling2D's and GlobalMaxPooling2D's keyword arguments (channels_last).
// Ref: keras.layers.GlobalAveragePooling2D
struct GlobalPooling2DOptions {
  // Keep the spatial axes as size 1: [N, 1, 1, C] instead of [N, C] (default false).
  bool keepdims = false;
  // The layer's name; empty: the unique snake_case class name ("global_average_pooling2d", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Shared by GlobalAveragePooling2D and GlobalMaxPooling2D.
class GlobalPooling2D : public Layer {
 public:
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // Whether the output keeps the spatial axes as size 1.
  bool keepdims() const { return keepdims_; }
  Config get_config() const override;  // Keras's data_format/keepdims

 protected:
  // class_name: "GlobalAveragePooling2D" / "GlobalMaxPooling2D"; max: max (true) or mean.
  GlobalPooling2D(const char* class_name, bool max, GlobalPooling2DOptions options);

 private:
  bool max_;
  bool keepdims_;
};

// The mean over height and width. Shapes: [N, H, W, C] -> [N, C] ([N, 1, 1, C] with keepdims).
// Ref: keras.layers.GlobalAveragePooling2D
class GlobalAveragePooling2D : public GlobalPooling2D {
 public:
  // Makes the layer (no weights; nothing to check).
  explicit GlobalAveragePooling2D(GlobalPooling2DOptions options = {});
  // Builds the layer from its Keras config (keepdims, default false; unknown fields ignored).
  // Errors: std::invalid_argument naming the field for data_format other than channels_last.
  static std::shared_ptr<GlobalAveragePooling2D> from_config(const Config& config);
};

// The maximum over height and width. Shapes: [N, H, W, C] -> [N, C] ([N, 1, 1, C] with keepdims).
// Ref: keras.layers.GlobalMaxPooling2D
class GlobalMaxPooling2D : public GlobalPooling2D {
 public:
  // Makes the layer (no weights; nothing to check).
  explicit GlobalMaxPooling2D(GlobalPooling2DOptions options = {});
  // Builds the layer from its Keras config (keepdims, default false; unknown fields ignored).
  // Errors: std::invalid_argument naming the field for data_format other than channels_last.
  static std::shared_ptr<GlobalMaxPooling2D> from_config(const Config& config);
};

}  // namespace tapeflow::layers
