#include "layers/flatten.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"

namespace tapeflow::layers {

Flatten::Flatten(FlattenOptions options) : Layer("Flatten", options.name, std::nullopt, options.dtype) {}

Config Flatten::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["data_format"] = "channels_last";
  return config;
}

std::shared_ptr<Flatten> Flatten::from_config(const Config& config) {
  ConfigReader r(config, "Flatten");
  if (r.string("data_format", "channels_last") != "channels_last")
    r.fail("data_format", "only channels_last is supported, got '" + r.string("data_format") + "'");
  return r.finish(std::make_shared<Flatten>(FlattenOptions{.name = r.name(), .dtype = r.dtype()}));
}

Shape Flatten::compute_output_shape(const Shape& s) const {
  if (s.rank() < 1) throw std::invalid_argument(describe() + ": expected inputs with a batch axis, got a scalar");
  std::int64_t rest = 1;
  for (int i = 1; i < s.rank(); ++i) rest *= s[i];
  return Shape{s[0], rest};
}

Tensor Flatten::call(const Tensor& x, bool) {
  Shape out = compute_output_shape(x.shape());
  return out == x.shape() ? x : reshape(x, out);
}

}  // namespace tapeflow::layers
