#include "tape/ops/register_ops.h"

namespace tapeflow {

void register_builtin_ops(OpRegistry& registry) {
  register_math_ops(registry);
  register_array_ops(registry);
  register_index_ops(registry);
  register_reduction_ops(registry);
  register_linalg_ops(registry);
  register_nn_ops(registry);
  register_conv_ops(registry);
  register_pool_ops(registry);
}

}  // namespace tapeflow
