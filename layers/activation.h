// Activation and LeakyReLU: element-wise activation layers.
//
// Shapes:   any; same shape out.
// Facts:    Activation applies keras.activations by name ("relu", "softmax", ... see activations.h).
//           LeakyReLU: x if x > 0 else alpha·x, Keras default alpha 0.3 (negative_slope in Keras 3).
// Errors:   std::invalid_argument for an unknown activation name or alpha < 0.
// Ref:      keras/src/layers/activations/activation.py, leaky_relu.py
#pragma once

#include "layers/activations.h"
#include "layers/layer.h"

namespace tapeflow::layers {

// Activation's keyword arguments. Ref: keras.layers.Activation
struct ActivationOptions {
  // keras.activations name ("relu", "softmax", ...); "linear" (default): the identity.
  std::string activation = "linear";
  // The layer's name; empty: the unique snake_case class name ("activation", "activation_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Applies a keras.activations function element-wise (softmax over the last axis).
// Shapes: any -> the same. Ref: keras.layers.Activation
class Activation : public Layer {
 public:
  // Errors: std::invalid_argument for an unknown activation name (names the layer).
  explicit Activation(ActivationOptions options);
  // Activation({.activation = activation}), as keras.layers.Activation("relu").
  explicit Activation(const std::string& activation) : Activation(ActivationOptions{activation}) {}
  Tensor call(const Tensor& inputs, bool training) override;
  Config get_config() const override;  // activation
  // Builds an Activation from its Keras config ("activation" required; unknown fields ignored).
  // Errors: std::invalid_argument naming the layer and field for a missing or unknown activation.
  static std::shared_ptr<Activation> from_config(const Config& config);

 private:
  std::string activation_;
  activations::ActivationFn fn_;
};

// LeakyReLU's keyword arguments. Ref: keras.layers.LeakyReLU
struct LeakyReLUOptions {
  // Slope for x < 0 (>= 0, default 0.3; Keras 2's alpha, Keras 3's negative_slope).
  double alpha = 0.3;
  // The layer's name; empty: the unique snake_case class name ("leaky_re_lu", "leaky_re_lu_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// x if x > 0 else alpha·x, element-wise. Shapes: any -> the same. Ref: keras.layers.LeakyReLU
class LeakyReLU : public Layer {
 public:
  // Errors: std::invalid_argument for alpha < 0 (names the layer and the value).
  explicit LeakyReLU(LeakyReLUOptions options = {});
  Tensor call(const Tensor& inputs, bool training) override;
  Config get_config() const override;  // alpha (Keras 2)
  // Builds a LeakyReLU from its Keras config: "alpha" (Keras 2) or "negative_slope" (Keras 3),
  // default 0.3; unknown fields ignored. Errors: std::invalid_argument naming the field for alpha < 0.
  static std::shared_ptr<LeakyReLU> from_config(const Config& config);
  // The slope for negative inputs.
  double alpha() const { return alpha_; }

 private:
  double alpha_;
};

}  // namespace tapeflow::layers
