// Keras configs of the convolution, pooling and 2-D reshaping layers (declared in their headers).
#include <stdexcept>

#include "layers/conv2d.h"
#include "layers/pooling2d.h"
#include "layers/reshaping2d.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"

namespace tapeflow::layers {

using nlohmann::json;

namespace {

json pair_json(const std::array<std::int64_t, 2>& p) { return json::array({p[0], p[1]}); }

// kernel_size / strides / pool_size / size: [h, w] or one integer for both (Keras allows both).
std::array<std::int64_t, 2> pair_from(const ConfigReader& r, const std::string& key, std::array<std::int64_t, 2> fallback) {
  if (!r.has(key)) return fallback;
  const json& v = json_of(r.config())[key];
  if (v.is_number_integer()) return {v.get<std::int64_t>(), v.get<std::int64_t>()};
  const std::vector<std::int64_t> p = r.integers(key);
  if (p.size() != 2) r.fail(key, "expected [height, width], got " + v.dump());
  return {p[0], p[1]};
}

void require_channels_last(const ConfigReader& r) {
  if (r.string("data_format", "channels_last") != "channels_last")
    r.fail("data_format", "only channels_last is supported, got '" + r.string("data_format") + "'");
}

json conv_config(const Conv2DOptions& o, json base) {
  base["filters"] = o.filters;
  base["kernel_size"] = pair_json(o.kernel_size);
  base["strides"] = pair_json(o.strides);
  base["padding"] = o.padding;
  base["data_format"] = "channels_last";
  base["dilation_rate"] = pair_json(o.dilation_rate);
  base["activation"] = o.activation.empty() ? "linear" : o.activation;
  base["use_bias"] = o.use_bias;
  base["kernel_initializer"] = serialize_initializer(o.kernel_initializer);
  base["bias_initializer"] = serialize_initializer(o.bias_initializer);
  base["kernel_regularizer"] = nullptr;
  if (o.kernel_regularizer_l2 > 0)
    base["kernel_regularizer"] = {{"class_name", "L1L2"}, {"config", {{"l1", 0.0}, {"l2", o.kernel_regularizer_l2}}}};
  for (const char* k : {"bias_regularizer", "activity_regularizer", "kernel_constraint", "bias_constraint"}) base[k] = nullptr;
  return base;
}

Conv2DOptions conv_options(const ConfigReader& r) {
  require_channels_last(r);
  for (const char* k : {"bias_regularizer", "activity_regularizer", "kernel_constraint", "bias_constraint", "output_padding"})
    r.require_null(k);
  if (r.integer("groups", 1) != 1) r.fail("groups", "only groups = 1 is supported");
  Conv2DOptions o{.filters = r.integer("filters"),
                  .kernel_size = pair_from(r, "kernel_size", {0, 0}),
                  .strides = pair_from(r, "strides", {1, 1}),
                  .padding = r.string("padding", "valid"),
                  .dilation_rate = pair_from(r, "dilation_rate", {1, 1}),
                  .activation = r.string("activation", "linear"),
                  .use_bias = r.boolean("use_bias", true),
                  .kernel_initializer = r.initializer("kernel_initializer", "glorot_uniform"),
                  .bias_initializer = r.initializer("bias_initializer", "zeros"),
                  .kernel_regularizer_l2 = r.l2_regularizer("kernel_regularizer"),
                  .name = r.name(),
                  .dtype = r.dtype()};
  if (o.activation == "linear") o.activation = "";
  return o;
}

template <class L, class O>
std::shared_ptr<L> make(const ConfigReader& r, O options, const char* field) {
  try {
    return r.finish(std::make_shared<L>(std::move(options)));
  } catch (const std::invalid_argument& e) {
    r.fail(field, e.what());
  }
}

}  // namespace

Config Conv2D::get_config() const {
  json c = conv_config(options_, json_of(base_config()));
  c["groups"] = 1;
  return to_config(std::move(c));
}
std::shared_ptr<Conv2D> Conv2D::from_config(const Config& config) {
  ConfigReader r(config, "Conv2D");
  return make<Conv2D>(r, conv_options(r), "filters/kernel_size/strides/padding");
}

Config Conv2DTranspose::get_config() const {
  json c = conv_config(options_, json_of(base_config()));
  c["output_padding"] = nullptr;
  return to_config(std::move(c));
}
std::shared_ptr<Conv2DTranspose> Conv2DTranspose::from_config(const Config& config) {
  ConfigReader r(config, "Conv2DTranspose");
  return make<Conv2DTranspose>(r, conv_options(r), "filters/kernel_size/strides/padding");
}

Config Pooling2D::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["pool_size"] = pair_json(pool_size());
  c["padding"] = padding();
  c["strides"] = pair_json(strides());
  c["data_format"] = "channels_last";
  return config;
}

