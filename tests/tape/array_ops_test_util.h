// Helpers shared by the array/index op value tests.
#pragma once

#include <gmock/gmock.h>

#include <stdexcept>
#include <vector>

#include "tape/tapeflow.h"

namespace tapeflow::testing {

// Matches a callable that throws std::invalid_argument whose message satisfies m.
template <typename M>
auto invalid(M m) {
  return ::testing::ThrowsMessage<std::invalid_argument>(m);
}

inline std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace tapeflow::testing
