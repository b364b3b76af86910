#include "layers/activation.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

Activation::Activation(ActivationOptions options)
    : Layer("Activation", options.name, std::nullopt, options.dtype),
      activation_(options.activation.empty() ? "linear" : options.activation),
      fn_(activations::get(options.activation)) {}

Config Activation::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["activation"] = activation_;
  return config;
}

std::shared_ptr<Activation> Activation::from_config(const Config& config) {
  ConfigReader r(config, "Activation");
  try {
    return r.finish(std::make_shared<Activation>(
        ActivationOptions{.activation = r.string("activation"), .name = r.name(), .dtype = r.dtype()}));
  } catch (const std::invalid_argument& e) {
    r.fail("activation", e.what());
  }
}

Tensor Activation::call(const Tensor& x, bool) { return fn_ ? fn_(x) : x; }

Config LeakyReLU::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["alpha"] = alpha_;
  return config;
}

std::shared_ptr<LeakyReLU> LeakyReLU::from_config(const Config& config) {
  ConfigReader r(config, "LeakyReLU");
  const double alpha = r.has("alpha") ? r.number("alpha") : r.number("negative_slope", 0.3);  // Keras 3 name
  if (!(alpha >= 0)) r.fail("alpha", "must be >= 0, got " + std::to_string(alpha));
  return r.finish(std::make_shared<LeakyReLU>(LeakyReLUOptions{.alpha = alpha, .name = r.name(), .dtype = r.dtype()}));
}

LeakyReLU::LeakyReLU(LeakyReLUOptions options)
    : Layer("LeakyReLU", options.name, std::nullopt, options.dtype), alpha_(options.alpha) {
  if (!(alpha_ >= 0)) throw std::invalid_argument(describe() + ": alpha must be >= 0, got " + std::to_string(alpha_));
}

Tensor LeakyReLU::call(const Tensor& x, bool) { return leaky_relu(x, alpha_); }

}  // namespace tapeflow::layers
