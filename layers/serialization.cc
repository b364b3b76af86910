#include "layers/serialization.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "layers/activation.h"
#include "layers/batch_normalization.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/ops/not_equal.h"
#include "layers/pooling2d.h"
#include "layers/reshaping2d.h"
#include "layers/input_layer.h"
#include "layers/merge.h"
#include "layers/reshape.h"
#include "layers/rnn/bidirectional.h"
#include "layers/rnn/gru.h"
#include "layers/rnn/lstm.h"
#include "layers/rnn/simple_rnn.h"
#include "layers/attention/multi_head_attention.h"
#include "layers/core/embedding.h"
#include "layers/core/position_embedding.h"
#include "layers/reshaping/permute.h"
#include "layers/normalization/layer_normalization.h"
#include "layers/pooling/global_pooling1d.h"
#include "layers/pooling/pooling1d.h"
#include "layers/convolutional/conv1d.h"
#include "layers/normalization/rms_normalization.h"
#include "layers/internal/serialization_json.h"

namespace tapeflow::layers {
using nlohmann::json;

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, LayerFactory> factories;
};

// The built-in classes, registered explicitly the first time the registry is used.
Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    auto add = [&](const char* name, LayerFactory f) { reg->factories.emplace(name, std::move(f)); };
    add("InputLayer", [](const Config& c) { return InputLayer::from_config(c); });
    add("Dense", [](const Config& c) { return Dense::from_config(c); });
    add("BatchNormalization", [](const Config& c) { return BatchNormalization::from_config(c); });
    add("Dropout", [](const Config& c) { return Dropout::from_config(c); });
    add("Flatten", [](const Config& c) { return Flatten::from_config(c); });
    add("NotEqual", [](const Config& c) { return NotEqual::from_config(c); });
    add("Reshape", [](const Config& c) { return Reshape::from_config(c); });
    add("Activation", [](const Config& c) { return Activation::from_config(c); });
    add("LeakyReLU", [](const Config& c) { return LeakyReLU::from_config(c); });
    add("Add", [](const Config& c) { return Add::from_config(c); });
    add("Multiply", [](const Config& c) { return Multiply::from_config(c); });
    add("Average", [](const Config& c) { return Average::from_config(c); });
    add("Concatenate", [](const Config& c) { return Concatenate::from_config(c); });
    add("Conv2D", [](const Config& c) { return Conv2D::from_config(c); });
    add("Conv2DTranspose", [](const Config& c) { return Conv2DTranspose::from_config(c); });
    add("MaxPooling2D", [](const Config& c) { return MaxPooling2D::from_config(c); });
    add("AveragePooling2D", [](const Config& c) { return AveragePooling2D::from_config(c); });
    add("GlobalAveragePooling2D", [](const Config& c) { return GlobalAveragePooling2D::from_config(c); });
    add("GlobalMaxPooling2D", [](const Config& c) { return GlobalMaxPooling2D::from_config(c); });
    add("UpSampling2D", [](const Config& c) { return UpSampling2D::from_config(c); });
    add("ZeroPadding2D", [](const Config& c) { return ZeroPadding2D::from_config(c); });
    add("SimpleRNN", [](const Config& c) { return SimpleRNN::from_config(c); });
    add("LSTM", [](const Config& c) { return LSTM::from_config(c); });
    add("GRU", [](const Config& c) { return GRU::from_config(c); });
    add("Bidirectional", [](const Config& c) { return Bidirectional::from_config(c); });
    add("LayerNormalization", [](const Config& c) { return LayerNormalization::from_config(c); });
    add("MultiHeadAttention", [](const Config& c) { return MultiHeadAttention::from_config(c); });
    add("Embedding", [](const Config& c) { return Embedding::from_config(c); });
    add("GlobalAveragePooling1D", [](const Config& c) { return GlobalAveragePooling1D::from_config(c); });
    add("GlobalMaxPooling1D", [](const Config& c) { return GlobalMaxPooling1D::from_config(c); });
    add("PositionEmbedding", [](const Config& c) { return PositionEmbedding::from_config(c); });
    add("Permute", [](const Config& c) { return Permute::from_config(c); });
    add("Conv1D", [](const Config& c) { return Conv1D::from_config(c); });
    add("MaxPooling1D", [](const Config& c) { return MaxPooling1D::from_config(c); });
    add("AveragePooling1D", [](const Config& c) { return AveragePooling1D::from_config(c); });
    add("RMSNormalization", [](const Config& c) { return RMSNormalization::from_config(c); });
    return reg;
  }();
  return *r;
}

