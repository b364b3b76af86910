#include "models/saving_model.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "models/saving.h"
#include "optimizers/serialization.h"

namespace tapeflow::models {
using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw std::runtime_error(path + ": " + what); }

json parse_attribute(const io::H5Reader& reader, const std::string& name) {
  const std::string text = reader.read_string_attribute("", name);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail(reader.path(), "attribute '" + name + "' is not valid JSON: " + e.what());
  }
}

}  // namespace

void save_model(const Model& model, const std::string& path, const SaveModelOptions& options) {
  json config = model_to_config(model);  // first: a model without a config writes nothing
  std::optional<json> training;
  // The optimizer's slots exist only for variables it has seen; build them so the file is complete.
  std::vector<std::pair<std::string, Variable>> opt_weights;
  if (model.compiled() && model.optimizer() && model.loss()) {
    json metrics = json::array();
    for (const auto& m : model.metrics()) metrics.push_back(m->name());
    training = json{{"loss", serialize_loss(*model.loss())},
                    {"metrics", metrics},
                    {"weighted_metrics", nullptr},
                    {"loss_weights", nullptr},
                    {"optimizer_config", optimizers::serialize(*model.optimizer())}};
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
  io::H5Reader reader(path);
  if (!reader.has_attribute("", "model_config"))
    fail(path, "no 'model_config' attribute (a weights-only file? use load_weights)");
  std::shared_ptr<Model> model;
  try {
    model = model_from_config(parse_attribute(reader, "model_config"));
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
      compile.optimizer = optimizers::deserialize(training["optimizer_config"]);
      compile.loss = LossSpec(deserialize_loss(training["loss"]));
      if (training.contains("metrics") && training["metrics"].is_array())
        for (const json& m : training["metrics"]) {
          if (!m.is_string()) throw std::invalid_argument("metrics: only metric names are supported, got " + m.dump());
          compile.metrics.emplace_back(m.get<std::string>());
        }
    } catch (const std::invalid_argument& e) {
      fail(path, std::string("training_config: ") + e.what());
    }
    if (reader.is_group("optimizer_weights")) {
      const auto want = optimizers::keras_weights(*compile.optimizer, model->trainable_variables());
      const std::vector<std::string> names = reader.read_string_array_attribute("optimizer_weights", "weight_names");
      if (names.size() != want.size())
        fail(path, "optimizer_weights has " + std::to_string(names.size()) + " weights, the " +
                       compile.optimizer->class_name() + " optimizer of this model has " + std::to_string(want.size()));
      // Keras restores optimizer weights by position; shapes and dtypes must match.
      for (std::size_t i = 0; i < names.size(); ++i) {
        const Variable& var = want[i].second;
        Tensor value = read_tensor(reader, "optimizer_weights/" + names[i]);
        if (value.shape() != var.shape() || value.dtype() != var.dtype())
          fail(path, "optimizer weight '" + names[i] + "' (for " + want[i].first + "): shape in file " +
                         value.shape().to_string() + " " + dtype_name(value.dtype()) + ", optimizer expects " +
                         var.shape().to_string() + " " + dtype_name(var.dtype()));
        plan.emplace_back(var, std::move(value));
      }
    }
  }
  assign_weights(plan);
  if (compile.optimizer) model->compile(std::move(compile));
  return model;
}

}  // namespace tapeflow::models
