#include "layers/activations.h"

#include <stdexcept>

#include "tape/ops/math_ops.h"
#include "tape/ops/nn_ops.h"
#include "tape/ops/normalization_ops.h"

namespace tapeflow::layers::activations {

Tensor softmax(const Tensor& x, int axis) { return tapeflow::softmax(x, axis); }

Tensor linear(const Tensor& x) { return x; }

namespace {
Tensor softmax_last(const Tensor& x) { return tapeflow::softmax(x, -1); }
Tensor relu_fn(const Tensor& x) { return tapeflow::relu(x); }
Tensor sigmoid_fn(const Tensor& x) { return tapeflow::sigmoid(x); }
Tensor tanh_fn(const Tensor& x) { return tapeflow::tanh(x); }
Tensor elu_fn(const Tensor& x) { return tapeflow::elu(x); }
Tensor leaky_relu_fn(const Tensor& x) { return tapeflow::leaky_relu(x, 0.2); }
Tensor softplus_fn(const Tensor& x) { return tapeflow::softplus(x); }
// Keras 3: relu6(x + 3) / 6 (Keras 2's was 0.2 x + 0.5 clipped).
Tensor hard_sigmoid_fn(const Tensor& x) { return tapeflow::clip_by_value(x + 3.0, 0.0, 6.0) / 6.0; }
Tensor gelu_fn(const Tensor& x) { return tapeflow::gelu(x, false); }
}  // namespace

ActivationFn get(const std::string& name) {
  if (name.empty() || name == "linear") return nullptr;
  if (name == "relu") return relu_fn;
  if (name == "sigmoid") return sigmoid_fn;
  if (name == "tanh") return tanh_fn;
  if (name == "softmax") return softmax_last;
  if (name == "elu") return elu_fn;
  if (name == "leaky_relu") return leaky_relu_fn;
  if (name == "softplus") return softplus_fn;
  if (name == "hard_sigmoid") return hard_sigmoid_fn;
  if (name == "gelu") return gelu_fn;
  throw std::invalid_argument("activations::get: unknown activation '" + name +
                              "' (known: relu, sigmoid, tanh, softmax, elu, leaky_relu, softplus, hard_sigmoid, gelu, "
                              "linear)");
}

}  // namespace tapeflow::layers::activations
