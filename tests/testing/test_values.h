// Small helpers for value and error tests: iota tensors and exception-message checks.
#pragma once

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow::testing {

// A float64 tensor of `shape` holding 1, 2, 3, ... in row-major order.
inline Tensor iota(const Shape& shape) {
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1);
  return constant<double>(v, shape);
}

// Expects fn() to throw std::invalid_argument whose message contains every one of `parts`.
template <class F>
void expect_invalid_argument(F fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace tapeflow::testing
