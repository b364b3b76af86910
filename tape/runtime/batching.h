// Batching: running ops on values that carry an extra leading dimension K (K cotangents at once).
//
// The vectorized jacobian / batch_jacobian / hessian run the one backward pass
// (TapeState::backward) with K cotangents. The pass opens a BatchScope on its thread and marks its
// seeds as batched; from then on every op executed on this thread whose inputs include a batched
// tensor is dispatched by execute() to the op's batching rule (OpDef::batch), which returns batched
// outputs. Unmarked tensors are per-example values shared by all K (saved forward values,
// constants). Rules run with batching suspended, on physical tensors, and are recorded by active
// tapes like any op calls, so vectorized results stay differentiable.
//
// One-hot form (an internal optimisation of batch_jacobian): a batched value
// v[k, i, j] = δ(j, offset + k) s[i, j] over a rank-2 target [b, n] is carried as its scale s alone
// (physically [b, n]) while it flows through ops that are linear in it (BatchRule::accepts_one_hot);
// any other op receives the dense [K, b, n] tensor.
// Ref: JAX's batching rules (jax/interpreters/batching.py), TensorFlow's pfor converters.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "tape/runtime/op_def.h"

namespace tapeflow {

// Thrown when an op without a batching rule (or marked loop_only) runs on batched inputs; jacobian
// and hessian catch it and take the loop instead. what(): "op 'X' has no batching rule".
class BatchingUnsupported : public std::logic_error {
 public:
  // what() is "op '<op>' has no batching rule".
  explicit BatchingUnsupported(const std::string& op);
  // The name of the op that cannot batch.
  const std::string& op() const { return op_; }

 private:
  std::string op_;
};

// The batched values of this thread's reverse sweep. Scopes nest (innermost active); not copyable.
class BatchScope {
 public:
  // Opens a scope of batch size K = `size` on this thread (the innermost until destroyed).
  explicit BatchScope(std::int64_t size);
  ~BatchScope();
  BatchScope(const BatchScope&) = delete;
  BatchScope& operator=(const BatchScope&) = delete;

  // The active scope of this thread (null if none, or while a Suspend lives).
  static BatchScope* current();
  // K, the batch dimension every batched value leads with.
  std::int64_t size() const { return size_; }

  // Marks t as batched ([K, per-example shape...]). Errors: std::logic_error if t's first dim is not K.
  void mark(const Tensor& t);
  // True if t was marked batched (dense [K, ...]) in this scope.
  bool batched(const Tensor& t) const { return !empty_ && batched_.count(t.id()) != 0; }
  // Batched or one-hot.
  bool carries_batch(const Tensor& t) const { return batched(t) || one_hot(t); }
  // t's per-example shape (its physical shape without the leading K if batched).
  Shape logical_shape(const Tensor& t) const;

  // One-hot form: enables it for values of shape `shape` ([b, n]) with columns offset .. offset+K-1.
  void enable_one_hot(std::int64_t offset, const Shape& shape);
  // Marks scale s ([b, n]) as the one-hot value described in the header comment.
  void mark_one_hot(const Tensor& scale);
  // True if t is the scale of a one-hot value (mark_one_hot) in this scope.
  bool one_hot(const Tensor& t) const { return !empty_ && one_hot_.count(t.id()) != 0; }
  // The one-hot form's first column (enable_one_hot's offset; -1 if not enabled).
  std::int64_t one_hot_offset() const { return offset_; }
  // The one-hot form's per-example shape [b, n] (enable_one_hot's shape).
  const Shape& one_hot_shape() const { return one_hot_shape_; }
  // The dense [K, ...] batched tensor of t: a one-hot value materialised (pattern ⊙ s, by ops), an
  // unbatched one broadcast; a batched one as is. Runs with batching suspended; the result is marked.
  Tensor dense(const Tensor& t);

  // While it lives, no scope is active on this thread (what batching rules run under).
  class Suspend {
   public:
    Suspend();
    ~Suspend();
    Suspend(const Suspend&) = delete;
    Suspend& operator=(const Suspend&) = delete;

   private:
    BatchScope* saved_;
  };

 private:
  std::int64_t size_;
  bool empty_ = true;  // nothing marked yet (fast path)
  std::unordered_set<std::int64_t> batched_, one_hot_;
  std::int64_t offset_ = -1;
  Shape one_hot_shape_;
  Tensor pattern_;  // [K, b, n] 0/1, built on first materialisation
  BatchScope* previous_;
};

// Runs `op` on inputs of which at least one carries the batch of `scope` (what execute() does
// then): calls op.batch under a Suspend and marks its outputs. Not recorded as a call of `op`
// (the rule's own op calls are). Errors: BatchingUnsupported if the op has no rule or is loop_only;
// std::logic_error if the rule returns an output without the leading K.
TensorList execute_batched(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs, BatchScope& scope);

}  // namespace tapeflow

namespace tapeflow {

// t's per-example shape under this thread's batch scope (its shape when no scope is active or t is
// unbatched). Public op functions that inspect shapes before executing (axis normalisation,
// broadcast shortcuts) use it, so they mean the same thing inside a vectorized backward pass.
Shape logical_shape(const Tensor& t);
// The rank of logical_shape(t): t's per-example rank inside a vectorized backward pass.
inline int logical_rank(const Tensor& t) { return logical_shape(t).rank(); }

}  // namespace tapeflow
