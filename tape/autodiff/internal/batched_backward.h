// Batched reverse pass: K cotangents through one backward sweep (the vectorized jacobian path).
// Facts:    every gradient carries a leading batch dimension K. Element-wise ops, broadcasts,
//           reshapes and matmul reuse their own gradient function (saved tensors broadcast against
//           the batched gradient once shapes are padded to a common rank); sum/mean shift their axes
//           by one; max/min and 2-D matmul have dedicated rules. Custom gradients and other ops
//           have no batched rule (first_unbatched_op names them) except when K == 1.
#pragma once

#include <functional>
#include <mutex>
#include <span>
#include <unordered_map>
#include <string>
#include <vector>

#include "tape/autodiff/internal/tape_state.h"

namespace tapeflow::internal {

// Called after each op's batched gradient with the record, its index on the tape and its input
// gradients ([K, input shape], or undefined where none flows).
using BatchedOpHook =
    std::function<void(const OpRecord& record, std::size_t index, std::span<const Tensor> input_grads)>;

// Tensors a batched pass derives from an op's saved values alone (the gradient scales of an
// element-wise op), shared by the passes over one tape (row chunks, possibly on several threads)
// so that each is computed once. Thread-safe.
class BatchedCache {
 public:
  TensorList get(const OpRecord& r, const std::function<TensorList()>& make);

 private:
  std::mutex mutex_;
  std::unordered_map<const OpRecord*, TensorList> scales_;
};

// The name of the first op (in backward order) on a path from a source to a target that has no
// batched gradient rule; empty if every such op has one.
std::string first_unbatched_op(const TapeState& tape, std::span<const Tensor> targets,
                               std::span<const std::int64_t> source_ids);

// Reverse pass with K cotangents at once. seeds[t] has shape [K, targets[t].shape]. Returns one
// gradient per source id, [K, source shape], undefined where unconnected. Ops are recorded on
// active tapes as by TapeState::backward.
// one_hot_offset >= 0: the single target is [b, n] and seeds[0][k, i, j] = δ(j, one_hot_offset + k)
// (batch_jacobian's seeds for columns offset .. offset + K - 1); gradients then stay
// "seed ⊙ scale" through element-wise ops and same-shape adds, and the first 2-D matmul becomes a
// broadcast product instead of a GEMM.
// cache: shared with other passes over the same tape (see BatchedCache); null = none.
// Errors:   std::logic_error if K > 1 and an op has no batched rule (check first_unbatched_op).
std::vector<Tensor> batched_backward(const TapeState& tape, std::span<const Tensor> targets,
                                     std::span<const Tensor> seeds, std::span<const std::int64_t> source_ids,
                                     const BatchedOpHook& hook = {}, std::int64_t one_hot_offset = -1,
                                     BatchedCache* cache = nullptr);

}  // namespace tapeflow::internal
