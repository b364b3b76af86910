// BatchNormalization: normalises each feature over the batch (training) or with moving statistics
// (inference), then scales by gamma and shifts by beta.
//
// Shapes:   inputs of any rank >= 1 with the feature axis `axis` (default -1, the last); same shape out.
// Weights:  "<name>/gamma:0" [C] (if scale, init ones), "<name>/beta:0" [C] (if center, init zeros),
//           trainable; "<name>/moving_mean:0" [C] (zeros), "<name>/moving_variance:0" [C] (ones),
//           non-trainable; in that order.
// Training: training = true on a trainable layer: y = (x - mean)/sqrt(var + epsilon)·gamma + beta with
//           the batch mean and the biased batch variance over all axes but `axis`; then
//           moving = moving·momentum + batch·(1 - momentum), written in place and never recorded.
//           Otherwise (inference, or set_trainable(false) — Keras's rule) the moving statistics are
//           used and nothing is updated.
// Facts:    axis = last uses one fused kernel forward and backward (a custom gradient; when a tape
//           records the backward pass itself, the gradient is built from ops so second order works);
//           other axes compose ops.
// DTypes:   float32 (default; inside a model with a dtype, the model's) or float64 via .dtype.
// Errors:   std::invalid_argument for momentum outside [0, 1], epsilon <= 0, an axis outside the
//           input rank at build, and a later input whose rank or feature size differs from the
//           built one (names the layer and both shapes).
// Ref:      keras/src/layers/normalization/batch_normalization.py
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// BatchNormalization's keyword arguments, in Keras's order. Ref: keras.layers.BatchNormalization
struct BatchNormalizationOptions {
  // The feature axis, normalised per feature (default -1, the last; negative counts from the end).
  int axis = -1;
  // Weight of the old value in the moving statistics' update, in [0, 1] (default 0.99).
  double momentum = 0.99;
  // Added to the variance before the square root (default 1e-3, > 0).
  double epsilon = 1e-3;
  // Whether to add the trainable offset "beta" [C] (default true).
  bool center = true;
  // Whether to multiply by the trainable "gamma" [C] (default true).
  bool scale = true;
  // Initializer of "beta" (default zeros).
  Initializer beta_initializer = "zeros";
  // Initializer of "gamma" (default ones).
  Initializer gamma_initializer = "ones";
  // Initializer of "moving_mean" (default zeros).
  Initializer moving_mean_initializer = "zeros";
  // Initializer of "moving_variance" (default ones).
  Initializer moving_variance_initializer = "ones";
  // The layer's name; empty: the unique snake_case class name
  // ("batch_normalization", "batch_normalization_1", ...).
  std::string name = "";
  // Seeds the layer's Generator (its weight initializers); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Normalises each feature with the batch's statistics (training) or the moving ones
// (inference), then scales by gamma and shifts by beta. Shapes: any rank >= 1 -> the same.
// Weights, Training, Errors: the file comment. Ref: keras.layers.BatchNormalization
class BatchNormalization : public Layer {
 public:
  // Errors: std::invalid_argument for momentum outside [0, 1] or epsilon <= 0 (names the layer).
  explicit BatchNormalization(BatchNormalizationOptions options = {});

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  // Keras 2's config (axis as given, an integer; momentum, epsilon, center, scale, initializers).
  Config get_config() const override;
  // Builds a BatchNormalization from its Keras config (axis as n or [n]; unknown fields ignored).
  // Errors: std::invalid_argument naming the field for several axes, a beta/gamma regularizer or
  // constraint that is not null, synchronized true, and the constructor's errors.
  static std::shared_ptr<BatchNormalization> from_config(const Config& config);

  // The options it was made with.
  const BatchNormalizationOptions& options() const { return options_; }
  // The trainable scale "<name>/gamma:0" [C].
  // Errors: std::logic_error before build or when scale is off.
  const Variable& gamma() const;
  // The trainable offset "<name>/beta:0" [C].
  // Errors: std::logic_error before build or when center is off.
  const Variable& beta() const;
  // The non-trainable moving mean "<name>/moving_mean:0" [C] (updated by training calls).
  // Errors: std::logic_error before build.
  const Variable& moving_mean() const;
  // The non-trainable moving variance "<name>/moving_variance:0" [C] (updated by training
  // calls). Errors: std::logic_error before build.
  const Variable& moving_variance() const;

 private:
  Tensor train_fused(const Tensor& x, Tensor* mean, Tensor* var);
  Tensor train_composed(const Tensor& x, Tensor* mean, Tensor* var);
  Tensor infer(const Tensor& x);
  Tensor broadcastable(const Tensor& param) const;  // [C] -> shape with C on axis_, 1 elsewhere
  void update_moving(const Tensor& mean, const Tensor& var);
  const Variable& built_weight(const Variable& v, const char* what) const;

  BatchNormalizationOptions options_;
  int axis_ = -1;  // normalised at build
  Shape built_shape_;
  Variable gamma_, beta_, moving_mean_, moving_variance_;
};

}  // namespace tapeflow::layers
