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

struct Conv2DOptions {
  std::int64_t filters = 0;
  std::array<std::int64_t, 2> kernel_size = {0, 0};
  std::array<std::int64_t, 2> strides = {1, 1};
  std::string padding = "valid";  // "valid" or "same"
  std::array<std::int64_t, 2> dilation_rate = {1, 1};
  std::string activation = "";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  double kernel_regularizer_l2 = 0.0;
  std::string name = "";
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the enclosing model's dtype
};
using Conv2DTransposeOptions = Conv2DOptions;

// Shared by Conv2D and Conv2DTranspose: options, weights, bias + activation, checks.
class ConvBase : public Layer {
 public:
  // activation(convolution(inputs)).
  Tensor call(const Tensor& inputs, bool training) override;
  const Conv2DOptions& options() const { return options_; }
  // Layer::begin_call (casts, builds on the first call), public for the models' fusion pass
  // (models/internal/fusion.h), which runs the layer's math as other ops than call()'s.
  using Layer::begin_call;
  // The layer's output before its activation, conv(inputs, kernel) + bias, for inputs that
  // begin_call() has prepared. Errors: as call() (names the layer).
  Tensor convolution(const Tensor& inputs);
  // The layer's activation applied to y (y itself without one).
  Tensor activate(const Tensor& y) const { return activation_ ? activation_(y) : y; }
  // Errors: std::logic_error before build (kernel) / without bias (bias).
  const Variable& kernel() const;
  const Variable& bias() const;

 protected:
  ConvBase(const char* class_name, Conv2DOptions options);
  // Creates kernel (shape from the input channels) and bias.
  void build_weights(const Shape& input_shape, bool transpose);
  // The convolution of checked inputs with the kernel (no bias, no activation).
  virtual Tensor convolve(const Tensor& inputs) = 0;
  // Index of the input-channel dim in the kernel (2 for Conv2D, 3 for Conv2DTranspose).
  virtual int kernel_in_axis() const = 0;
  std::vector<Tensor> regularization_losses() const override;
  void check_input(const Shape& s) const;

  Conv2DOptions options_;
  activations::ActivationFn activation_;
  Variable kernel_;
  Variable bias_;
};

class Conv2D : public ConvBase {
 public:
  explicit Conv2D(Conv2DOptions options);
  // Keras's config (tf.keras 2.x fields; channels_last only) and its inverse; see layers/serialization.h.
  nlohmann::json get_config() const override;
  static std::shared_ptr<Conv2D> from_config(const nlohmann::json& config);
  void build(const Shape& input_shape) override;
  Shape compute_output_shape(const Shape& input_shape) const override;

 protected:
  Tensor convolve(const Tensor& inputs) override;
  int kernel_in_axis() const override { return 2; }
};

class Conv2DTranspose : public ConvBase {
 public:
  explicit Conv2DTranspose(Conv2DTransposeOptions options);
  // Keras's config (tf.keras 2.x fields; channels_last only) and its inverse; see layers/serialization.h.
  nlohmann::json get_config() const override;
  static std::shared_ptr<Conv2DTranspose> from_config(const nlohmann::json& config);
  void build(const Shape& input_shape) override;
  Shape compute_output_shape(const Shape& input_shape) const override;

 protected:
  Tensor convolve(const Tensor& inputs) override;
  int kernel_in_axis() const override { return 3; }
};

}  // namespace tapeflow::layers
