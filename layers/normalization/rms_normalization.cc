#include "layers/normalization/rms_normalization.h"

#include <algorithm>
#include <stdexcept>

#include "layers/internal/normalized_axes.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::layers {

RMSNormalization::RMSNormalization(RMSNormalizationOptions options)
    : Layer("RMSNormalization", options.name, std::nullopt, options.dtype), options_(std::move(options)) {
  internal::check_axis_and_epsilon(describe(), options_.axis, options_.epsilon);
}

std::vector<int> RMSNormalization::axes_for(const Shape& s) const {
  return internal::normalized_axes(describe(), options_.axis, s);
}

void RMSNormalization::build(const Shape& input_shape) {
  param_shape_ = Shape{};
  for (int a : axes_for(input_shape)) param_shape_.push_back(input_shape[a]);
  scale_ = add_weight("scale", param_shape_, "ones");
  Layer::build(input_shape);
}

Shape RMSNormalization::compute_output_shape(const Shape& input_shape) const {
  axes_for(input_shape);
  return input_shape;
}

Tensor RMSNormalization::call(const Tensor& x, bool) {
  const Shape& s = x.shape();
  const std::vector<int> axes = axes_for(s);
  // The scale broadcast to the input: the normalized dims kept, every other dim 1.
  Shape broadcast(std::vector<std::int64_t>(static_cast<std::size_t>(s.rank()), 1));
  bool fits = axes.size() == static_cast<std::size_t>(param_shape_.rank());
  for (std::size_t i = 0; fits && i < axes.size(); ++i) {
    fits = s[axes[i]] == param_shape_[static_cast<int>(i)];
    broadcast[axes[i]] = s[axes[i]];
  }
  if (!fits)
    throw std::invalid_argument(describe() + ": expected the normalized axes to have shape " +
                                param_shape_.to_string() + " (as built), got input shape " + s.to_string());
  const Tensor rrms = rsqrt(reduce_mean(square(x), axes, true) + options_.epsilon);
  return x * rrms * reshape(scale_.read(), broadcast);
}

Config RMSNormalization::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  if (options_.axis.size() == 1)
    c["axis"] = options_.axis[0];
  else
    c["axis"] = options_.axis;
  c["epsilon"] = options_.epsilon;
  return config;
}

std::shared_ptr<RMSNormalization> RMSNormalization::from_config(const Config& config) {
  ConfigReader r(config, "RMSNormalization");
  const std::vector<int> axis = internal::axis_from_config(r);
  RMSNormalizationOptions o{.axis = axis, .epsilon = r.number("epsilon", 1e-6), .name = r.name(), .dtype = r.dtype()};
  try {
    return r.finish(std::make_shared<RMSNormalization>(std::move(o)));
  } catch (const std::invalid_argument& e) {
    r.fail("axis/epsilon", e.what());
  }
}

}  // namespace tapeflow::layers
