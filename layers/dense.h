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

struct DenseOptions {
  std::int64_t units = 0;
  std::string activation = "";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  double kernel_regularizer_l2 = 0.0;
  std::string name = "";
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the dtype of the model it joins
};

class Dense : public Layer {
 public:
  explicit Dense(DenseOptions options);
  explicit Dense(std::int64_t units, const std::string& activation = "");

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;

  std::int64_t units() const { return options_.units; }
  const DenseOptions& options() const { return options_; }
  // Errors: std::logic_error before build (kernel) / without bias (bias).
  const Variable& kernel() const;
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
