#include "layers/pooling/global_pooling1d.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::layers {
namespace {

void check_rank3(const std::string& who, const Shape& s) {
  if (s.rank() != 3)
    throw std::invalid_argument(who + ": expected inputs [batch, steps, features], got shape " + s.to_string());
}

}  // namespace

GlobalPooling1D::GlobalPooling1D(const char* class_name, bool max, GlobalPooling1DOptions o)
    : Layer(class_name, o.name, std::nullopt, o.dtype), max_(max), keepdims_(o.keepdims) {}

Shape GlobalPooling1D::compute_output_shape(const Shape& s) const {
  check_rank3(describe(), s);
  return keepdims_ ? Shape{s[0], 1, s[2]} : Shape{s[0], s[2]};
}

Tensor GlobalPooling1D::call(const Tensor& x, bool) {
  check_rank3(describe(), x.shape());
  return max_ ? reduce_max(x, 1, keepdims_) : reduce_mean(x, 1, keepdims_);
}

Tensor GlobalPooling1D::call(const Tensor& x, const Tensor& mask, bool training) {
  if (!mask.defined() || max_) return (*this)(x, training);
  const Tensor xin = begin_call(x);
  check_rank3(describe(), xin.shape());
  if (mask.rank() != 2 || mask.shape()[0] != xin.shape()[0] || mask.shape()[1] != xin.shape()[1])
    throw std::invalid_argument(describe() + ": the mask must be [batch, steps] = [" + std::to_string(xin.shape()[0]) +
                                ", " + std::to_string(xin.shape()[1]) + "] for inputs " + xin.shape().to_string() +
                                ", got mask " + mask.shape().to_string());
  const Tensor m = expand_dims(cast(mask, xin.dtype()), -1);  // [batch, steps, 1]
  return reduce_sum(xin * m, 1, keepdims_) / reduce_sum(m, 1, keepdims_);
}

Config GlobalPooling1D::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["data_format"] = "channels_last";
  c["keepdims"] = keepdims_;
  return config;
}

template <class L>
std::shared_ptr<L> GlobalPooling1D::make_from_config(const Config& config, const char* class_name) {
  ConfigReader r(config, class_name);
  if (r.string("data_format", "channels_last") != "channels_last")
    r.fail("data_format", "only channels_last is supported, got '" + r.string("data_format") + "'");
  return r.finish(std::make_shared<L>(
      GlobalPooling1DOptions{.keepdims = r.boolean("keepdims", false), .name = r.name(), .dtype = r.dtype()}));
}

GlobalAveragePooling1D::GlobalAveragePooling1D(GlobalPooling1DOptions options)
    : GlobalPooling1D("GlobalAveragePooling1D", false, std::move(options)) {}
GlobalMaxPooling1D::GlobalMaxPooling1D(GlobalPooling1DOptions options)
    : GlobalPooling1D("GlobalMaxPooling1D", true, std::move(options)) {}

std::shared_ptr<GlobalAveragePooling1D> GlobalAveragePooling1D::from_config(const Config& config) {
  return make_from_config<GlobalAveragePooling1D>(config, "GlobalAveragePooling1D");
}
std::shared_ptr<GlobalMaxPooling1D> GlobalMaxPooling1D::from_config(const Config& config) {
  return make_from_config<GlobalMaxPooling1D>(config, "GlobalMaxPooling1D");
}

}  // namespace tapeflow::layers
