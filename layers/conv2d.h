// Conv2D and Conv2DTranspose: 2-D convolution layers, activation(conv(inputs, kernel) + bias).
//
// Shapes:   Conv2D: inputs [N, H, W, C] -> [N, Ho, Wo, filters]; "valid": Ho = ceil((H - eff + 1) / s),
//           "same": Ho = ceil(H / s) (eff = (k - 1) d + 1; TF's asymmetric padding).
//           Conv2DTranspose: inputs [N, h, w, C] -> [N, H, W, filters] with Keras's
//           deconv_output_length: "same" H = h s, "valid" H = h s + max(k_eff - s, 0).
// Weights:  Conv2D: "<name>/kernel:0" [kh, kw, C, filters]; Conv2DTranspose: "<name>/kernel:0"
//           [kh, kw, filters, C] (Keras's layouts); "<name>/bias:0" [filters] if use_bias.
// DTypes:   float32 (default) or float64 via .dtype.
// Facts:    channels_last only (Keras's default data_format). kernel_initializer glorot_uniform with
//           Keras's conv fans (fan_in = kh kw C, fan_out = kh kw filters). kernel_regularizer_l2 = l
//           adds l * sum(kernel²) to losses(). `training` changes nothing. A call runs conv2d
//           (conv2d_transpose), + bias and the activation as ops of their own; inside a Sequential
//           or Functional model the models' fusion pass (models/internal/fusion.h) runs a Conv2D
//           with a bias as one fused op (as TF's grappler remapper fuses Conv2D + BiasAdd + Relu).
// Errors:   std::invalid_argument at construction for filters <= 0, a kernel size / stride /
//           dilation < 1, strides > 1 together with dilation_rate > 1 (as Keras), padding other than
//           "valid"/"same", an unknown activation; at call for inputs that are not rank 4 or whose
//           channels differ from the built kernel's (message names the layer and both shapes).
// Ref:      keras/src/layers/convolutional/conv2d.py, conv2d_transpose.py, base_conv.py
#pragma once

#include <array>

#include "layers/activations.h"
#include "layers/layer.h"

namespace tapeflow::layers {

// Conv2D's and Conv2DTranspose's keyword arguments, in Keras's order (channels_last, groups 1).
// Ref: keras.layers.Conv2D, keras.layers.Conv2DTranspose
struct Conv2DOptions {
  // Dimensionality of the output space: the number of output channels (required, > 0).
  std::int64_t filters = 0;
  // Height and width of the convolution window (required, each >= 1).
  std::array<std::int64_t, 2> kernel_size = {0, 0};
  // Step of the window along height and width (default 1, 1; each >= 1); Conv2DTranspose:
  // the upsampling factor.
  std::array<std::int64_t, 2> strides = {1, 1};
  // "valid" (no padding, default) or "same" (output size ceil(input / stride); TF's padding,
  // the extra row/column at the end).
  std::string padding = "valid";
  // Spacing between kernel taps (default 1, 1; each >= 1; > 1 only with strides 1).
  std::array<std::int64_t, 2> dilation_rate = {1, 1};
  // keras.activations name applied to conv + bias; "" or "linear": none.
  std::string activation = "";
  // Whether to add the "bias" weight [filters] (default true).
  bool use_bias = true;
  // Initializer of "kernel" (default glorot_uniform, with Keras's conv fans).
  Initializer kernel_initializer = "glorot_uniform";
  // Initializer of "bias" (default zeros).
  Initializer bias_initializer = "zeros";
  // L2 factor l (>= 0): adds l · sum(kernel²) to losses() (keras.regularizers.L2); 0: none.
  double kernel_regularizer_l2 = 0.0;
  // The layer's name; empty: the unique snake_case class name ("conv2d", "conv2d_transpose", ...).
  std::string name = "";
  // Seeds the layer's Generator (its weight initializers); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};
// Conv2DTranspose takes Conv2D's arguments (Keras's output_padding is not supported).
using Conv2DTransposeOptions = Conv2DOptions;

// Shared by Conv2D and Conv2DTranspose: options, weights, bias + activation, checks.
class ConvBase : public Layer {
 public:
  // activation(convolution(inputs)).
  Tensor call(const Tensor& inputs, bool training) override;
  // The options it was made with.
  const Conv2DOptions& options() const { return options_; }
  // Layer::begin_call (casts, builds on the first call), public for the models' fusion pass
  // (models/internal/fusion.h), which runs the layer's math as other ops than call()'s.
  using Layer::begin_call;
  // The layer's output before its activation, conv(inputs, kernel) + bias, for inputs that
  // begin_call() has prepared. Errors: as call() (names the layer).
  Tensor convolution(const Tensor& inputs);
  // The layer's activation applied to y (y itself without one).
  Tensor activate(const Tensor& y) const { return activation_ ? activation_(y) : y; }
  // The weight "<name>/kernel:0" ([kh, kw, C, filters]; Conv2DTranspose [kh, kw, filters, C]).
  // Errors: std::logic_error before build.
  const Variable& kernel() const;
  // The weight "<name>/bias:0" [filters]. Errors: std::logic_error before build or without use_bias.
  const Variable& bias() const;

