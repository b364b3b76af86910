// tapeflow <-> nlohmann-json, for users who have nlohmann-json and want to edit configs with it.
// Opt-in: <tapeflow/tapeflow.h> does not include this header and nothing else in tapeflow's
// installed headers needs nlohmann-json. CMake: find_package(tapeflow COMPONENTS json) and link
// tapeflow::json (it brings nlohmann_json::nlohmann_json); or include <nlohmann/json.hpp> yourself.
//
// Facts:    to_json(config) and from_json(value) convert through JSON text, so the two sides share
//           nothing but the text format (a tapeflow built against another nlohmann-json release
//           converts the same); a value nested deeper than kMaxConfigDepth is refused as
//           Config::parse refuses it.
// Errors:   std::invalid_argument from from_json for nesting deeper than kMaxConfigDepth.
// Ref:      https://json.nlohmann.me
#pragma once

#include <nlohmann/json.hpp>

#include "tape/core/config.h"

namespace tapeflow {

// The JSON value a Config holds.
inline nlohmann::json to_json(const Config& config) { return nlohmann::json::parse(config.to_json_string()); }
// A Config holding `value`. Errors: std::invalid_argument beyond kMaxConfigDepth.
inline Config from_json(const nlohmann::json& value) { return Config::parse(value.dump()); }

}  // namespace tapeflow
