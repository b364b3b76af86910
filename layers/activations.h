// Activation functions by Keras name, for Dense(.activation) and the Activation layer.
//
// Facts:    "relu", "sigmoid", "tanh", "softmax" (last axis), "elu" (alpha 1), "leaky_relu"
//           (alpha 0.2, as keras.activations.leaky_relu), "softplus", "hard_sigmoid" (Keras 3's
//           relu6(x + 3) / 6, not Keras 2's clip(0.2 x + 0.5, 0, 1)), "gelu" (exact, x Φ(x): Keras's
//           default approximate=False), "linear" and "" (identity).
// Errors:   std::invalid_argument for an unknown name (lists the known ones).
// Gradient: through the tapeflow ops they are made of.
// Ref:      keras/src/activations/activations.py, keras.activations.get
#pragma once

#include <string>

#include "tape/core/tensor.h"

namespace tapeflow::layers::activations {

// An element-wise (softmax: last-axis) activation: a tensor -> a tensor of the same shape.
using ActivationFn = Tensor (*)(const Tensor&);

// The function for a Keras name; nullptr for "linear" / "" (callers skip the op).
ActivationFn get(const std::string& name);
// Softmax over `axis` (the fused tapeflow::softmax op). Shapes: any rank >= 1; same shape out.
Tensor softmax(const Tensor& x, int axis = -1);
// Identity (what "linear" means).
Tensor linear(const Tensor& x);

}  // namespace tapeflow::layers::activations
