#include "models/saving_model.h"
#include "optimizers/internal/serialization_json.h"
#include "models/internal/config_json.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "tape/core/internal/config_json.h"
#include "models/internal/saving_common.h"
#include "models/internal/keras3_config.h"
#include "models/keras_saving.h"
#include "models/saving.h"
#include "optimizers/serialization.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::models {
using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw std::runtime_error(path + ": " + what); }

json parse_attribute(const io::H5Reader& reader, const std::string& name) {
  const std::string text = reader.read_string_attribute("", name);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(reader.path(), "attribute '" + name + "' is not valid JSON: " + e.what());
  }
  try {
    check_config_depth(j, "attribute '" + name + "'");
  } catch (const std::invalid_argument& e) {
    fail(reader.path(), e.what());
  }
  return j;
}

bool has_extension(const std::string& path, const std::string& ext) {
  return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

}  // namespace

namespace internal {

json compile_state(const Model& model) {
  if (!model.compiled() || !model.optimizer() || !model.loss()) return nullptr;
  json metrics = json::array();
  for (const auto& m : model.metrics()) metrics.push_back(m->name());
  // Without tf.keras 2.15's jit_compile / is_legacy_optimizer, which Keras 3's optimizers refuse
  // ("Argument(s) not recognized") and tf_keras does not need.
  json optimizer = optimizers::serialize_json(*model.optimizer());
  if (optimizer.contains("config") && optimizer["config"].is_object()) {
    optimizer["config"].erase("jit_compile");
    optimizer["config"].erase("is_legacy_optimizer");
  }
  // Reduction "sum_over_batch_size", which Keras 3 and tf_keras 2 both read, for tf.keras's "auto"
  // (Keras 3 refuses "auto").
  json loss = serialize_loss_json(*model.loss());
  if (loss.contains("config") && loss["config"].is_object() && loss["config"].value("reduction", "") == "auto")
    loss["config"]["reduction"] = "sum_over_batch_size";
  return {{"loss", loss}, {"metrics", metrics}, {"optimizer", optimizer}};
}

CompileOptions compile_options(const json& optimizer, const json& loss, const json& metrics) {
  CompileOptions compile;
  const json opt = from_keras3(optimizer);
  if (opt.is_object() && opt.contains("config") && opt["config"].is_object())
    for (const char* key : {"loss_scale_factor", "gradient_accumulation_steps"})
      if (opt["config"].contains(key) && !opt["config"][key].is_null())
        throw std::invalid_argument("optimizer " + opt.value("class_name", std::string("?")) + ": config field '" + key +
                                    "': not supported by tapeflow, got " + opt["config"][key].dump());
  compile.optimizer = optimizers::deserialize(opt);
  compile.loss = LossSpec(deserialize_loss(from_keras3(loss)));
  // tf_keras 2.11+ nests a single-output model's metrics in one more list ([[...]]) and writes a metric
  // given by name as {"class_name": "MeanMetricWrapper", "config": {"fn": "sparse_categorical_accuracy",
  // "name": "accuracy"}}: the function it wraps is the metric.
  const json& listed = metrics.is_array() && metrics.size() == 1 && metrics[0].is_array() ? metrics[0] : metrics;
  if (listed.is_array())
    for (const json& m : listed) {
      if (m.is_object() && m.value("class_name", json()) == "MeanMetricWrapper" && m.contains("config") &&
          m["config"].is_object() && m["config"].contains("fn") && m["config"]["fn"].is_string()) {
        compile.metrics.emplace_back(m["config"]["fn"].get<std::string>());
        continue;
      }
      if (!m.is_string())
        throw std::invalid_argument("metrics: only metric names and MeanMetricWrapper of a named function are supported, got " +
                                    m.dump().substr(0, 200));
      compile.metrics.emplace_back(m.get<std::string>());
    }
  else if (!metrics.is_null())
    throw std::invalid_argument("metrics: expected a list of names or null, got " + metrics.dump().substr(0, 100));
  return compile;
}

std::vector<std::pair<std::string, std::optional<Variable>>> keras3_optimizer_variables(optimizers::Optimizer& optimizer,
                                                                                         const Model& model) {
  const auto weights = optimizers::keras_weights(optimizer, model.trainable_variables());
  std::vector<std::pair<std::string, std::optional<Variable>>> out;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    out.emplace_back(weights[i].first, weights[i].second);
    if (i == 0 && !optimizer.learning_rate().is_schedule()) out.emplace_back("learning_rate", std::nullopt);
  }
  return out;
}

Tensor checked_value(const std::string& file, const std::string& what, Tensor value, const Variable& var) {
  if (value.dtype() != var.dtype() && is_integer(value.dtype()) && is_integer(var.dtype()))
    value = cast(value, var.dtype());
  if (value.shape() != var.shape() || value.dtype() != var.dtype())
    fail(file, what + ": shape in file " + value.shape().to_string() + " " + dtype_name(value.dtype()) + ", expected " +
                   var.shape().to_string() + " " + dtype_name(var.dtype()));
  return value;
}

}  // namespace internal

