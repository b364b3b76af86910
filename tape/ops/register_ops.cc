#include "tape/ops/register_ops.h"

#include "tape/runtime/op_registry.h"

namespace tapeflow {

// The global registry lives with the built-in ops it is filled with (runtime sits below ops and
// does not know them). Declared in tape/runtime/op_registry.h.
OpRegistry& OpRegistry::global() {
  static OpRegistry* registry = [] {
    auto* r = new OpRegistry();  // never destroyed: ops may run during static destruction
    register_builtin_ops(*r);
    return r;
  }();
  return *registry;
}

void register_builtin_ops(OpRegistry& registry) {
  register_math_ops(registry);
  register_array_ops(registry);
  register_index_ops(registry);
  register_reduction_ops(registry);
  register_linalg_ops(registry);
  register_nn_ops(registry);
  register_conv_ops(registry);
  register_pool_ops(registry);
  register_normalization_ops(registry);
  register_rnn_ops(registry);
}

}  // namespace tapeflow
