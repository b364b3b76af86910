// The data behind a GradientTape: recorded ops keyed by tensor id, and the backward pass.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "tape/autodiff/gradient_tape.h"
#include "tape/autodiff/internal/flat_id_map.h"
#include "tape/runtime/recorder.h"

namespace tapeflow::internal {

// One recorded op call. Keeps only what its gradient needs (OpDef::saves).
struct OpRecord {
  OpRecord() {}  // user-provided: chunk allocation must not zero every record first
  const OpDef* op = nullptr;
  std::shared_ptr<const GradientFn> custom_gradient;  // set for custom_gradient calls
  SmallVector<std::int64_t, 3> input_ids;
  // Where each input came from when recorded: encode_slot(op, output) of its producer, kWatched,
  // or kUntracked. Cached here so the backward pass needs no id lookups.
  SmallVector<std::int64_t, 3> input_producers;
  SmallVector<std::int64_t, 2> output_ids;
  std::int64_t first_slot = 0;  // index of output 0 among all recorded outputs (backward's grad slots)
  SmallVector<Shape, 2> input_shapes;
  SmallVector<DType, 3> input_dtypes;
  SmallVector<Shape, 1> output_shapes;
  SmallVector<DType, 2> output_dtypes;
  TensorList saved_inputs, saved_outputs;
  Attrs attrs;
};

// Options of the one backward pass (TapeState::backward).
struct BackwardOptions {
  // K > 0: K cotangents at once (the vectorized jacobian / hessian). Seeds are [K, target shape],
  // results [K, source shape]; every op's ordinary gradient function runs under a BatchScope, so
  // the ops it executes dispatch to their batching rules (tape/runtime/batching.h). Errors:
  // BatchingUnsupported (from the op that has no rule) -- callers fall back to the loop.
  std::int64_t batch = 0;
  // With batch > 0, one rank-2 target [b, n] and offset + K <= n: the seeds are batch_jacobian's
  // one-hot rows (seed[k, i, j] = δ(j, offset + k)) and are carried in one-hot form (batching.h);
  // `seeds` is then ignored.
  std::int64_t one_hot_offset = -1;
  // Called after each op's gradient with the record, its index on the tape and its input gradients
  // (undefined where none flows).
  std::function<void(const OpRecord& record, std::size_t index, std::span<const Tensor> input_grads)> on_op;
  // Called as soon as source s's gradient is final: right after the last recorded op that
  // contributes to it (smallest tape index among its consumers on the pruned tape), before the sweep
  // goes on; sources no op contributes to, right after seeding. The value is what backward returns
  // for it (possibly undefined: no path to a target).
  std::function<void(std::size_t source, const Tensor& gradient)> on_gradient_final;
};

class TapeState final : public Recorder {
 public:
  explicit TapeState(GradientTapeOptions options) : options_(options) {}

  // Recorder
  void record(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs, const Attrs& attrs,
              const std::shared_ptr<const GradientFn>& custom_gradient) override;
  void variable_accessed(const Variable& variable) override;
  bool tracks(std::int64_t id) const override { return producer_.contains(id); }

  static constexpr std::int64_t kWatched = -1;
  static constexpr std::int64_t kUntracked = FlatIdMap::kAbsent;
  static constexpr std::int64_t encode_slot(std::int64_t op, std::int64_t output) { return (op << 16) | output; }
  static constexpr std::int64_t slot_op(std::int64_t code) { return code >> 16; }
  static constexpr std::int64_t slot_output(std::int64_t code) { return code & 0xffff; }

  void watch(const Tensor& t);
  void watch(const Variable& v);
  void start();  // pushes onto this thread's recorder stack
  void stop();   // removes from it
  bool recording() const { return recording_; }
  void reset();
  // Drops the recorded ops (a non-persistent tape after its gradient call); watched variables stay listed.
  void release();

  // Marks a gradient()/jacobian() call; throws std::logic_error on a second call of a
  // non-persistent tape, and stops recording a non-persistent tape (as TF does).
  void begin_gradient_call(const char* what);

  // The backward pass -- the only reverse sweep in tapeflow (gradient, jacobian, batch_jacobian,
  // hessian, the loop and vectorized paths). Seeds: gradients of `targets` (same order). Returns one
  // gradient per source id (undefined where unconnected). Reads only the ops recorded so far; const,
  // so several threads may run it at once on a tape nothing records to (the parallel jacobian).
  std::vector<Tensor> backward(std::span<const Tensor> targets, std::span<const Tensor> seeds,
                               std::span<const std::int64_t> source_ids, const BackwardOptions& options = {}) const;

  const GradientTapeOptions& options() const { return options_; }
  std::vector<Variable> watched_variables() const;
  std::size_t num_records() const { return ops_.size(); }
  const StableVector<OpRecord>& records() const { return ops_; }
  // Producer code of a tensor id (encode_slot, kWatched or kUntracked).
  std::int64_t producer(std::int64_t id) const { return producer_.find(id); }

  // StopRecording support: position in the stack while paused.
  int pause();
  void resume(int position);

 private:
  GradientTapeOptions options_;
  bool recording_ = false;
  bool used_ = false;
  StableVector<OpRecord> ops_;  // records stay put while the backward pass appends more
  FlatIdMap producer_;          // tensor id -> encode_slot(op, output), kWatched if watched
  std::int64_t num_slots_ = 0;  // outputs recorded so far
  std::vector<Variable> watched_variables_;
};

}  // namespace tapeflow::internal
