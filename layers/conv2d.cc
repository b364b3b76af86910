#include "layers/conv2d.h"

#include <stdexcept>

#include "layers/internal/nhwc.h"

#include "tape/kernels/window.h"
#include "tape/ops/conv_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::layers {

namespace {

std::string pair_string(const std::array<std::int64_t, 2>& p) {
  std::string s = "(";  // appended piecewise: "(" + std::to_string(...) trips GCC 12's -Wrestrict false positive
  s.append(std::to_string(p[0])).append(", ").append(std::to_string(p[1])).append(")");
  return s;
}

// "valid" -> "VALID", "same" -> "SAME" (the op's spelling).
std::string op_padding(const std::string& p) { return p == "same" ? "SAME" : "VALID"; }

}  // namespace

ConvBase::ConvBase(const char* class_name, Conv2DOptions options)
    : Layer(class_name, options.name, options.seed, options.dtype),
      options_(std::move(options)),
      activation_(activations::get(options_.activation)) {
  const auto& o = options_;
  if (o.filters <= 0)
    throw std::invalid_argument(describe() + ": filters must be positive, got " + std::to_string(o.filters));
  auto positive = [&](const char* what, const std::array<std::int64_t, 2>& p) {
    if (p[0] < 1 || p[1] < 1)
      throw std::invalid_argument(describe() + ": " + what + " must be positive, got " + pair_string(p));
  };
  positive("kernel_size", o.kernel_size);
  positive("strides", o.strides);
  positive("dilation_rate", o.dilation_rate);
  if ((o.strides[0] > 1 || o.strides[1] > 1) && (o.dilation_rate[0] > 1 || o.dilation_rate[1] > 1))
    throw std::invalid_argument(describe() + ": strides > 1 not supported in conjunction with dilation_rate > 1, got strides " +
                                pair_string(o.strides) + " and dilation_rate " + pair_string(o.dilation_rate));
  if (o.padding != "valid" && o.padding != "same")
    throw std::invalid_argument(describe() + ": padding must be \"valid\" or \"same\", got \"" + o.padding + "\"");
  if (o.kernel_regularizer_l2 < 0)
    throw std::invalid_argument(describe() + ": kernel_regularizer_l2 must be >= 0, got " +
                                std::to_string(o.kernel_regularizer_l2));
}

void ConvBase::check_input(const Shape& s) const {
  internal::check_nhwc(describe(), s);
  if (kernel_.defined() && s[3] != kernel_.shape()[kernel_in_axis()])
    throw std::invalid_argument(describe() + ": expected inputs with " +
                                std::to_string(kernel_.shape()[kernel_in_axis()]) +
                                " channels (last axis) as the layer was built for, got shape " + s.to_string() +
                                " (kernel " + kernel_.shape().to_string() + ")");
}

void ConvBase::build_weights(const Shape& input_shape, bool transpose) {
  check_input(input_shape);
  const auto& o = options_;
  const std::int64_t in = input_shape[3];
  const Shape k = transpose ? Shape{o.kernel_size[0], o.kernel_size[1], o.filters, in}
                            : Shape{o.kernel_size[0], o.kernel_size[1], in, o.filters};
  kernel_ = add_weight("kernel", k, o.kernel_initializer);
  if (o.use_bias) bias_ = add_weight("bias", {o.filters}, o.bias_initializer);
  Layer::build(input_shape);
}

Tensor ConvBase::call(const Tensor& inputs, bool) { return activate(convolution(inputs)); }

Tensor ConvBase::convolution(const Tensor& inputs) {
  compute_output_shape(inputs.shape());  // rank, channels and size errors name the layer
  Tensor y = convolve(inputs);
  if (options_.use_bias) y = y + bias_.read();
  return y;
}

const Variable& ConvBase::kernel() const {
  if (!kernel_.defined()) throw std::logic_error(describe() + ": kernel() before the layer is built");
  return kernel_;
}
const Variable& ConvBase::bias() const {
  if (!bias_.defined())
    throw std::logic_error(describe() + (options_.use_bias ? ": bias() before the layer is built" : ": use_bias is false"));
  return bias_;
}

std::vector<Tensor> ConvBase::regularization_losses() const {
  if (options_.kernel_regularizer_l2 == 0.0 || !kernel_.defined()) return {};
  return {reduce_sum(square(kernel_.read())) * options_.kernel_regularizer_l2};
}

Conv2D::Conv2D(Conv2DOptions options) : ConvBase("Conv2D", std::move(options)) {}

void Conv2D::build(const Shape& input_shape) { build_weights(input_shape, false); }

Shape Conv2D::compute_output_shape(const Shape& s) const {
  check_input(s);
  const auto& o = options_;
  Shape out = s;
  for (int i = 0; i < 2; ++i) {
    try {
      out[1 + i] = kernels::window_dim("Conv2D", op_padding(o.padding), s[1 + i], o.kernel_size[i], o.strides[i],
                                       o.dilation_rate[i])
                       .out;
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(describe() + ": input shape " + s.to_string() + " is too small for kernel_size " +
                                  pair_string(o.kernel_size) + " with padding \"" + o.padding + "\" (" + e.what() +
                                  ")");
    }
  }
  out[3] = o.filters;
  return out;
}

Tensor Conv2D::convolve(const Tensor& x) {
  const auto& o = options_;
  return conv2d(x, kernel_.read(), o.strides, op_padding(o.padding), o.dilation_rate);
}

Conv2DTranspose::Conv2DTranspose(Conv2DTransposeOptions options) : ConvBase("Conv2DTranspose", std::move(options)) {}

void Conv2DTranspose::build(const Shape& input_shape) { build_weights(input_shape, true); }

// Keras deconv_output_length (output_padding None): same: in·s; valid: in·s + max(k_eff - s, 0).
Shape Conv2DTranspose::compute_output_shape(const Shape& s) const {
  check_input(s);
  const auto& o = options_;
  Shape out = s;
  for (int i = 0; i < 2; ++i) {
    const std::int64_t eff = (o.kernel_size[i] - 1) * o.dilation_rate[i] + 1;
    out[1 + i] = s[1 + i] * o.strides[i] + (o.padding == "same" ? 0 : std::max<std::int64_t>(eff - o.strides[i], 0));
  }
  out[3] = o.filters;
  return out;
}

Tensor Conv2DTranspose::convolve(const Tensor& x) {
  const auto& o = options_;
  return conv2d_transpose(x, kernel_.read(), compute_output_shape(x.shape()), o.strides, op_padding(o.padding),
                          o.dilation_rate);
}

}  // namespace tapeflow::layers
