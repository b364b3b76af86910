// 2-D reshaping layers: UpSampling2D (nearest neighbour) and ZeroPadding2D.
//
// Shapes:   UpSampling2D: [N, H, W, C] -> [N, H·size[0], W·size[1], C] (each pixel repeated).
//           ZeroPadding2D: [N, H, W, C] -> [N, top + H + bottom, left + W + right, C].
// Weights:  none.
// Facts:    channels_last only; composed from reshape/broadcast_to/pad ops (any-order gradients).
//           `training` changes nothing.
// Errors:   std::invalid_argument at construction for a size < 1, an interpolation other than
//           "nearest", or a negative padding; at call for inputs that are not rank 4 (names the
//           layer and the shape).
// Ref:      keras/src/layers/reshaping/up_sampling2d.py, zero_padding2d.py
#pragma once

#include <array>

#include "layers/layer.h"

namespace tapeflow::layers {

// UpSampling2D's keyword arguments, in Keras's order (channels_last). Ref: keras.layers.UpSampling2D
struct UpSampling2DOptions {
  // Upsampling factors for rows and columns (default 2, 2; each >= 1).
  std::array<std::int64_t, 2> size = {2, 2};
  // Only "nearest" (Keras's default: each pixel repeated size times).
  std::string interpolation = "nearest";
  // The layer's name; empty: the unique snake_case class name ("up_sampling2d", "up_sampling2d_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins;
  // inputs are cast to it.
  std::optional<DType> dtype = std::nullopt;
};

// Nearest-neighbour upsampling: repeats each pixel size[0] × size[1] times.
// Shapes: [N, H, W, C] -> [N, H·size[0], W·size[1], C]. Ref: keras.layers.UpSampling2D
class UpSampling2D : public Layer {
 public:
  // Errors: std::invalid_argument for a size < 1 or an interpolation other than "nearest".
  explicit UpSampling2D(UpSampling2DOptions options = {});
  // Keras's config (tf.keras 2.x fields; channels_last only) and its inverse; see layers/serialization.h.
  Config get_config() const override;
  // Builds an UpSampling2D from its Keras config (size as [h, w] or one integer, interpolation;
  // unknown fields ignored). Errors: std::invalid_argument naming the field for data_format other
  // than channels_last and the constructor's errors.
  static std::shared_ptr<UpSampling2D> from_config(const Config& config);
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // The options it was made with.
  const UpSampling2DOptions& options() const { return options_; }

 private:
  UpSampling2DOptions options_;
};

// ZeroPadding2D's keyword arguments (channels_last). Ref: keras.layers.ZeroPadding2D
struct ZeroPadding2DOptions {
  // ((top, bottom), (left, right)); Keras's padding=1 is {{1, 1}, {1, 1}}.
  std::array<std::array<std::int64_t, 2>, 2> padding = {{{1, 1}, {1, 1}}};
  // The layer's name; empty: the unique snake_case class name ("zero_padding2d", "zero_padding2d_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Adds rows and columns of zeros around every image.
// Shapes: [N, H, W, C] -> [N, top + H + bottom, left + W + right, C]. Ref: keras.layers.ZeroPadding2D
class ZeroPadding2D : public Layer {
 public:
  // Errors: std::invalid_argument for a negative padding.
  explicit ZeroPadding2D(ZeroPadding2DOptions options = {});
  // Keras's config (tf.keras 2.x fields; channels_last only) and its inverse; see layers/serialization.h.
  Config get_config() const override;
  // Builds a ZeroPadding2D from its Keras config (padding as n, [h, w] or [[top, bottom], [left,
  // right]]; unknown fields ignored). Errors: std::invalid_argument naming the field for another
  // padding form, data_format other than channels_last, a negative padding.
  static std::shared_ptr<ZeroPadding2D> from_config(const Config& config);
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // The options it was made with.
  const ZeroPadding2DOptions& options() const { return options_; }

 private:
  ZeroPadding2DOptions options_;
};

}  // namespace tapeflow::layers
