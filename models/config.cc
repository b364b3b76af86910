#include "models/config.h"
#include "tape/core/internal/config_json.h"

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "layers/input_layer.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "models/functional.h"
#include "models/internal/config_json.h"
#include "models/internal/keras3_config.h"
#include "models/sequential.h"

namespace tapeflow::models {
using nlohmann::json;

namespace {

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::kSum: return "sum";
    case Reduction::kNone: return "none";
    default: return "auto";  // Keras 2's default, meaning sum over batch size
  }
}

Reduction reduction_from(const json& c, const std::string& where) {
  if (!c.contains("reduction") || c["reduction"].is_null()) return Reduction::kSumOverBatchSize;
  if (!c["reduction"].is_string()) throw std::invalid_argument(where + ": config field 'reduction': expected a string");
  const std::string r = c["reduction"].get<std::string>();
  if (r == "auto" || r == "sum_over_batch_size") return Reduction::kSumOverBatchSize;
  if (r == "sum") return Reduction::kSum;
  if (r == "none") return Reduction::kNone;
  throw std::invalid_argument(where + ": config field 'reduction': unknown reduction '" + r +
                              "' (auto, sum_over_batch_size, sum, none)");
}

json loss_base(const Loss& l) { return {{"reduction", reduction_name(l.reduction())}, {"name", l.name()}}; }

}  // namespace

// ---- loss configs (declared in models/losses.h) ----

Config Loss::get_config() const {
  throw std::logic_error("loss '" + name() + "': get_config() is not implemented for class '" + class_name() + "'");
}
Config SparseCategoricalCrossentropy::get_config() const {
  json c = loss_base(*this);
  c["from_logits"] = from_logits_;
  c["ignore_class"] = nullptr;
  return to_config(std::move(c));
}
Config CategoricalCrossentropy::get_config() const {
  json c = loss_base(*this);
  c["from_logits"] = from_logits_;
  c["label_smoothing"] = 0.0;
  c["axis"] = -1;
  return to_config(std::move(c));
}
Config BinaryCrossentropy::get_config() const {
  json c = loss_base(*this);
  c["from_logits"] = from_logits_;
  c["label_smoothing"] = 0.0;
  c["axis"] = -1;
  return to_config(std::move(c));
}
Config MeanSquaredError::get_config() const { return to_config(loss_base(*this)); }

json serialize_loss_json(const Loss& loss) {
  Config config = loss.get_config();  // named, so its JSON moves in (of a temporary it would copy)
  return {{"class_name", loss.class_name()}, {"config", std::move(json_of(config))}};
}
Config serialize_loss(const Loss& loss) { return to_config(serialize_loss_json(loss)); }

std::shared_ptr<Loss> deserialize_loss(const json& j) {
  if (j.is_string()) return get_loss(j.get<std::string>());
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string())
    throw std::invalid_argument("deserialize_loss: expected a loss name or {\"class_name\", \"config\"}, got " +
                                j.dump().substr(0, 200));
  const std::string cls = j["class_name"].get<std::string>();
  static const json empty = json::object();
  const json& c = j.contains("config") && j["config"].is_object() ? j["config"] : empty;
  layers::ConfigReader r(to_config(c), "loss " + cls);
  const Reduction reduction = reduction_from(c, "loss " + cls);
  if (cls == "MeanSquaredError")
    return std::make_shared<MeanSquaredError>(
        MeanSquaredErrorOptions{.reduction = reduction, .name = r.string("name", "mean_squared_error")});
  CrossentropyOptions o{.from_logits = r.boolean("from_logits", false), .reduction = reduction, .name = r.name()};
  if (cls == "SparseCategoricalCrossentropy") {
    r.require_null("ignore_class");
    return std::make_shared<SparseCategoricalCrossentropy>(o);
  }
  if (cls == "CategoricalCrossentropy" || cls == "BinaryCrossentropy") {
    if (r.number("label_smoothing", 0.0) != 0.0) r.fail("label_smoothing", "not supported by tapeflow");
    if (r.integer("axis", -1) != -1) r.fail("axis", "only -1 is supported by tapeflow");
    if (cls == "CategoricalCrossentropy") return std::make_shared<CategoricalCrossentropy>(o);
    return std::make_shared<BinaryCrossentropy>(o);
  }
  throw std::invalid_argument("deserialize_loss: unknown loss class '" + cls +
                              "' (known: SparseCategoricalCrossentropy, CategoricalCrossentropy, BinaryCrossentropy, "
                              "MeanSquaredError)");
}
std::shared_ptr<Loss> deserialize_loss(const Config& config) { return deserialize_loss(json_of(config)); }

