#include "layers/activation.h"

#include <stdexcept>

#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

Activation::Activation(ActivationOptions options)
    : Layer("Activation", options.name), fn_(activations::get(options.activation)) {}

Tensor Activation::call(const Tensor& x, bool) { return fn_ ? fn_(x) : x; }

LeakyReLU::LeakyReLU(LeakyReLUOptions options) : Layer("LeakyReLU", options.name), alpha_(options.alpha) {
  if (!(alpha_ >= 0)) throw std::invalid_argument(describe() + ": alpha must be >= 0, got " + std::to_string(alpha_));
}

Tensor LeakyReLU::call(const Tensor& x, bool) { return leaky_relu(x, alpha_); }

}  // namespace tapeflow::layers
