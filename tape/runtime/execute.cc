#include "tape/runtime/execute.h"

#include <stdexcept>

#include "tape/runtime/batching.h"
#include "tape/runtime/recorder.h"

namespace tapeflow {

std::vector<Recorder*>& active_recorders() {
  thread_local std::vector<Recorder*> stack;
  return stack;
}

RecordingPause::RecordingPause() : saved_(std::move(active_recorders())) { active_recorders().clear(); }
RecordingPause::~RecordingPause() { active_recorders() = std::move(saved_); }

TensorList execute(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined())
      throw std::invalid_argument(op.name + ": input " + std::to_string(i) + " is an undefined tensor");
  if (BatchScope* scope = BatchScope::current()) {
    // Inside a vectorized backward pass: batched inputs go to the op's batching rule (batching.h).
    for (const Tensor& t : inputs)
      if (scope->carries_batch(t)) return execute_batched(op, inputs, attrs, *scope);
  }
  TensorList outputs;
  try {
    outputs = op.forward(inputs, attrs);
  } catch (const ShapeError& e) {  // a shape that cannot exist (e.g. from a hostile attribute): name the op
    throw ShapeError(op.name + ": " + e.what());
  }
  auto& recorders = active_recorders();
  if (!recorders.empty()) {
    static const std::shared_ptr<const GradientFn> kNoCustom;
    // Iterate over a copy: a recorder may not change the stack, but be safe against it.
    for (std::size_t i = 0; i < recorders.size(); ++i) recorders[i]->record(op, inputs, outputs, attrs, kNoCustom);
  }
  return outputs;
}

Tensor execute1(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs) {
  TensorList out = execute(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
  return std::move(out[0]);
}

void record_custom(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                   const Attrs& attrs, std::shared_ptr<const GradientFn> gradient) {
  auto& recorders = active_recorders();
  for (std::size_t i = 0; i < recorders.size(); ++i) recorders[i]->record(op, inputs, outputs, attrs, gradient);
}

}  // namespace tapeflow
