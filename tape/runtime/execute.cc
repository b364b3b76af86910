#include "tape/runtime/execute.h"

#include <stdexcept>

#include <algorithm>

#include "tape/runtime/batching.h"
#include "tape/runtime/internal/recorder_stack.h"
#include "tape/runtime/recorder.h"

namespace tapeflow {
namespace {
// The one mutable recorder stack of this thread (internal/recorder_stack.h).
std::vector<Recorder*>& recorder_stack() {
  thread_local std::vector<Recorder*> stack;
  return stack;
}
}  // namespace

namespace internal {
const std::vector<Recorder*>& active_recorders() { return recorder_stack(); }
void push_recorder(Recorder* recorder) { recorder_stack().push_back(recorder); }
void insert_recorder(Recorder* recorder, std::size_t position) {
  auto& stack = recorder_stack();
  stack.insert(stack.begin() + static_cast<std::ptrdiff_t>(std::min(position, stack.size())), recorder);
}
int remove_recorder(const Recorder* recorder) {
  auto& stack = recorder_stack();
  for (std::size_t i = stack.size(); i-- > 0;)
    if (stack[i] == recorder) {
      stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(i));
      return static_cast<int>(i);
    }
  return -1;
}
}  // namespace internal

bool is_recording() { return !recorder_stack().empty(); }

RecordingPause::RecordingPause() : saved_(std::move(recorder_stack())) { recorder_stack().clear(); }
RecordingPause::~RecordingPause() { recorder_stack() = std::move(saved_); }

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
  const auto& recorders = recorder_stack();
  if (!recorders.empty()) {
    static const std::shared_ptr<const GradientFn> kNoCustom;
    // By index: a recorder may not change the stack, but be safe against it.
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
  const auto& recorders = recorder_stack();
  for (std::size_t i = 0; i < recorders.size(); ++i) recorders[i]->record(op, inputs, outputs, attrs, gradient);
}

}  // namespace tapeflow
