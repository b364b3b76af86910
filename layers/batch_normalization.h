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

struct BatchNormalizationOptions {
  int axis = -1;
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  Initializer beta_initializer = "zeros";
  Initializer gamma_initializer = "ones";
  Initializer moving_mean_initializer = "zeros";
  Initializer moving_variance_initializer = "ones";
  std::string name = "";
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the dtype of the model it joins
};

class BatchNormalization : public Layer {
 public:
  explicit BatchNormalization(BatchNormalizationOptions options = {});

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;

  const BatchNormalizationOptions& options() const { return options_; }
  // Errors: std::logic_error before build, or for gamma/beta when scale/center is off.
  const Variable& gamma() const;
  const Variable& beta() const;
  const Variable& moving_mean() const;
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
