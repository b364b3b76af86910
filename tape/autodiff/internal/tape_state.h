// The data behind a GradientTape: recorded ops keyed by tensor id, and the backward pass.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "tape/autodiff/gradient_tape.h"
#include "tape/runtime/recorder.h"

namespace tapeflow::internal {

// One recorded op call. Keeps only what its gradient needs (OpDef::saves).
struct OpRecord {
  const OpDef* op = nullptr;
  std::shared_ptr<const GradientFn> custom_gradient;  // set for custom_gradient calls
  SmallVector<std::int64_t, 3> input_ids;
  SmallVector<std::int64_t, 2> output_ids;
  SmallVector<Shape, 2> input_shapes;
  SmallVector<DType, 3> input_dtypes;
  SmallVector<Shape, 1> output_shapes;
  SmallVector<DType, 2> output_dtypes;
  TensorList saved_inputs, saved_outputs;
  Attrs attrs;
};

class TapeState final : public Recorder {
 public:
  explicit TapeState(GradientTapeOptions options) : options_(options) {}

  // Recorder
  void record(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs, const Attrs& attrs,
              const std::shared_ptr<const GradientFn>& custom_gradient) override;
  void variable_accessed(const Variable& variable) override;
  bool tracks(std::int64_t id) const override { return producer_.count(id) != 0; }

  void watch(const Tensor& t);
  void watch(const Variable& v);
  void start();  // pushes onto this thread's recorder stack
  void stop();   // removes from it
  bool recording() const { return recording_; }
  void reset();

  // Marks a gradient()/jacobian() call; throws std::logic_error on a second call of a
  // non-persistent tape, and stops recording a non-persistent tape (as TF does).
  void begin_gradient_call(const char* what);

  // The backward pass. Seeds: gradients of `targets` (same order). Returns one gradient per source
  // id (undefined where unconnected). Reads only the ops recorded so far; const, so several
  // threads may run it at once on a tape nothing records to (the parallel jacobian).
  std::vector<Tensor> backward(std::span<const Tensor> targets, std::span<const Tensor> seeds,
                               std::span<const std::int64_t> source_ids) const;

  const GradientTapeOptions& options() const { return options_; }
  std::vector<Variable> watched_variables() const;
  std::size_t num_records() const { return ops_.size(); }
  const std::deque<OpRecord>& records() const { return ops_; }

  // StopRecording support: position in the stack while paused.
  int pause();
  void resume(int position);

 private:
  GradientTapeOptions options_;
  bool recording_ = false;
  bool used_ = false;
  std::deque<OpRecord> ops_;  // deque: records stay put while the backward pass appends more
  std::unordered_map<std::int64_t, std::int64_t> producer_;  // tensor id -> op index, -1 if watched
  std::vector<Variable> watched_variables_;
};

}  // namespace tapeflow::internal
