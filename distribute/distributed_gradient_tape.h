// DistributedGradientTape: a GradientTape whose gradient() is averaged across the ranks of a Context.
//
// Facts:    Records like GradientTape (construction starts recording, on this thread). gradient()
//           runs the backward pass once and reduces the gradients in fusion buffers that start
//           while the backward pass still runs (see distribute/context.h): every rank receives
//           identical gradients. The first gradient() on a variable list checks that every rank
//           holds the same variables and broadcasts rank 0's values.
// Errors:   as GradientTape::gradient and Context::gradient (differing variables across ranks).
// Ref:      horovod.tensorflow.DistributedGradientTape
#pragma once

#include <optional>
#include <vector>

#include "distribute/context.h"
#include "tape/autodiff/gradient_tape.h"

namespace tapeflow::distribute {

// Options of a DistributedGradientTape: those of the underlying tape, and how ranks combine gradients.
struct DistributedGradientTapeOptions {
  // Options of the underlying GradientTape (persistent, watch_accessed_variables, ...).
  GradientTapeOptions tape = {};
  ReduceOp op = ReduceOp::kAverage;  // or kSum
};

// A GradientTape whose gradient() averages (or sums) the gradients across the ranks of a Context,
// reducing them in fusion buffers while the backward pass runs. Ref: hvd.DistributedGradientTape
class DistributedGradientTape {
 public:
  // Starts recording on this thread (as GradientTape); gradients are reduced through `context`,
  // which must outlive the tape.
  explicit DistributedGradientTape(Context& context, DistributedGradientTapeOptions options = {})
      : context_(context), op_(options.op), tape_(options.tape) {}

  // The underlying tape (watch, stop_recording, ...).
  GradientTape& tape() { return tape_; }
  // Records operations on `tensor` so gradients with respect to it can be taken (GradientTape::watch).
  void watch(const Tensor& tensor) { tape_.watch(tensor); }

  // d(target)/d(variables) on this rank's data, averaged (or summed) across ranks.
  std::vector<std::optional<Tensor>> gradient(const Tensor& target, const std::vector<Variable>& variables) {
    return context_.gradient(tape_, target, variables, op_);
  }

 private:
  Context& context_;
  ReduceOp op_;
  GradientTape tape_;
};

}  // namespace tapeflow::distribute
