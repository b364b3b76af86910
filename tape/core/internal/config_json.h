// The library's view of a Config: the nlohmann::json inside it. Only .cc files and internal/
// headers include this (nlohmann-json stays out of the installed headers, see tape/core/config.h).
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

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

// A JSON number as an I if it is one exactly: integers within I's range (nlohmann keeps those above
// INT64_MAX as unsigned, which get<int64_t> would wrap), and integral floats within range, checked
// before the cast (a float outside I's range converts with undefined behaviour); empty otherwise.
template <class I>
std::optional<I> exact_integer(const nlohmann::json& v) {
  static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool>);
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<I>::max())) return std::nullopt;
    return static_cast<I>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if constexpr (std::is_signed_v<I>) {
      if (i < std::numeric_limits<I>::min() || i > std::numeric_limits<I>::max()) return std::nullopt;
    } else {
      if (i < 0) return std::nullopt;
    }
    return static_cast<I>(i);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // [lo, hi) with hi = max() + 1 = 2^digits, an exact double (max() itself may not be one).
    const double hi = std::ldexp(1.0, std::numeric_limits<I>::digits);
    const double lo = std::is_signed_v<I> ? -hi : 0.0;
    if (std::isfinite(d) && d == std::floor(d) && d >= lo && d < hi) return static_cast<I>(d);
  }
  return std::nullopt;
}

// Checks that `config` nests at most kMaxConfigDepth arrays and objects (without recursion:
// nlohmann-json's parser and destructor do not recurse either, its copy and dump() do).
// Errors:   std::invalid_argument "<where>: the JSON is nested N levels deep; tapeflow reads at most 512".
void check_config_depth(const nlohmann::json& config, const std::string& where);

}  // namespace tapeflow
