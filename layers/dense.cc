#include "layers/dense.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"

#include "tape/ops/array_ops.h"
#include "tape/ops/linalg_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::layers {

Dense::Dense(DenseOptions options)
    : Layer("Dense", options.name, options.seed, options.dtype),
      options_(std::move(options)),
      activation_(activations::get(options_.activation)) {
  if (options_.units <= 0)
    throw std::invalid_argument(describe() + ": units must be positive, got " + std::to_string(options_.units));
  if (options_.kernel_regularizer_l2 < 0)
    throw std::invalid_argument(describe() + ": kernel_regularizer_l2 must be >= 0, got " +
                                std::to_string(options_.kernel_regularizer_l2));
}

Dense::Dense(std::int64_t units, const std::string& activation)
    : Dense(DenseOptions{.units = units, .activation = activation}) {}

void Dense::build(const Shape& input_shape) {
  if (input_shape.rank() < 2)
    throw std::invalid_argument(describe() + ": expected inputs of rank >= 2, got shape " + input_shape.to_string());
  const std::int64_t in = input_shape.dim(-1);
  kernel_ = add_weight("kernel", {in, options_.units}, options_.kernel_initializer);
  if (options_.use_bias) bias_ = add_weight("bias", {options_.units}, options_.bias_initializer);
  Layer::build(input_shape);
}

Shape Dense::compute_output_shape(const Shape& input_shape) const {
  Shape out = input_shape;
  if (out.rank() < 1) throw std::invalid_argument(describe() + ": compute_output_shape of a scalar shape");
  out[out.rank() - 1] = options_.units;
  return out;
}

Tensor Dense::call(const Tensor& inputs, bool) {
  const Shape& s = inputs.shape();
  const std::int64_t in = kernel_.shape()[0];
  if (s.rank() < 2 || s.dim(-1) != in)
    throw std::invalid_argument(describe() + ": expected inputs [..., " + std::to_string(in) + "], got shape " +
                                s.to_string());
  Tensor y;
  if (s.rank() == 2) {
    y = matmul(inputs, kernel_.read());
  } else {
    y = reshape(matmul(reshape(inputs, std::vector<std::int64_t>{-1, in}), kernel_.read()), compute_output_shape(s));
  }
  if (options_.use_bias) y = y + bias_.read();
  if (activation_) y = activation_(y);
  return y;
}

const Variable& Dense::kernel() const {
  if (!kernel_.defined()) throw std::logic_error(describe() + ": kernel() before the layer is built");
  return kernel_;
}
const Variable& Dense::bias() const {
  if (!bias_.defined())
    throw std::logic_error(describe() + (options_.use_bias ? ": bias() before the layer is built" : ": use_bias is false"));
  return bias_;
}

Config Dense::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["units"] = options_.units;
  c["activation"] = options_.activation.empty() ? "linear" : options_.activation;
  c["use_bias"] = options_.use_bias;
  c["kernel_initializer"] = serialize_initializer(options_.kernel_initializer);
  c["bias_initializer"] = serialize_initializer(options_.bias_initializer);
  c["kernel_regularizer"] = nullptr;
  if (options_.kernel_regularizer_l2 > 0)
    c["kernel_regularizer"] = {{"class_name", "L1L2"}, {"config", {{"l1", 0.0}, {"l2", options_.kernel_regularizer_l2}}}};
  for (const char* k : {"bias_regularizer", "activity_regularizer", "kernel_constraint", "bias_constraint"})
    c[k] = nullptr;
  return config;
}

std::shared_ptr<Dense> Dense::from_config(const Config& config) {
  ConfigReader r(config, "Dense");
  for (const char* k : {"bias_regularizer", "activity_regularizer", "kernel_constraint", "bias_constraint"})
    r.require_null(k);
  DenseOptions o{.units = r.integer("units"),
                 .activation = r.string("activation", "linear"),
                 .use_bias = r.boolean("use_bias", true),
                 .kernel_initializer = r.initializer("kernel_initializer", "glorot_uniform"),
                 .bias_initializer = r.initializer("bias_initializer", "zeros"),
                 .kernel_regularizer_l2 = r.l2_regularizer("kernel_regularizer"),
                 .name = r.name(),
                 .dtype = r.dtype()};
  if (o.activation == "linear") o.activation = "";
  try {
    return r.finish(std::make_shared<Dense>(std::move(o)));
  } catch (const std::invalid_argument& e) {
    r.fail("units/activation", e.what());
  }
}

std::vector<Tensor> Dense::regularization_losses() const {
  if (options_.kernel_regularizer_l2 == 0.0 || !kernel_.defined()) return {};
  return {reduce_sum(square(kernel_.read())) * options_.kernel_regularizer_l2};
}

}  // namespace tapeflow::layers