 protected:
  // class_name: "Conv2D" or "Conv2DTranspose". Errors: std::invalid_argument for the option
  // errors in the file comment (names the layer and the value).
  ConvBase(const char* class_name, Conv2DOptions options);
  // Creates kernel (shape from the input channels) and bias.
  void build_weights(const Shape& input_shape, bool transpose);
  // The convolution of checked inputs with the kernel (no bias, no activation).
  virtual Tensor convolve(const Tensor& inputs) = 0;
  // Index of the input-channel dim in the kernel (2 for Conv2D, 3 for Conv2DTranspose).
  virtual int kernel_in_axis() const = 0;
  std::vector<Tensor> regularization_losses() const override;
  // Errors: std::invalid_argument (naming the layer and shapes) unless `s` is [N, H, W, C] with
  // the built kernel's C.
  void check_input(const Shape& s) const;

  // The options it was made with.
  Conv2DOptions options_;
  // The activation function; null for none.
  activations::ActivationFn activation_;
  // The kernel weight; undefined before build.
  Variable kernel_;
  // The bias weight; undefined before build or without use_bias.
  Variable bias_;
};

// 2-D convolution, activation(conv2d(inputs, kernel) + bias).
// Shapes: [N, H, W, C] -> [N, Ho, Wo, filters] (Ho, Wo in the file comment). Ref: keras.layers.Conv2D
class Conv2D : public ConvBase {
 public:
  // Errors: std::invalid_argument for the option errors in the file comment (names the layer).
  explicit Conv2D(Conv2DOptions options);
  // Keras's config (tf.keras 2.x fields; channels_last only) and its inverse; see layers/serialization.h.
  Config get_config() const override;
  // Builds a Conv2D from its Keras config (kernel_size etc. as [h, w] or one integer; unknown fields
  // ignored). Errors: std::invalid_argument naming the layer and field for a missing filters or
  // kernel_size, data_format other than channels_last, groups != 1, a bias/activity regularizer or
  // constraint that is not null, and the constructor's errors.
  static std::shared_ptr<Conv2D> from_config(const Config& config);
  void build(const Shape& input_shape) override;
  Shape compute_output_shape(const Shape& input_shape) const override;

 protected:
  Tensor convolve(const Tensor& inputs) override;
  int kernel_in_axis() const override { return 2; }
};

// Transposed 2-D convolution (the gradient of Conv2D with respect to its input), activation(... + bias).
// Shapes: [N, h, w, C] -> [N, H, W, filters] (H, W in the file comment). Ref: keras.layers.Conv2DTranspose
class Conv2DTranspose : public ConvBase {
 public:
  // Errors: std::invalid_argument for the option errors in the file comment (names the layer).
  explicit Conv2DTranspose(Conv2DTransposeOptions options);
  // Keras's config (tf.keras 2.x fields; channels_last only) and its inverse; see layers/serialization.h.
  Config get_config() const override;
  // Builds a Conv2DTranspose from its Keras config (as Conv2D::from_config; output_padding must be
  // null). Errors: std::invalid_argument naming the layer and the field.
  static std::shared_ptr<Conv2DTranspose> from_config(const Config& config);
  void build(const Shape& input_shape) override;
  Shape compute_output_shape(const Shape& input_shape) const override;

 protected:
  Tensor convolve(const Tensor& inputs) override;
  int kernel_in_axis() const override { return 3; }
};

}  // namespace tapeflow::layers
