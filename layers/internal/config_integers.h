// Config helpers shared by the 1-D layers' from_config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/serialization.h"
#include "tape/core/internal/config_json.h"

namespace tapeflow::layers::internal {

// A field Keras writes as a 1-element list ([3]) and accepts as one integer (3); `fallback` when
// absent. Errors (ConfigReader::fail) for a list of another length.
inline std::int64_t single_integer(const ConfigReader& r, const std::string& key, std::int64_t fallback) {
  if (!r.has(key)) return fallback;
  if (json_of(r.config())[key].is_number_integer()) return r.integer(key);
  const std::vector<std::int64_t> v = r.integers(key);
  if (v.size() != 1) r.fail(key, "expected one integer, got " + json_of(r.config())[key].dump());
  return v[0];
}

}  // namespace tapeflow::layers::internal
