// The Functional node call that RNN and Bidirectional share (their call_outputs).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow::layers::internal {

// inputs = {sequences, initial states..., then the mask when `mask`} -> l.call_with_state(...),
// states kept only with `return_state`. Errors: std::invalid_argument, prefixed by `who`, for no
// sequences.
template <class R>
std::vector<Tensor> recurrent_node_outputs(R& l, const std::vector<Tensor>& inputs, bool mask, bool return_state,
                                           bool training, const std::string& who) {
  const std::size_t n = inputs.size() - (mask && !inputs.empty() ? 1 : 0);
  if (n == 0) throw std::invalid_argument(who + ": no inputs");
  const auto end = inputs.begin() + static_cast<std::ptrdiff_t>(n);
  std::vector<Tensor> out = l.call_with_state(inputs[0], std::vector<Tensor>(inputs.begin() + 1, end),
                                              mask ? std::optional<Tensor>(inputs.back()) : std::nullopt, training);
  if (!return_state) out.resize(1);
  return out;
}

}  // namespace tapeflow::layers::internal
