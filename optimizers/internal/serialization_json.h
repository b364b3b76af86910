// The JSON side of optimizers/serialization.h, for the library's own readers and writers of
// optimizer configs (nlohmann-json stays out of the installed headers; see tape/core/config.h).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "optimizers/optimizer.h"
#include "tape/core/internal/config_json.h"

namespace tapeflow::optimizers {

// serialize(optimizer) as JSON.
nlohmann::json serialize_json(const Optimizer& optimizer);
// deserialize() of JSON (what the Config overload calls).
std::shared_ptr<Optimizer> deserialize(const nlohmann::json& optimizer_config);

// A constant as a JSON number; a schedule as {"class_name": schedule->name(), "config": get_config()}.
nlohmann::json serialize_learning_rate(const LearningRate& lr);
// The inverse of serialize_learning_rate: a number, or an ExponentialDecay, CosineDecay (without
// warmup) or PiecewiseConstantDecay config. `where` prefixes error messages ("optimizer Adam").
// Errors: std::invalid_argument for any other value or class, or a bad schedule field (names it).
LearningRate deserialize_learning_rate(const nlohmann::json& value, const std::string& where);

}  // namespace tapeflow::optimizers
