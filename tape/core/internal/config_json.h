// The library's view of a Config: the nlohmann::json inside it. Only .cc files and internal/
// headers include this (nlohmann-json stays out of the installed headers, see tape/core/config.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tape/core/config.h"

namespace tapeflow {
namespace internal {
struct ConfigAccess {
  static nlohmann::json& json(Config& config);
  static const nlohmann::json& json(const Config& config);
  static Config make(nlohmann::json value);
};
}  // namespace internal

// The JSON inside `config` (no copy).
inline nlohmann::json& json_of(Config& config) { return internal::ConfigAccess::json(config); }
inline const nlohmann::json& json_of(const Config& config) { return internal::ConfigAccess::json(config); }
// A Config holding `value` (moved in).
inline Config to_config(nlohmann::json value) { return internal::ConfigAccess::make(std::move(value)); }

// Checks that `config` nests at most kMaxConfigDepth arrays and objects (without recursion:
// nlohmann-json's parser and destructor do not recurse either, its copy and dump() do).
// Errors:   std::invalid_argument "<where>: the JSON is nested N levels deep; tapeflow reads at most 512".
void check_config_depth(const nlohmann::json& config, const std::string& where);

}  // namespace tapeflow
