#include "layers/convolutional/conv1d.h"

#include <stdexcept>

#include "layers/internal/config_integers.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/conv_ops.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

using nlohmann::json;

Conv1D::Conv1D(Conv1DOptions options)
    : Layer("Conv1D", options.name, options.seed, options.dtype),
      options_(std::move(options)),
      activation_(activations::get(options_.activation)) {
  const auto& o = options_;
  if (o.filters <= 0)
    throw std::invalid_argument(describe() + ": filters must be positive, got " + std::to_string(o.filters));
  if (o.kernel_size < 1 || o.strides < 1 || o.dilation_rate < 1)
    throw std::invalid_argument(describe() + ": kernel_size, strides and dilation_rate must be positive, got " +
                                std::to_string(o.kernel_size) + ", " + std::to_string(o.strides) + ", " +
                                std::to_string(o.dilation_rate));
  if (o.strides > 1 && o.dilation_rate > 1)
    throw std::invalid_argument(describe() + ": strides > 1 not supported in conjunction with dilation_rate > 1, got strides " +
                                std::to_string(o.strides) + " and dilation_rate " + std::to_string(o.dilation_rate));
  if (o.padding != "valid" && o.padding != "same" && o.padding != "causal")
    throw std::invalid_argument(describe() + ": padding must be \"valid\", \"same\" or \"causal\", got \"" + o.padding + "\"");
}

void Conv1D::check_input(const Shape& s) const {
  if (s.rank() != 3)
    throw std::invalid_argument(describe() + ": expected inputs [batch, steps, channels], got shape " + s.to_string());
  if (kernel_.defined() && s[2] != kernel_.shape()[1])
    throw std::invalid_argument(describe() + ": expected inputs with " + std::to_string(kernel_.shape()[1]) +
                                " channels (last axis) as the layer was built for, got shape " + s.to_string() +
                                " (kernel " + kernel_.shape().to_string() + ")");
}

void Conv1D::build(const Shape& input_shape) {
  check_input(input_shape);
  const auto& o = options_;
  kernel_ = add_weight("kernel", {o.kernel_size, input_shape[2], o.filters}, o.kernel_initializer);
  if (o.use_bias) bias_ = add_weight("bias", {o.filters}, o.bias_initializer);
  Layer::build(input_shape);
}

Shape Conv1D::compute_output_shape(const Shape& s) const {
  check_input(s);
  const auto& o = options_;
  const std::int64_t eff = (o.kernel_size - 1) * o.dilation_rate + 1;
  const std::int64_t n = o.padding == "valid" ? (s[1] >= eff ? (s[1] - eff) / o.strides + 1 : 0)
                                              : (s[1] + o.strides - 1) / o.strides;
  if (n < 1)
    throw std::invalid_argument(describe() + ": input shape " + s.to_string() + " is too short for kernel_size " +
                                std::to_string(o.kernel_size) + " (dilation_rate " + std::to_string(o.dilation_rate) +
                                ") with padding \"" + o.padding + "\"");
  return Shape{s[0], n, o.filters};
}

Tensor Conv1D::call(const Tensor& x, bool) {
  const Shape out = compute_output_shape(x.shape());
  const auto& o = options_;
  const Padding2D padding = o.padding == "causal"
                                ? Padding2D(std::array<std::int64_t, 4>{0, 0, (o.kernel_size - 1) * o.dilation_rate, 0})
                                : Padding2D(o.padding == "same" ? "SAME" : "VALID");
  Tensor y = conv2d(expand_dims(x, 1), expand_dims(kernel_.read(), 0), {1, o.strides}, padding, {1, o.dilation_rate});
  y = reshape(y, out);
  if (o.use_bias) y = y + bias_.read();
  return activation_ ? activation_(y) : y;
}

Config Conv1D::get_config() const {
  const auto& o = options_;
  Config config = base_config();
  json& c = json_of(config);
  c["filters"] = o.filters;
  c["kernel_size"] = json::array({o.kernel_size});
  c["strides"] = json::array({o.strides});
  c["padding"] = o.padding;
  c["data_format"] = "channels_last";
  c["dilation_rate"] = json::array({o.dilation_rate});
  c["groups"] = 1;
  c["activation"] = o.activation.empty() ? "linear" : o.activation;
  c["use_bias"] = o.use_bias;
  c["kernel_initializer"] = serialize_initializer(o.kernel_initializer);
  c["bias_initializer"] = serialize_initializer(o.bias_initializer);
  for (const char* k : {"kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
                        "bias_constraint"})
    c[k] = nullptr;
  return config;
}

std::shared_ptr<Conv1D> Conv1D::from_config(const Config& config) {
  ConfigReader r(config, "Conv1D");
  if (r.string("data_format", "channels_last") != "channels_last")
    r.fail("data_format", "only channels_last is supported, got '" + r.string("data_format") + "'");
  for (const char* k : {"kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
                        "bias_constraint"})
    r.require_null(k);
  if (r.integer("groups", 1) != 1) r.fail("groups", "only groups = 1 is supported");
  Conv1DOptions o{.filters = r.integer("filters"),
                  .kernel_size = internal::single_integer(r, "kernel_size", 0),
                  .strides = internal::single_integer(r, "strides", 1),
                  .padding = r.string("padding", "valid"),
                  .dilation_rate = internal::single_integer(r, "dilation_rate", 1),
                  .activation = r.string("activation", "linear"),
                  .use_bias = r.boolean("use_bias", true),
                  .kernel_initializer = r.initializer("kernel_initializer", "glorot_uniform"),
                  .bias_initializer = r.initializer("bias_initializer", "zeros"),
                  .name = r.name(),
                  .dtype = r.dtype()};
  if (o.activation == "linear") o.activation = "";
  try {
    return r.finish(std::make_shared<Conv1D>(std::move(o)));
  } catch (const std::invalid_argument& e) {
    r.fail("filters/kernel_size/strides/padding/dilation_rate", e.what());
  }
}

}  // namespace tapeflow::layers