std::string type_name(const json& j) { return j.type_name(); }

// Keras class names of the named initializers (and back).
const std::vector<std::pair<std::string, std::string>>& initializer_classes() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"glorot_uniform", "GlorotUniform"}, {"glorot_normal", "GlorotNormal"}, {"he_uniform", "HeUniform"},
      {"he_normal", "HeNormal"},           {"zeros", "Zeros"},                {"ones", "Ones"},
      {"constant", "Constant"},            {"random_normal", "RandomNormal"}, {"random_uniform", "RandomUniform"},
      {"truncated_normal", "TruncatedNormal"}, {"variance_scaling", "VarianceScaling"},
      {"orthogonal", "Orthogonal"}};
  return table;
}

double param(const Initializer& init, const std::string& key) {
  for (const auto& [k, v] : init.params())
    if (k == key) return v;
  throw std::logic_error("initializer '" + init.name() + "' has no parameter '" + key + "'");
}

}  // namespace

void register_layer_class(const std::string& class_name, LayerFactory factory) {
  if (class_name.empty()) throw std::invalid_argument("register_layer_class: empty class name");
  if (!factory) throw std::invalid_argument("register_layer_class: empty factory for '" + class_name + "'");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.factories.emplace(class_name, std::move(factory)).second)
    throw std::invalid_argument("register_layer_class: class '" + class_name + "' is already registered");
}

bool is_layer_class_registered(const std::string& class_name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.factories.count(class_name) > 0;
}

std::vector<std::string> registered_layer_classes() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [k, v] : r.factories) out.push_back(k);
  return out;
}

json serialize_json(const Layer& layer) {
  Config config = layer.get_config();  // named, so its JSON moves in (of a temporary it would copy)
  return {{"class_name", layer.class_name()}, {"config", std::move(json_of(config))}};
}
Config serialize(const Layer& layer) { return to_config(serialize_json(layer)); }

std::shared_ptr<Layer> deserialize(const json& j) {
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string())
    throw std::invalid_argument("deserialize: a layer config must be an object with a string 'class_name', got " +
                                j.dump().substr(0, 200));
  const std::string cls = j["class_name"].get<std::string>();
  if (!j.contains("config") || !j["config"].is_object())
    throw std::invalid_argument("deserialize: layer of class '" + cls + "' has no 'config' object");
  LayerFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(cls);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::string known;
    for (const std::string& k : registered_layer_classes()) known += (known.empty() ? "" : ", ") + k;
    std::string name = j["config"].contains("name") && j["config"]["name"].is_string()
                           ? " '" + j["config"]["name"].get<std::string>() + "'"
                           : "";
    throw std::invalid_argument("deserialize: unknown layer class '" + cls + "'" + name +
                                " (registered: " + known + "; register custom layers with register_layer_class)");
  }
  return factory(to_config(j["config"]));
}
std::shared_ptr<Layer> deserialize(const Config& layer_config) { return deserialize(json_of(layer_config)); }

json serialize_initializer(const Initializer& init) {
  for (const auto& [snake, cls] : initializer_classes()) {
    if (snake != init.name()) continue;
    json config = json::object();
    if (snake == "constant") {
      config["value"] = param(init, "value");
    } else if (snake == "random_normal" || snake == "truncated_normal") {
      config["mean"] = param(init, "mean");
      config["stddev"] = param(init, "stddev");
      config["seed"] = nullptr;
    } else if (snake == "random_uniform") {
      config["minval"] = param(init, "minval");
      config["maxval"] = param(init, "maxval");
      config["seed"] = nullptr;
    } else if (snake == "variance_scaling") {
      static const char* modes[] = {"fan_in", "fan_out", "fan_avg"};
      static const char* dists[] = {"uniform", "truncated_normal", "untruncated_normal"};
      config["scale"] = param(init, "scale");
      config["mode"] = modes[int(param(init, "mode"))];
      config["distribution"] = dists[int(param(init, "distribution"))];
      config["seed"] = nullptr;
    } else if (snake == "orthogonal") {
      config["gain"] = param(init, "gain");
      config["seed"] = nullptr;
    } else if (snake != "zeros" && snake != "ones") {
      config["seed"] = nullptr;
    }
    return {{"class_name", cls}, {"config", config}};
  }
  throw std::invalid_argument("serialize_initializer: initializer '" + init.name() +
                              "' is a custom function and has no Keras config");
}

