// Explicit registration of the built-in op families (no static-initialiser magic).
#pragma once

namespace tapeflow {

class OpRegistry;

void register_math_ops(OpRegistry& registry);
void register_array_ops(OpRegistry& registry);
void register_index_ops(OpRegistry& registry);
void register_reduction_ops(OpRegistry& registry);
void register_nn_ops(OpRegistry& registry);
void register_linalg_ops(OpRegistry& registry);
void register_conv_ops(OpRegistry& registry);
void register_pool_ops(OpRegistry& registry);
void register_normalization_ops(OpRegistry& registry);
void register_rnn_ops(OpRegistry& registry);
// All of the above plus the runtime's own ops (ReadVariableOp, CustomGradient).
void register_builtin_ops(OpRegistry& registry);

}  // namespace tapeflow