void save_model(const Model& model, const std::string& path, const SaveModelOptions& options) {
  if (has_extension(path, ".keras")) return save_keras(model, path, options);
  // First: a model without a config writes nothing. Without keys Keras 3 refuses (time_major).
  json config = without_keras2_only_keys(model_to_config_json(model));
  std::optional<json> training;
  // The optimizer's slots exist only for variables it has seen; build them so the file is complete.
  std::vector<std::pair<std::string, Variable>> opt_weights;
  if (const json state = internal::compile_state(model); !state.is_null()) {
    training = json{{"loss", state["loss"]},
                    {"metrics", state["metrics"]},
                    {"weighted_metrics", nullptr},
                    {"loss_weights", nullptr},
                    {"optimizer_config", state["optimizer"]}};
    if (options.include_optimizer)
      opt_weights = optimizers::keras_weights(*model.optimizer(), model.trainable_variables());
  }
  io::H5Writer writer(path);
  writer.write_attribute("", "model_config", config.dump());
  writer.write_attribute("", "keras_version", std::string(kKerasVersion));
  writer.write_attribute("", "backend", std::string("tensorflow"));
  if (training) writer.write_attribute("", "training_config", training->dump());
  write_keras_weights(writer, "model_weights", model);
  if (!opt_weights.empty()) {
    writer.create_group("optimizer_weights");
    std::vector<std::string> names;
    for (const auto& [name, var] : opt_weights) {
      names.push_back(name);
      write_tensor(writer, "optimizer_weights/" + name, var.value());
    }
    writer.write_attribute("optimizer_weights", "weight_names", names);
  }
  writer.commit();
}

std::shared_ptr<Model> load_model(const std::string& path, const LoadModelOptions& options) {
  if (has_extension(path, ".keras")) return load_keras(path, options);
  io::H5Reader reader(path);
  if (!reader.has_attribute("", "model_config"))
    fail(path, "no 'model_config' attribute (a weights-only file? use load_weights)");
  std::shared_ptr<Model> model;
  try {
    model = model_from_config(from_keras3(parse_attribute(reader, "model_config")));  // Keras 3 writes its own forms
  } catch (const std::invalid_argument& e) {
    fail(path, std::string("model_config: ") + e.what());
  }
  WeightPlan plan;
  plan_keras_weights(reader, "model_weights", *model, plan);
  CompileOptions compile;
  if (options.compile && reader.has_attribute("", "training_config")) {
    const json training = parse_attribute(reader, "training_config");
    try {
      if (!training.is_object() || !training.contains("optimizer_config") || !training.contains("loss"))
        throw std::invalid_argument("expected an object with 'loss' and 'optimizer_config'");
      compile = internal::compile_options(training["optimizer_config"], training["loss"], training.value("metrics", json()));
    } catch (const std::invalid_argument& e) {
      fail(path, std::string("training_config: ") + e.what());
    }
    if (reader.is_group("optimizer_weights")) {
      const auto keras2 = optimizers::keras_weights(*compile.optimizer, model->trainable_variables());
      const auto keras3 = internal::keras3_optimizer_variables(*compile.optimizer, *model);
      const std::vector<std::string> names = reader.read_string_array_attribute("optimizer_weights", "weight_names");
      // tf.keras 2 writes iteration and the slots; Keras 3 also the learning rate (second), which
      // its optimizer_config already holds.
      const bool with_rate = names.size() == keras3.size() && keras3.size() != keras2.size();
      if (names.size() != keras2.size() && !with_rate)
        fail(path, "optimizer_weights has " + std::to_string(names.size()) + " weights, the " +
                       compile.optimizer->class_name() + " optimizer of this model has " + std::to_string(keras2.size()) +
                       " (tf.keras) or " + std::to_string(keras3.size()) + " (Keras 3)");
      // Keras restores optimizer weights by position; shapes must match, integer dtypes are cast.
      for (std::size_t i = 0, k = 0; i < names.size(); ++i) {
        if (with_rate && !keras3[i].second) {
          if (read_tensor(reader, "optimizer_weights/" + names[i]).shape().rank() != 0)
            fail(path, "optimizer weight '" + names[i] + "' (the learning rate) is not a scalar");
          continue;
        }
        const Variable& var = keras2[k++].second;
        plan.emplace_back(var, internal::checked_value(path, "optimizer weight '" + names[i] + "' (for " + keras2[k - 1].first + ")",
                                                       read_tensor(reader, "optimizer_weights/" + names[i]), var));
      }
    }
  }
  assign_weights(plan);
  if (compile.optimizer) model->compile(std::move(compile));
  return model;
}

}  // namespace tapeflow::models
