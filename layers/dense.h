// Dense: the densely connected layer, activation(inputs @ kernel + bias).
//
// Shapes:   inputs [..., in] (rank >= 2) -> [..., units]; rank > 2 applies the kernel to the last axis.
// Weights:  "<name>/kernel:0" [in, units] (kernel_initializer, default glorot_uniform),
//           "<name>/bias:0" [units] (bias_initializer, default zeros) if use_bias.
// DTypes:   float32 (default; inside a model with a dtype, the model's) or float64 via .dtype;
//           other floating inputs are cast.
// Facts:    one matmul + one bias add (+ the activation). kernel_regularizer_l2 = l adds
//           l * sum(kernel²) to losses() (keras.regularizers.L2). `training` changes nothing.
// Errors:   std::invalid_argument for units <= 0, an unknown activation (at construction), inputs of
//           rank < 2 or whose last dim differs from the built kernel's (names the layer and shapes).
// Ref:      keras/src/layers/core/dense.py
#pragma once

#include "layers/activations.h"
#include "layers/layer.h"

namespace tapeflow::layers {

// Dense's keyword arguments, in Keras's order. Ref: keras.layers.Dense
struct DenseOptions {
  // Dimensionality of the output space (required, > 0).
  std::int64_t units = 0;
  // keras.activations name applied last ("relu", "softmax", ...); "" (default) or "linear": none.
  std::string activation = "";
  // Whether to add the "bias" weight [units] (default true).
  bool use_bias = true;
  // Initializer of "kernel" [in, units] (default glorot_uniform).
  Initializer kernel_initializer = "glorot_uniform";
  // Initializer of "bias" [units] (default zeros).
  Initializer bias_initializer = "zeros";
  // L2 factor l (>= 0): adds l · sum(kernel²) to losses() (keras.regularizers.L2); 0 (default):
  // none.
  double kernel_regularizer_l2 = 0.0;
  // The layer's name; empty: the unique snake_case class name ("dense", "dense_1", ...).
  std::string name = "";
  // Seeds the layer's Generator (its weight initializers); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// The densely connected layer, activation(inputs @ kernel + bias).
// Shapes: [..., in] (rank >= 2) -> [..., units]. Weights, DTypes, Errors: the file comment.
// Ref: keras.layers.Dense
class Dense : public Layer {
 public:
  // Errors: std::invalid_argument for units <= 0, kernel_regularizer_l2 < 0 or an unknown activation
  // (names the layer).
  explicit Dense(DenseOptions options);
  // Dense({.units = units, .activation = activation}), as keras.layers.Dense(units, activation).
  explicit Dense(std::int64_t units, const std::string& activation = "");

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // Keras 2's Dense config (units, activation, use_bias, initializers, kernel_regularizer, ...).
  Config get_config() const override;
  // Builds a Dense from its Keras config (get_config()'s fields; unknown fields are ignored).
  // Errors: std::invalid_argument naming the layer and field for a missing units, a mistyped
  // field, or a bias/activity regularizer or constraint that is not null (layers/serialization.h).
  static std::shared_ptr<Dense> from_config(const Config& config);

  // The dimensionality of the output space (DenseOptions::units).
  std::int64_t units() const { return options_.units; }
  // The options it was made with.
  const DenseOptions& options() const { return options_; }
  // The weight "<name>/kernel:0" [in, units]. Errors: std::logic_error before build.
  const Variable& kernel() const;
  // The weight "<name>/bias:0" [units]. Errors: std::logic_error before build or without use_bias.
  const Variable& bias() const;

 protected:
  std::vector<Tensor> regularization_losses() const override;

 private:
  DenseOptions options_;
  activations::ActivationFn activation_;
  Variable kernel_;
  Variable bias_;
};

}  // namespace tapeflow::layers
