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

// Conv1D's keyword arguments, in Keras's order (channels_last, groups 1). Ref: keras.layers.Conv1D
struct Conv1DOptions {
  // Dimensionality of the output space: the number of output channels (required, > 0).
  std::int64_t filters = 0;
  // Length of the convolution window in steps (required, >= 1).
  std::int64_t kernel_size = 0;
  // Step of the window (default 1, >= 1).
  std::int64_t strides = 1;
  // "valid" (default; no padding), "same" (out_steps = ceil(steps / strides), TF's padding) or
  // "causal" ((kernel_size - 1) · dilation_rate zeros on the left: output[t] sees inputs[:t + 1]).
  std::string padding = "valid";
  // Spacing between kernel taps (default 1, >= 1; > 1 only with strides 1).
  std::int64_t dilation_rate = 1;
  // keras.activations name applied to conv + bias; "" or "linear": none.
  std::string activation = "";
  // Whether to add the "bias" weight [filters] (default true).
  bool use_bias = true;
  // Initializer of "kernel" [kernel_size, C, filters] (default glorot_uniform, Keras's conv fans).
  Initializer kernel_initializer = "glorot_uniform";
  // Initializer of "bias" (default zeros).
  Initializer bias_initializer = "zeros";
  // The layer's name; empty: the unique snake_case class name ("conv1d", "conv1d_1", ...).
  std::string name = "";
  // Seeds the layer's Generator (its weight initializers); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// 1-D convolution over steps, activation(conv1d(inputs, kernel) + bias).
// Shapes: [N, steps, C] -> [N, out_steps, filters] (out_steps in the file comment). Ref: keras.layers.Conv1D
class Conv1D : public Layer {
 public:
  // Errors: std::invalid_argument for the option errors in the file comment (names the layer).
  explicit Conv1D(Conv1DOptions options);
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  // Keras's config (kernel_size, strides, dilation_rate as 1-element lists) and its inverse.
  Config get_config() const override;
  // Builds a Conv1D from its Keras config (kernel_size, strides, dilation_rate as [n] or n; unknown
  // fields ignored). Errors: std::invalid_argument naming the layer and field for a missing filters,
  // data_format other than channels_last, groups != 1, a regularizer or constraint that is not null,
  // and the constructor's errors.
  static std::shared_ptr<Conv1D> from_config(const Config& config);
  // The options it was made with.
  const Conv1DOptions& options() const { return options_; }

 private:
  void check_input(const Shape& s) const;
  Conv1DOptions options_;
  activations::ActivationFn activation_;
  Variable kernel_, bias_;
};

}  // namespace tapeflow::layers
