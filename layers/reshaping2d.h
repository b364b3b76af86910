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

struct UpSampling2DOptions {
  std::array<std::int64_t, 2> size = {2, 2};
  std::string interpolation = "nearest";
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;  // empty: float32 or the enclosing model's; inputs are cast to it
};

class UpSampling2D : public Layer {
 public:
  explicit UpSampling2D(UpSampling2DOptions options = {});
  // Keras's config (tf.keras 2.x fields; channels_last only) and its inverse; see layers/serialization.h.
  nlohmann::json get_config() const override;
  static std::shared_ptr<UpSampling2D> from_config(const nlohmann::json& config);
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  const UpSampling2DOptions& options() const { return options_; }

 private:
  UpSampling2DOptions options_;
};

struct ZeroPadding2DOptions {
  // ((top, bottom), (left, right)); Keras's padding=1 is {{1, 1}, {1, 1}}.
  std::array<std::array<std::int64_t, 2>, 2> padding = {{{1, 1}, {1, 1}}};
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;
};

class ZeroPadding2D : public Layer {
 public:
  explicit ZeroPadding2D(ZeroPadding2DOptions options = {});
  // Keras's config (tf.keras 2.x fields; channels_last only) and its inverse; see layers/serialization.h.
  nlohmann::json get_config() const override;
  static std::shared_ptr<ZeroPadding2D> from_config(const nlohmann::json& config);
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  const ZeroPadding2DOptions& options() const { return options_; }

 private:
  ZeroPadding2DOptions options_;
};

}  // namespace tapeflow::layers
