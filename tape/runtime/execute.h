// execute(): the single dispatch point of every op.
#pragma once

#include <initializer_list>
#include <span>

#include "tape/runtime/op_def.h"

namespace tapeflow {

// Runs op.forward on `inputs` and shows the call to every active recorder on this thread
// (gradient tapes record it if they track an input; the tracer records it into a graph).
// Errors: whatever the forward function throws (std::invalid_argument naming the op and shapes);
// std::invalid_argument if an input is undefined.
TensorList execute(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs = {});
// Convenience for single-output ops.
Tensor execute1(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {});

// Records an already computed call on active recorders with a per-call gradient (custom_gradient).
void record_custom(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                   const Attrs& attrs, std::shared_ptr<const GradientFn> gradient);

}  // namespace tapeflow
