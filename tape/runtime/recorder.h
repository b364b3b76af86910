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

// The active recorders of this thread, innermost last. Tapes are per thread, as in TF.
std::vector<Recorder*>& active_recorders();

// Scope guard: no recorder on this thread sees ops while it lives (custom_gradient's forward,
// optimizer updates, metrics). Restores them on destruction.
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
