// The axes of LayerNormalization and RMSNormalization: checked against the input's rank and read from
// a config (one integer or a list).
#pragma once

#include <string>
#include <vector>

#include "layers/serialization.h"
#include "tape/core/shape.h"

namespace tapeflow::layers::internal {

// Errors: std::invalid_argument, prefixed by `who`, for an empty axis list or epsilon < 0 (or NaN).
void check_axis_and_epsilon(const std::string& who, const std::vector<int>& axis, double epsilon);

// `axis` (negative from the end) as sorted non-negative axes of `input`. Errors:
// std::invalid_argument, prefixed by `who`, for an axis outside the rank or a repeated one.
std::vector<int> normalized_axes(const std::string& who, const std::vector<int>& axis, const Shape& input);

// The config's "axis": one integer or a list of them (-1 when absent).
std::vector<int> axis_from_config(const ConfigReader& r);

}  // namespace tapeflow::layers::internal
