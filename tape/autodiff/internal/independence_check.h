// batch_jacobian's independence check: does target[i] depend on source[k] for some i != k?
#pragma once

#include <cstdint>

#include "tape/autodiff/internal/tape_state.h"

namespace tapeflow::internal {

// Pushes 2·ceil(log2 b) random cotangents, each non-zero only on the examples whose index has bit
// j equal to 0 (or 1), and requires the gradient w.r.t. the source to vanish on the other examples
// (relative tolerance 1e-5 float32, 1e-12 float64). Every pair of distinct examples differs in some
// bit, so any cross-example dependence shows up (with probability 1 over the random values).
// `vectorized`: one batched backward pass for all probes, else one pass per probe.
// Errors:   std::invalid_argument naming the first op (in backward order) whose input gradient
//           leaks onto examples outside the probe, found by one instrumented pass.
void check_batch_independence(const TapeState& tape, const Tensor& target, std::int64_t source_id, bool vectorized);

}  // namespace tapeflow::internal
