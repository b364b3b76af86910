// ReplicaContext: what Model::fit / evaluate need from a data-parallel runtime, without knowing it.
//
// Facts:    models/ knows no MPI: distribute::Context (distribute/context.h) implements this over Open
//           MPI; tests may implement it in-process. Every method is a collective: all ranks call it
//           in the same order with the same sizes (Model::fit guarantees that for its own calls).
//           rank() is this replica's index in [0, size()); size() the number of replicas in sync.
// Ref:      tf.distribute.ReplicaContext (num_replicas_in_sync, replica_id_in_sync_group, all_reduce),
//           Horovod's rank()/size().
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "tape/autodiff/gradient_tape.h"
#include "tape/core/tensor.h"
#include "tape/runtime/variable.h"

namespace tapeflow::models {

// How all_reduce combines the ranks' values. Ref: hvd.Average / hvd.Sum, tf.distribute.ReduceOp
enum class ReduceOp { kAverage, kSum, kMin, kMax };

// The collectives a data-parallel fit / evaluate runs on (FitOptions::replica_context); implemented
// by distribute::Context over MPI. Every method is a collective (see the file comment).
class ReplicaContext {
 public:
  virtual ~ReplicaContext() = default;

  // This replica's index in [0, size()); rank 0 runs the callbacks and logs.
  virtual int rank() const = 0;
  // The number of replicas in sync (1: fit and evaluate behave as without a context).
  virtual int size() const = 0;

  // tape.gradient(target, variables), then each gradient averaged across ranks; every rank receives
  // bit-identical results. A variable without a gradient on some rank counts as zeros there; it
  // stays without gradient (nullopt) only if no rank has one.
  // Errors:   std::invalid_argument (on every rank) if the ranks' variables differ in count, name,
  //           shape or dtype (checked on the first call, naming the first difference and the ranks).
  virtual std::vector<std::optional<Tensor>> gradient(GradientTape& tape, const Tensor& target,
                                                      const std::vector<Variable>& variables) = 0;

  // Combines `values` element-wise across ranks, in place; `what` names the collective in errors.
  virtual void all_reduce(std::span<double> values, ReduceOp op, const char* what) = 0;
  // Overwrites `values` with root's on every rank.
  virtual void broadcast(std::span<double> values, int root, const char* what) = 0;
  // Assigns root's value of every variable on every rank (same list, in the same order, on each rank).
  virtual void broadcast_variables(const std::vector<Variable>& variables, int root) = 0;
};

}  // namespace tapeflow::models