Initializer deserialize_initializer(const json& j, const std::string& where) {
  if (j.is_string()) {
    try {
      return initializers::get(j.get<std::string>());
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + ": " + e.what());
    }
  }
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string())
    throw std::invalid_argument(where + ": expected an initializer {\"class_name\", \"config\"} or a name, got " +
                                j.dump().substr(0, 200));
  const std::string cls = j["class_name"].get<std::string>();
  static const json empty = json::object();
  const json& c = j.contains("config") && j["config"].is_object() ? j["config"] : empty;
  ConfigReader r(to_config(c), where + " initializer " + cls);
  if (cls == "Constant") return initializers::constant(r.number("value", 0.0));
  if (cls == "RandomNormal") return initializers::random_normal(r.number("mean", 0.0), r.number("stddev", 0.05));
  if (cls == "TruncatedNormal") return initializers::truncated_normal(r.number("mean", 0.0), r.number("stddev", 0.05));
  if (cls == "RandomUniform") return initializers::random_uniform(r.number("minval", -0.05), r.number("maxval", 0.05));
  if (cls == "Orthogonal") return initializers::orthogonal(r.number("gain", 1.0));
  if (cls == "VarianceScaling") {
    const double scale = r.number("scale", 1.0);
    const std::string mode = r.string("mode", "fan_in"), dist = r.string("distribution", "truncated_normal");
    // TensorFlow.js writes Glorot and He initializers in this general form.
    if (scale == 1.0 && mode == "fan_avg" && dist == "uniform") return initializers::glorot_uniform();
    if (scale == 1.0 && mode == "fan_avg" && (dist == "normal" || dist == "truncated_normal"))
      return initializers::glorot_normal();
    if (scale == 2.0 && mode == "fan_in" && dist == "uniform") return initializers::he_uniform();
    if (scale == 2.0 && mode == "fan_in" && (dist == "normal" || dist == "truncated_normal"))
      return initializers::he_normal();
    try {
      return initializers::variance_scaling(scale, mode, dist);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + ": " + e.what());
    }
  }
  for (const auto& [snake, k] : initializer_classes())
    if (k == cls) return initializers::get(snake);
  std::string known;
  for (const auto& [snake, k] : initializer_classes()) known += (known.empty() ? "" : ", ") + k;
  throw std::invalid_argument(where + ": unknown initializer class '" + cls + "' (known: " + known + ")");
}

DType dtype_from_config(const json& v, const std::string& where) {
  std::string name;
  if (v.is_string()) name = v.get<std::string>();
  else if (v.is_object() && v.contains("config") && v["config"].is_object() && v["config"].contains("name") &&
           v["config"]["name"].is_string())
    name = v["config"]["name"].get<std::string>();  // Keras's DTypePolicy / Policy object
  else throw std::invalid_argument(where + ": config field 'dtype': expected a string, got " + v.dump());
  try {
    return dtype_from_name(name);
  } catch (const std::exception&) {
    throw std::invalid_argument(where + ": config field 'dtype': unknown dtype '" + name + "'");
  }
}

// ---- ConfigReader ----

ConfigReader::ConfigReader(Config config, std::string class_name)
    : config_(std::move(config)), where_(std::move(class_name)) {
  const json& config_json = json_of(config_);
  if (!config_json.is_object()) throw std::invalid_argument(where_ + ": config must be a JSON object, got " + type_name(config_json));
  if (config_json.contains("name") && config_json["name"].is_string()) where_ += " '" + config_json["name"].get<std::string>() + "'";
}