namespace {
Pooling2DOptions pooling_options(const ConfigReader& r) {
  require_channels_last(r);
  Pooling2DOptions o{.pool_size = pair_from(r, "pool_size", {2, 2}), .padding = r.string("padding", "valid"), .name = r.name(), .dtype = r.dtype()};
  if (r.has("strides")) o.strides = pair_from(r, "strides", o.pool_size);
  return o;
}
}  // namespace

std::shared_ptr<MaxPooling2D> MaxPooling2D::from_config(const Config& config) {
  ConfigReader r(config, "MaxPooling2D");
  return make<MaxPooling2D>(r, pooling_options(r), "pool_size/strides/padding");
}
std::shared_ptr<AveragePooling2D> AveragePooling2D::from_config(const Config& config) {
  ConfigReader r(config, "AveragePooling2D");
  return make<AveragePooling2D>(r, pooling_options(r), "pool_size/strides/padding");
}

Config GlobalPooling2D::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["data_format"] = "channels_last";
  c["keepdims"] = keepdims();
  return config;
}
std::shared_ptr<GlobalAveragePooling2D> GlobalAveragePooling2D::from_config(const Config& config) {
  ConfigReader r(config, "GlobalAveragePooling2D");
  require_channels_last(r);
  return make<GlobalAveragePooling2D>(r, GlobalPooling2DOptions{.keepdims = r.boolean("keepdims", false), .name = r.name(), .dtype = r.dtype()}, "keepdims");
}
std::shared_ptr<GlobalMaxPooling2D> GlobalMaxPooling2D::from_config(const Config& config) {
  ConfigReader r(config, "GlobalMaxPooling2D");
  require_channels_last(r);
  return make<GlobalMaxPooling2D>(r, GlobalPooling2DOptions{.keepdims = r.boolean("keepdims", false), .name = r.name(), .dtype = r.dtype()}, "keepdims");
}

Config UpSampling2D::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["size"] = pair_json(options_.size);
  c["data_format"] = "channels_last";
  c["interpolation"] = options_.interpolation;
  return config;
}
std::shared_ptr<UpSampling2D> UpSampling2D::from_config(const Config& config) {
  ConfigReader r(config, "UpSampling2D");
  require_channels_last(r);
  return make<UpSampling2D>(
      r, UpSampling2DOptions{.size = pair_from(r, "size", {2, 2}), .interpolation = r.string("interpolation", "nearest"), .name = r.name(), .dtype = r.dtype()},
      "size/interpolation");
}

Config ZeroPadding2D::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  const auto& p = options_.padding;
  c["padding"] = json::array({json::array({p[0][0], p[0][1]}), json::array({p[1][0], p[1][1]})});
  c["data_format"] = "channels_last";
  return config;
}
std::shared_ptr<ZeroPadding2D> ZeroPadding2D::from_config(const Config& config_in) {
  const nlohmann::json& config = json_of(config_in);
  ConfigReader r(config_in, "ZeroPadding2D");
  require_channels_last(r);
  ZeroPadding2DOptions o{.name = r.name(), .dtype = r.dtype()};
  if (r.has("padding")) {
    const json& v = config["padding"];
    auto num = [&](const json& e) {
      if (!e.is_number_integer()) r.fail("padding", "expected integers, got " + v.dump());
      return e.get<std::int64_t>();
    };
    if (v.is_number_integer()) o.padding = {{{num(v), num(v)}, {num(v), num(v)}}};
    else if (v.is_array() && v.size() == 2 && v[0].is_array() && v[0].size() == 2 && v[1].is_array() && v[1].size() == 2)
      o.padding = {{{num(v[0][0]), num(v[0][1])}, {num(v[1][0]), num(v[1][1])}}};
    else if (v.is_array() && v.size() == 2) o.padding = {{{num(v[0]), num(v[0])}, {num(v[1]), num(v[1])}}};
    else r.fail("padding", "expected an integer, [h, w] or [[top, bottom], [left, right]], got " + v.dump());
  }
  return make<ZeroPadding2D>(r, o, "padding");
}

}  // namespace tapeflow::layers
