#include "layers/normalization/layer_normalization.h"

#include <algorithm>
#include <stdexcept>

#include "layers/internal/normalized_axes.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/normalization_ops.h"

namespace tapeflow::layers {

LayerNormalization::LayerNormalization(LayerNormalizationOptions options)
    : Layer("LayerNormalization", options.name, std::nullopt, options.dtype), options_(std::move(options)) {
  internal::check_axis_and_epsilon(describe(), options_.axis, options_.epsilon);
}

std::vector<int> LayerNormalization::axes_for(const Shape& s) const {
  return internal::normalized_axes(describe(), options_.axis, s);
}

void LayerNormalization::build(const Shape& input_shape) {
  axes_for(input_shape);
  param_shape_ = Shape{};
  for (int a : options_.axis) param_shape_.push_back(input_shape[a < 0 ? a + input_shape.rank() : a]);
  if (options_.scale) gamma_ = add_weight("gamma", param_shape_, options_.gamma_initializer);
  if (options_.center) beta_ = add_weight("beta", param_shape_, options_.beta_initializer);
  Layer::build(input_shape);
}

Shape LayerNormalization::compute_output_shape(const Shape& input_shape) const {
  axes_for(input_shape);
  return input_shape;
}

Tensor LayerNormalization::call(const Tensor& x, bool) {
  const Shape& s = x.shape();
  const std::vector<int> axes = axes_for(s);
  std::int64_t n = 1;
  bool fits = true;
  for (std::size_t i = 0; i < options_.axis.size(); ++i) {
    const int a = options_.axis[i] < 0 ? options_.axis[i] + s.rank() : options_.axis[i];
    fits = fits && s[a] == param_shape_[static_cast<int>(i)];
    n *= s[a];
  }
  if (!fits)
    throw std::invalid_argument(describe() + ": expected the normalized axes to have shape " +
                                param_shape_.to_string() + " (as built), got input shape " + s.to_string());
  // The common case (the last axis, center and scale) is one fused op: one pass over the
  // activations each way instead of three ops on the tape.
  if (axes.size() == 1 && axes[0] == s.rank() - 1 && options_.scale && options_.center)
    return layer_norm_affine(x, gamma_.read(), beta_.read(), options_.epsilon);
  // Move the normalized axes last (a no-op for trailing ones), normalize the flattened rows.
  std::vector<int> perm;
  for (int i = 0; i < s.rank(); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) perm.push_back(i);
  for (int a : axes) perm.push_back(a);
  bool identity = true;
  for (int i = 0; i < s.rank(); ++i) identity = identity && perm[static_cast<std::size_t>(i)] == i;
  Tensor xt = identity ? x : transpose(x, perm);
  const Shape moved = xt.shape();
  Tensor y = layer_norm(reshape(xt, std::vector<std::int64_t>{-1, n}), options_.epsilon);
  if (options_.scale) y = y * reshape(gamma_.read(), std::vector<std::int64_t>{n});
  if (options_.center) y = y + reshape(beta_.read(), std::vector<std::int64_t>{n});
  y = reshape(y, moved);
  if (identity) return y;
  std::vector<int> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inverse[static_cast<std::size_t>(perm[i])] = static_cast<int>(i);
  return transpose(y, inverse);
}

Config LayerNormalization::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  if (options_.axis.size() == 1)
    c["axis"] = options_.axis[0];
  else
    c["axis"] = options_.axis;
  c["epsilon"] = options_.epsilon;
  c["center"] = options_.center;
  c["scale"] = options_.scale;
  c["rms_scaling"] = false;
  c["beta_initializer"] = serialize_initializer(options_.beta_initializer);
  c["gamma_initializer"] = serialize_initializer(options_.gamma_initializer);
  for (const char* k : {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"}) c[k] = nullptr;
  return config;
}

std::shared_ptr<LayerNormalization> LayerNormalization::from_config(const Config& config) {
  ConfigReader r(config, "LayerNormalization");
  for (const char* k : {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"})
    r.require_null(k);
  if (r.boolean("rms_scaling", false)) r.fail("rms_scaling", "not supported by tapeflow (use RMSNormalization)");
  const std::vector<int> axis = internal::axis_from_config(r);
  LayerNormalizationOptions o{.axis = axis,
                              .epsilon = r.number("epsilon", 1e-3),
                              .center = r.boolean("center", true),
                              .scale = r.boolean("scale", true),
                              .beta_initializer = r.initializer("beta_initializer", "zeros"),
                              .gamma_initializer = r.initializer("gamma_initializer", "ones"),
                              .name = r.name(),
                              .dtype = r.dtype()};
  try {
    return r.finish(std::make_shared<LayerNormalization>(std::move(o)));
  } catch (const std::invalid_argument& e) {
    r.fail("axis/epsilon", e.what());
  }
}

}  // namespace tapeflow::layers
