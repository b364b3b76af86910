// Whole-model configs: model.to_json(), model_from_json(), and loss configs.
//
// Facts:    to_json(model) = {"class_name": "Sequential" | "Functional", "config": ...,
//           "keras_version": "2.15.0", "backend": "tensorflow"} (Keras 2's model.to_json()).
//           model_from_config / model_from_json accept "Sequential", "Functional" and "Model"
//           (the name older Keras and TensorFlow.js use for functional models) and return a
//           built model with fresh weights (load weights next). Sequential and Functional are
//           also registered as layer classes, so nested models deserialize.
//           Losses: serialize_loss gives {"class_name": "SparseCategoricalCrossentropy",
//           "config": {"reduction": "auto", "name", "from_logits", ...}}; deserialize_loss also
//           takes Keras's string names ("sparse_categorical_crossentropy", "mse", ...).
// Errors:   std::invalid_argument for JSON that does not parse (with nlohmann's position), that
//           nests deeper than kMaxConfigDepth (models/config_limits.h) or that is not a model
//           config, and whatever layer deserialization throws (naming the layer and the field);
//           std::logic_error from to_json for a subclassed model without a config.
// Ref:      keras.models.model_from_json, Model.to_json, keras.losses.serialize / deserialize
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/losses.h"
#include "models/model.h"

namespace tapeflow::models {

inline constexpr const char* kKerasVersion = "2.15.0";

// Registers Sequential and Functional with layers::register_layer_class (idempotent; done by the
// functions below before they deserialize).
void register_model_classes();

nlohmann::json model_to_config(const Model& model);  // {"class_name", "config"}
std::string to_json(const Model& model, int indent = -1);
std::shared_ptr<Model> model_from_config(const nlohmann::json& config);
std::shared_ptr<Model> model_from_json(const std::string& json_text);

nlohmann::json serialize_loss(const Loss& loss);
std::shared_ptr<Loss> deserialize_loss(const nlohmann::json& config);

}  // namespace tapeflow::models
