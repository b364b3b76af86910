// LayerNormalization: normalizes each example over `axis` (mean 0, variance 1), then scales by
// gamma and shifts by beta.
//
// Shapes:   any rank >= 1 -> same shape.
// Weights:  "<name>/gamma:0" (if scale) then "<name>/beta:0" (if center), of shape
//           [input_shape[a] for a in axis] (gamma_initializer ones, beta_initializer zeros).
// Facts:    for axis [-1] with center and scale the fused layer_norm_affine op; otherwise the
//           fused layer_norm op (tape/ops/normalization_ops.h) over the flattened axes (moved
//           last by a transpose when they are not the trailing ones), then * gamma + beta: Keras 3's
//           (x - mean) · rsqrt(var + epsilon) · gamma + beta with the biased variance. Default
//           epsilon 1e-3 as Keras. Computes in the layer's dtype: Keras 3 computes in
//           result_type(dtype, float32), which is float32 even for float64 (its float64 results
//           carry float32 rounding, ~1e-7). `training` changes nothing. rms_scaling is not supported (use
//           RMSNormalization).
// Errors:   std::invalid_argument for an empty or repeated axis list, epsilon < 0, an axis outside
//           the input's rank, or inputs whose normalized dims differ from the built weights' (names
//           the layer and both shapes).
// Ref:      keras/src/layers/normalization/layer_normalization.py, keras.ops.layer_normalization
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// LayerNormalization's keyword arguments, in Keras's order. Ref: keras.layers.LayerNormalization
struct LayerNormalizationOptions {
  // The axes normalized together per example (default {-1}, the last; negative counts from the
  // end; non-empty, no repeats). gamma and beta have these axes' sizes.
  std::vector<int> axis = {-1};
  // Added to the variance before the square root (default 1e-3, >= 0).
  double epsilon = 1e-3;
  // Whether to add the trainable offset "beta" (default true).
  bool center = true;
  // Whether to multiply by the trainable "gamma" (default true).
  bool scale = true;
  // Initializer of "beta" (default zeros).
  Initializer beta_initializer = "zeros";
  // Initializer of "gamma" (default ones).
  Initializer gamma_initializer = "ones";
  // The layer's name; empty: the unique snake_case class name
  // ("layer_normalization", "layer_normalization_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Normalizes each example over `axis` to mean 0 and variance 1, then scales by gamma and shifts
// by beta. Shapes: any rank >= 1 -> the same. Ref: keras.layers.LayerNormalization
class LayerNormalization : public Layer {
 public:
  // Errors: std::invalid_argument for an empty axis list or epsilon < 0 (names the layer); a
  // repeated or out-of-range axis is an error at build.
  explicit LayerNormalization(LayerNormalizationOptions options = {});
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  Config get_config() const override;
  // Builds a LayerNormalization from its Keras config (axis as n or a list; unknown fields
  // ignored). Errors: std::invalid_argument naming the field for a beta/gamma regularizer or
  // constraint that is not null, rms_scaling true, and the constructor's errors.
  static std::shared_ptr<LayerNormalization> from_config(const Config& config);
  // The options it was made with.
  const LayerNormalizationOptions& options() const { return options_; }

 private:
  // The normalized axes of a rank-`rank` input, sorted, non-negative. Errors as the header says.
  std::vector<int> axes_for(const Shape& input_shape) const;
  LayerNormalizationOptions options_;
  Shape param_shape_;
  Variable gamma_, beta_;
};

}  // namespace tapeflow::layers