// ---- Sequential ----

Config Sequential::get_config() const {
  json list = json::array();
  if (const auto& shape = build_input_shape(); shape && shape->rank() > 0) {
    std::vector<std::int64_t> dims(shape->begin() + 1, shape->end());
    layers::InputLayer input({.shape = dims, .dtype = dtype(), .name = name() + "_input"});
    list.push_back(layers::serialize_json(input));
  }
  for (const auto& l : layers()) list.push_back(layers::serialize_json(*l));
  return to_config({{"name", name()}, {"layers", list}});
}

std::shared_ptr<Sequential> Sequential::from_config(const Config& config_in) {
  layers::ConfigReader r(config_in, "Sequential");
  const json& config = json_of(config_in);
  if (!config.contains("layers") || !config["layers"].is_array()) r.fail("layers", "expected a list of layer configs");
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, r.name());
  std::optional<Shape> input_shape;
  auto shape_from = [&](const json& batch_shape, const std::string& who) {
    std::vector<std::int64_t> dims{1};
    for (std::size_t i = 1; i < batch_shape.size(); ++i) {
      if (!batch_shape[i].is_number_integer() || batch_shape[i].get<std::int64_t>() < 0)
        r.fail("layers", "layer '" + who + "': batch_input_shape may only leave the batch unknown, got " +
                             batch_shape.dump());
      dims.push_back(batch_shape[i].get<std::int64_t>());
    }
    input_shape = Shape(dims);
  };
  for (const json& entry : config["layers"]) {
    std::shared_ptr<layers::Layer> layer = layers::deserialize(entry);
    if (auto input = std::dynamic_pointer_cast<layers::InputLayer>(layer)) {
      if (!model->layers().empty() || input_shape)
        r.fail("layers", "InputLayer '" + input->name() + "' must come first");
      std::vector<std::int64_t> dims{1};
      dims.insert(dims.end(), input->shape().begin(), input->shape().end());
      input_shape = Shape(dims);
      continue;
    }
    const json& c = entry["config"];
    if (model->layers().empty() && !input_shape && c.contains("batch_input_shape") && c["batch_input_shape"].is_array())
      shape_from(c["batch_input_shape"], layer->name());
    model->add(layer);
  }
  if (input_shape) model->build(*input_shape);
  if (!r.trainable()) model->set_trainable(false);
  return model;
}

// ---- whole models ----

void register_model_classes() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!layers::is_layer_class_registered("Sequential"))
      layers::register_layer_class("Sequential", [](const Config& c) { return Sequential::from_config(c); });
    for (const char* name : {"Functional", "Model"})
      if (!layers::is_layer_class_registered(name))
        layers::register_layer_class(name, [](const Config& c) { return Functional::from_config(c); });
  });
}

json model_to_config_json(const Model& model) { return tf_keras_nodes(layers::serialize_json(model)); }
Config model_to_config(const Model& model) { return to_config(model_to_config_json(model)); }

std::string to_json(const Model& model, int indent) {
  json j = model_to_config_json(model);
  j["keras_version"] = kKerasVersion;
  j["backend"] = "tensorflow";
  return j.dump(indent);
}

std::shared_ptr<Model> model_from_config(const json& config) {
  register_model_classes();
  check_config_depth(config, "model_from_config");
  if (!config.is_object() || !config.contains("class_name") || !config["class_name"].is_string())
    throw std::invalid_argument("model_from_config: expected {\"class_name\", \"config\"}, got " +
                                config.dump().substr(0, 200));
  const std::string cls = config["class_name"].get<std::string>();
  if (cls != "Sequential" && cls != "Functional" && cls != "Model" && !layers::is_layer_class_registered(cls))
    throw std::invalid_argument("model_from_config: unknown model class '" + cls +
                                "' (Sequential, Functional, Model or a registered class)");
  std::shared_ptr<layers::Layer> layer = layers::deserialize(config);
  auto model = std::dynamic_pointer_cast<Model>(layer);
  if (!model) throw std::invalid_argument("model_from_config: class '" + cls + "' is a layer, not a model");
  return model;
}
std::shared_ptr<Model> model_from_config(const Config& config) { return model_from_config(json_of(config)); }

std::shared_ptr<Model> model_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(std::string("model_from_json: invalid JSON: ") + e.what());
  }
  check_config_depth(j, "model_from_json");
  return model_from_config(j);
}

}  // namespace tapeflow::models
