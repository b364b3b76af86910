// Conv1D: 1-D convolution over steps, activation(conv1d(inputs, kernel) + bias).
//
// Shapes:   inputs [N, steps, C] -> [N, out_steps, filters]; eff = (kernel_size - 1) dilation_rate + 1;
//           "valid": out_steps = (steps - eff) / strides + 1, "same" and "causal": ceil(steps / strides).
// Weights:  "<name>/kernel:0" [kernel_size, C, filters] (Keras's layout); "<name>/bias:0" [filters] if use_bias.
// DTypes:   float32 (default) or float64 via .dtype.
// Facts:    runs as conv2d on a [N, 1, steps, C] image with a [1, kernel_size, C, filters] kernel (one
//           op, so gradients of any order are conv2d's). "same" pads as TF (the extra step at the
//           end); "causal" pads (kernel_size - 1) dilation_rate zeros on the left only, so output[t]
//           sees inputs[:t + 1] (Keras's _compute_causal_padding). kernel_initializer glorot_uniform
//           with Keras's conv fans (fan_in = kernel_size C, fan_out = kernel_size filters).
//           channels_last only, groups 1; `training` changes nothing.
// Errors:   std::invalid_argument at construction for filters <= 0, kernel_size / strides /
//           dilation_rate < 1, strides > 1 together with dilation_rate > 1 (as Keras), padding not
//           "valid" / "same" / "causal", an unknown activation; at call for inputs that are not rank 3,
//           whose channels differ from the built kernel's, or too short for the kernel (message names
//           the layer and the shapes).
// Ref:      keras/src/layers/convolutional/conv1d.py, base_conv.py
#pragma once

#include "layers/activations.h"
#include "layers/layer.h"

namespace tapeflow::layers {

struct Conv1DOptions {
  std::int64_t filters = 0;
  std::int64_t kernel_size = 0;
  std::int64_t strides = 1;
  std::string padding = "valid";  // "valid", "same" or "causal"
  std::int64_t dilation_rate = 1;
  std::string activation = "";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  std::string name = "";
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the enclosing model's dtype
};

class Conv1D : public Layer {
 public:
  explicit Conv1D(Conv1DOptions options);
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // Keras's config (kernel_size, strides, dilation_rate as 1-element lists) and its inverse.
  nlohmann::json get_config() const override;
  static std::shared_ptr<Conv1D> from_config(const nlohmann::json& config);
  const Conv1DOptions& options() const { return options_; }

 private:
  void check_input(const Shape& s) const;
  Conv1DOptions options_;
  activations::ActivationFn activation_;
  Variable kernel_, bias_;
};

}  // namespace tapeflow::layers
