// The JSON side of layers/serialization.h, for the library's own readers and writers of configs
// (nlohmann-json stays out of the installed headers; see tape/core/config.h).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "layers/initializers.h"
#include "layers/layer.h"
#include "tape/core/internal/config_json.h"

namespace tapeflow::layers {

// serialize(layer) as JSON: {"class_name", "config"}.
nlohmann::json serialize_json(const Layer& layer);
// deserialize() of a JSON {"class_name", "config"} (what the Config overload calls).
std::shared_ptr<Layer> deserialize(const nlohmann::json& layer_config);

// Keras forms of the pieces of a layer config.
nlohmann::json serialize_initializer(const Initializer& init);
// The initializer for a Keras identifier ("he_normal") or {"class_name", "config"} object (Keras 2
// class names, VarianceScaling included). `where` starts error messages ("Dense 'd': config field
// 'kernel_initializer'"). Errors: std::invalid_argument for another JSON form or an unknown class.
Initializer deserialize_initializer(const nlohmann::json& config, const std::string& where);
// "float32" / "float64" / ...; reads a string or a Keras DTypePolicy object.
DType dtype_from_config(const nlohmann::json& value, const std::string& where);

}  // namespace tapeflow::layers
