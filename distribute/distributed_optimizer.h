// DistributedOptimizer: wraps any Optimizer so that apply_gradients first averages the gradients
// across the ranks of a Context (for training loops that compute gradients with a plain tape).
//
// Facts:    apply_gradients(grads, vars) = optimizer.apply_gradients(context.reduce_gradients(grads,
//           vars), vars): every rank applies the identical update. A gradient absent on some ranks
//           counts as zeros there; absent on every rank, the variable is skipped (as Optimizer).
//           The reduction starts after the backward pass (use DistributedGradientTape or
//           Model::fit with a replica context to overlap it with the backward pass).
// Errors:   std::invalid_argument for a null context or optimizer, as Optimizer::apply_gradients,
//           and for variables that differ across ranks (first call).
// Ref:      horovod.tensorflow.DistributedOptimizer
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "distribute/context.h"
#include "optimizers/optimizer.h"

namespace tapeflow::distribute {

// An Optimizer wrapper whose apply_gradients first averages (or sums) the gradients across the
// ranks of a Context, so every rank applies the identical update. Ref: hvd.DistributedOptimizer
class DistributedOptimizer {
 public:
  // Wraps `optimizer`, reducing gradients by `op` through `context` (which must outlive this).
  // Errors: std::invalid_argument for a null optimizer.
  DistributedOptimizer(Context& context, std::shared_ptr<optimizers::Optimizer> optimizer,
                       ReduceOp op = ReduceOp::kAverage)
      : context_(context), optimizer_(std::move(optimizer)), op_(op) {
    if (!optimizer_) throw std::invalid_argument("distribute::DistributedOptimizer: no optimizer given");
  }

  // optimizer->apply_gradients(context.reduce_gradients(gradients, variables, op), variables).
  // Collective: every rank calls it with the same variables. Errors: as Optimizer::apply_gradients,
  // and std::invalid_argument for variables that differ across ranks (checked at the first call).
  void apply_gradients(const std::vector<std::optional<Tensor>>& gradients, const std::vector<Variable>& variables) {
    optimizer_->apply_gradients(context_.reduce_gradients(gradients, variables, op_), variables);
  }
  // The wrapped optimizer (its slots, iterations and checkpoints).
  const std::shared_ptr<optimizers::Optimizer>& optimizer() const { return optimizer_; }

 private:
  Context& context_;
  std::shared_ptr<optimizers::Optimizer> optimizer_;
  ReduceOp op_;
};

}  // namespace tapeflow::distribute
