// The limits model-config readers enforce on what a file may hold (models/config.h, tfjs.h,
// saving_model.h and every other reader of Keras configs).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tapeflow::models {

// The deepest JSON nesting a model config may have. Each nested model adds 3 levels (its
// {"class_name", "config"} object, the config object, the "layers" list) and a layer's own config
// up to about 8 (Keras 3's inbound_nodes), so 512 admits models nested about 160 deep; Keras
// models are a few dozen levels deep. Deeper configs are refused before anything recurses over
// them (copies, dump(), deserialization), so a hostile file cannot exhaust the stack.
inline constexpr int kMaxConfigDepth = 512;

// Checks that `config` nests at most kMaxConfigDepth arrays and objects (without recursion:
// nlohmann-json's parser and destructor do not recurse either, its copy and dump() do).
// Errors:   std::invalid_argument "<where>: the JSON is nested N levels deep; tapeflow reads at most 512".
void check_config_depth(const nlohmann::json& config, const std::string& where);

}  // namespace tapeflow::models
