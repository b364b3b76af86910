// RMSNormalization: scales each example by the reciprocal root mean square over `axis`, then by
// a learned scale.
//
// Shapes:   any rank >= 1 -> same shape.
// Weights:  "<name>/scale:0" of shape [input_shape[a] for a in sorted(axis)] (initializer ones).
// Facts:    Keras 3's ops.rms_normalization: x · rsqrt(mean(x², axis, keepdims) + epsilon) · scale,
//           composed from ops (square, reduce_mean, rsqrt, mul), so every order of gradient is
//           theirs. Default epsilon 1e-6 as Keras 3 (Keras 2 has no such layer). No centering, no
//           bias. Computes in the layer's dtype. `training` changes nothing.
// Errors:   std::invalid_argument for an empty or repeated axis list, epsilon < 0, an axis outside
//           the input's rank, or inputs whose normalized dims differ from the built weight's (names
//           the layer and both shapes).
// Ref:      keras/src/layers/normalization/rms_normalization.py, keras.ops.rms_normalization
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// RMSNormalization's keyword arguments, in Keras 3's order. Ref: keras.layers.RMSNormalization
struct RMSNormalizationOptions {
  // The axes of the mean of squares (default {-1}, the last; negative counts from the end;
  // non-empty, no repeats). "scale" has these axes' sizes.
  std::vector<int> axis = {-1};
  // Added to the mean of squares before the reciprocal square root (default 1e-6, >= 0).
  double epsilon = 1e-6;
  // The layer's name; empty: the unique snake_case class name
  // ("rms_normalization", "rms_normalization_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// x · rsqrt(mean(x², axis) + epsilon) · scale, per example.
// Shapes: any rank >= 1 -> the same. Ref: keras.layers.RMSNormalization
class RMSNormalization : public Layer {
 public:
  // Errors: std::invalid_argument for an empty axis list or epsilon < 0 (names the layer); a
  // repeated or out-of-range axis is an error at build.
  explicit RMSNormalization(RMSNormalizationOptions options = {});
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  Config get_config() const override;
  // Builds an RMSNormalization from its Keras config (axis as n or a list, epsilon; unknown fields
  // ignored). Errors: std::invalid_argument naming the field for invalid axis or epsilon.
  static std::shared_ptr<RMSNormalization> from_config(const Config& config);
  // The options it was made with.
  const RMSNormalizationOptions& options() const { return options_; }

 private:
  // The normalized axes of the input, sorted, non-negative. Errors as the header says.
  std::vector<int> axes_for(const Shape& input_shape) const;
  RMSNormalizationOptions options_;
  Shape param_shape_;
  Variable scale_;
};

}  // namespace tapeflow::layers
