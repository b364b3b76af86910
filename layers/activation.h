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

struct ActivationOptions {
  std::string activation = "linear";
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the dtype of the model it joins
};

class Activation : public Layer {
 public:
  explicit Activation(ActivationOptions options);
  explicit Activation(const std::string& activation) : Activation(ActivationOptions{activation}) {}
  Tensor call(const Tensor& inputs, bool training) override;
  nlohmann::json get_config() const override;  // activation
  static std::shared_ptr<Activation> from_config(const nlohmann::json& config);

 private:
  std::string activation_;
  activations::ActivationFn fn_;
};

struct LeakyReLUOptions {
  double alpha = 0.3;
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the dtype of the model it joins
};

class LeakyReLU : public Layer {
 public:
  explicit LeakyReLU(LeakyReLUOptions options = {});
  Tensor call(const Tensor& inputs, bool training) override;
  nlohmann::json get_config() const override;  // alpha (Keras 2)
  static std::shared_ptr<LeakyReLU> from_config(const nlohmann::json& config);
  double alpha() const { return alpha_; }

 private:
  double alpha_;
};

}  // namespace tapeflow::layers
