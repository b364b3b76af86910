// Recorder: what watches ops as they execute (gradient tapes, the function tracer).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "tape/runtime/op_def.h"

namespace tapeflow {

class Variable;

// Something that observes op executions on this thread. Tapes record differentiable ops whose
// inputs they track; the tracer records everything.
class Recorder {
 public:
  virtual ~Recorder() = default;
  // Called after every op executed on this thread while the recorder is active.
  // `custom_gradient` is set for custom_gradient calls: it replaces op.gradient for this call.
  virtual void record(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                      const Attrs& attrs, const std::shared_ptr<const GradientFn>& custom_gradient) = 0;
  // Called when a variable is read; the tape may start watching it.
  virtual void variable_accessed(const Variable& variable) = 0;
  // True if gradients can flow to the tensor (or variable handle) with this id.
  virtual bool tracks(std::int64_t id) const = 0;
};

// True when a recorder is active on this thread: a GradientTape that is recording, or a function
// being traced. False inside a RecordingPause. Code with a faster path that no recorder may see
// (a fused kernel instead of ops, raw-memory assembly) takes it only when this is false.
// Tapes are per thread, as in TF.
bool is_recording();

// Scope guard: no recorder on this thread sees ops while it lives (custom_gradient's forward,
// optimizer updates, metrics). Restores them on destruction. (The recorder stack itself is internal:
// tape/runtime/internal/recorder_stack.h.)
class RecordingPause {
 public:
  RecordingPause();
  ~RecordingPause();
  RecordingPause(const RecordingPause&) = delete;
  RecordingPause& operator=(const RecordingPause&) = delete;

 private:
  std::vector<Recorder*> saved_;
};

}  // namespace tapeflow
