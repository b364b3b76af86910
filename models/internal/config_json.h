// The JSON side of models/config.h, for the library's own readers and writers of model files
// (nlohmann-json stays out of the installed headers; see tape/core/config.h).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "models/losses.h"
#include "models/model.h"
#include "tape/core/internal/config_json.h"

namespace tapeflow::models {

// model_to_config(model) as JSON.
nlohmann::json model_to_config_json(const Model& model);
// model_from_config() of JSON (what the Config overload calls).
std::shared_ptr<Model> model_from_config(const nlohmann::json& config);
// serialize_loss(loss) as JSON.
nlohmann::json serialize_loss_json(const Loss& loss);
// deserialize_loss() of JSON: a Keras loss name (a JSON string) or {"class_name", "config"}.
std::shared_ptr<Loss> deserialize_loss(const nlohmann::json& config);

}  // namespace tapeflow::models