void ConfigReader::fail(const std::string& key, const std::string& problem) const {
  throw std::invalid_argument(where_ + ": config field '" + key + "': " + problem);
}

bool ConfigReader::has(const std::string& key) const { return config_.has(key); }

namespace {
// The present, non-null field `key`. Errors (fail()): missing.
const json& field_of(const ConfigReader& r, const std::string& key) {
  if (!r.has(key)) r.fail(key, "missing");
  return json_of(r.config())[key];
}
}  // namespace

std::string ConfigReader::name() const { return has("name") ? string("name") : ""; }
bool ConfigReader::trainable() const { return boolean("trainable", true); }
std::optional<DType> ConfigReader::dtype() const {
  if (!has("dtype")) return std::nullopt;
  return dtype_from_config(json_of(config_)["dtype"], where_);
}

double ConfigReader::number(const std::string& key, std::optional<double> fallback) const {
  if (!has(key) && fallback) return *fallback;
  const json& v = field_of(*this, key);
  if (!v.is_number()) fail(key, "expected a number, got " + v.dump());
  return v.get<double>();
}

std::int64_t ConfigReader::integer(const std::string& key, std::optional<std::int64_t> fallback) const {
  if (!has(key) && fallback) return *fallback;
  const json& v = field_of(*this, key);
  if (const auto i = exact_integer<std::int64_t>(v)) return *i;
  fail(key, "expected an integer, got " + v.dump());
}

bool ConfigReader::boolean(const std::string& key, std::optional<bool> fallback) const {
  if (!has(key) && fallback) return *fallback;
  const json& v = field_of(*this, key);
  if (!v.is_boolean()) fail(key, "expected true or false, got " + v.dump());
  return v.get<bool>();
}

std::string ConfigReader::string(const std::string& key, std::optional<std::string> fallback) const {
  if (!has(key) && fallback) return *fallback;
  const json& v = field_of(*this, key);
  if (!v.is_string()) fail(key, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

std::vector<std::int64_t> ConfigReader::integers(const std::string& key) const {
  const json& v = field_of(*this, key);
  if (!v.is_array()) fail(key, "expected a list of integers, got " + v.dump());
  std::vector<std::int64_t> out;
  for (const json& e : v) {
    const auto i = exact_integer<std::int64_t>(e);
    if (!i || !e.is_number_integer()) fail(key, "expected a list of integers, got " + v.dump());
    out.push_back(*i);
  }
  return out;
}

std::optional<std::uint64_t> ConfigReader::seed(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  const std::int64_t s = integer(key);
  if (s < 0) fail(key, "expected a non-negative seed, got " + std::to_string(s));
  return static_cast<std::uint64_t>(s);
}

Initializer ConfigReader::initializer(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return initializers::get(fallback);
  return deserialize_initializer(json_of(config_)[key], where_ + ": config field '" + key + "'");
}

double ConfigReader::l2_regularizer(const std::string& key) const {
  if (!has(key)) return 0.0;
  const json& v = json_of(config_)[key];
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string())
    fail(key, "expected a regularizer {\"class_name\", \"config\"}, got " + v.dump());
  const std::string cls = v["class_name"].get<std::string>();
  static const json empty = json::object();
  ConfigReader r(to_config(v.contains("config") && v["config"].is_object() ? v["config"] : empty), where_ + " regularizer " + cls);
  if (cls == "L2") return r.number("l2", 0.01);
  if (cls == "L1L2") {
    if (r.number("l1", 0.0) != 0.0) fail(key, "L1 regularization is not supported by tapeflow (l1 = " + std::to_string(r.number("l1")) + ")");
    return r.number("l2", 0.0);
  }
  fail(key, "unsupported regularizer class '" + cls + "' (supported: L2, L1L2 with l1 = 0)");
}

void ConfigReader::require_null(const std::string& key) const {
  if (has(key)) fail(key, "not supported by tapeflow (must be null), got " + json_of(config_)[key].dump().substr(0, 200));
}

}  // namespace tapeflow::layers
