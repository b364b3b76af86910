// Shared input check of the NHWC image layers (pooling, reshaping).
#pragma once

#include <stdexcept>
#include <string>

#include "tape/core/shape.h"

namespace tapeflow::layers::internal {

// Errors: std::invalid_argument naming `layer` (Layer::describe()) and the shape if it is not rank 4.
inline void check_nhwc(const std::string& layer, const Shape& s) {
  if (s.rank() != 4)
    throw std::invalid_argument(layer + ": expected inputs of rank 4 [batch, height, width, channels], got shape " +
                                s.to_string());
}

}  // namespace tapeflow::layers::internal
