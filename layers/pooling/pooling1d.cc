#include "layers/pooling/pooling1d.h"

#include <stdexcept>

#include "layers/internal/config_integers.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/conv_ops.h"

namespace tapeflow::layers {

using nlohmann::json;

Pooling1D::Pooling1D(const char* class_name, bool max, Pooling1DOptions o)
    : Layer(class_name, o.name, std::nullopt, o.dtype), max_(max), pool_size_(o.pool_size),
      strides_(o.strides.value_or(o.pool_size)), padding_(o.padding) {
  if (pool_size_ < 1 || strides_ < 1)
    throw std::invalid_argument(describe() + ": pool_size and strides must be positive, got pool_size " +
                                std::to_string(pool_size_) + ", strides " + std::to_string(strides_));
  if (padding_ != "valid" && padding_ != "same")
    throw std::invalid_argument(describe() + ": padding must be \"valid\" or \"same\", got \"" + padding_ + "\"");
}

Shape Pooling1D::compute_output_shape(const Shape& s) const {
  if (s.rank() != 3)
    throw std::invalid_argument(describe() + ": expected inputs [batch, steps, features], got shape " + s.to_string());
  const std::int64_t n = padding_ == "same" ? (s[1] + strides_ - 1) / strides_
                                            : (s[1] >= pool_size_ ? (s[1] - pool_size_) / strides_ + 1 : 0);
  if (n < 1)
    throw std::invalid_argument(describe() + ": input shape " + s.to_string() + " is too short for pool_size " +
                                std::to_string(pool_size_));
  return Shape{s[0], n, s[2]};
}

Tensor Pooling1D::call(const Tensor& x, bool) {
  const Shape out = compute_output_shape(x.shape());
  const std::string p = padding_ == "same" ? "SAME" : "VALID";
  const Tensor x4 = expand_dims(x, 1);
  return reshape(max_ ? max_pool2d(x4, {1, pool_size_}, {1, strides_}, p) : avg_pool2d(x4, {1, pool_size_}, {1, strides_}, p),
                 out);
}

Config Pooling1D::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["pool_size"] = json::array({pool_size_});
  c["padding"] = padding_;
  c["strides"] = json::array({strides_});
  c["data_format"] = "channels_last";
  return config;
}

template <class L>
std::shared_ptr<L> Pooling1D::make_from_config(const Config& config, const char* class_name) {
  ConfigReader r(config, class_name);
  if (r.string("data_format", "channels_last") != "channels_last")
    r.fail("data_format", "only channels_last is supported, got '" + r.string("data_format") + "'");
  Pooling1DOptions o{.pool_size = internal::single_integer(r, "pool_size", 2), .padding = r.string("padding", "valid"), .name = r.name(),
                     .dtype = r.dtype()};
  if (r.has("strides")) o.strides = internal::single_integer(r, "strides", o.pool_size);
  try {
    return r.finish(std::make_shared<L>(std::move(o)));
  } catch (const std::invalid_argument& e) {
    r.fail("pool_size/strides/padding", e.what());
  }
}

MaxPooling1D::MaxPooling1D(Pooling1DOptions options) : Pooling1D("MaxPooling1D", true, std::move(options)) {}
AveragePooling1D::AveragePooling1D(Pooling1DOptions options)
    : Pooling1D("AveragePooling1D", false, std::move(options)) {}

std::shared_ptr<MaxPooling1D> MaxPooling1D::from_config(const Config& config) {
  return make_from_config<MaxPooling1D>(config, "MaxPooling1D");
}
std::shared_ptr<AveragePooling1D> AveragePooling1D::from_config(const Config& config) {
  return make_from_config<AveragePooling1D>(config, "AveragePooling1D");
}

}  // namespace tapeflow::layers
