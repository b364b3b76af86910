// Explicit registration of the built-in op families (no static-initialiser magic).
#pragma once

namespace tapeflow {

class OpRegistry;

// Adds the element-wise ops of tape/ops/math_ops.h (AddV2, Sub, Mul, RealDiv, FloorDiv, Pow,
// Maximum, Minimum, comparisons, logic, unary math, activations and their Grad ops, Identity, ...)
// to `registry`. Errors: std::invalid_argument if one of its op names is already registered
// (OpRegistry::add).
void register_math_ops(OpRegistry& registry);
// Adds the shape ops of tape/ops/array_ops.h (Reshape, BroadcastTo, SumToShape, Transpose,
// ConcatV2, Slice, SplitV, Pad, ...) to `registry`. Errors: std::invalid_argument if one of its op
// names is already registered (OpRegistry::add).
void register_array_ops(OpRegistry& registry);
// Adds the indexing ops of tape/ops/index_ops.h (GatherV2, UnsortedSegmentSum, OneHot, ArgMax,
// ArgMin) to `registry`. Errors: std::invalid_argument if one of its op names is already registered
// (OpRegistry::add).
void register_index_ops(OpRegistry& registry);
// Adds the reductions of tape/ops/reduction_ops.h (Sum, Mean, Max, Min) to `registry`. Errors:
// std::invalid_argument if one of its op names is already registered (OpRegistry::add).
void register_reduction_ops(OpRegistry& registry);
// Adds the ops of tape/ops/nn_ops.h (Softmax, LogSoftmax, SparseSoftmaxCrossEntropyWithLogits,
// EuclideanNorm) to `registry`. Errors: std::invalid_argument if one of its op names is already
// registered (OpRegistry::add).
void register_nn_ops(OpRegistry& registry);
// Adds the linear-algebra ops of tape/ops/linalg_ops.h (MatMul, MatrixSolve) to `registry`. Errors:
// std::invalid_argument if one of its op names is already registered (OpRegistry::add).
void register_linalg_ops(OpRegistry& registry);
// Adds the convolution ops of tape/ops/conv_ops.h (Conv2D, FusedConv2D, FusedConv2DMaxPool and
// their backprop ops Conv2DBackpropInput, Conv2DBackpropFilter, FusedConv2DMaxPoolBackpropFilter)
// to `registry`. Errors: std::invalid_argument if one of its op names is already registered
// (OpRegistry::add).
void register_conv_ops(OpRegistry& registry);
// Adds the pooling ops of tape/ops/conv_ops.h (MaxPool, AvgPool and their gradient ops MaxPoolGrad,
// MaxPoolGradGrad, MaxPoolGradWithArgmax, MaxPoolGradGradWithArgmax, AvgPoolGrad) to `registry`.
// Errors: std::invalid_argument if one of its op names is already registered (OpRegistry::add).
void register_pool_ops(OpRegistry& registry);
// Adds the ops of tape/ops/normalization_ops.h (LayerNorm, LayerNormGrad, LayerNormAffine,
// LayerNormAffineGrad, Gelu, GeluGrad) to `registry`. Errors: std::invalid_argument if one of its
// op names is already registered (OpRegistry::add).
void register_normalization_ops(OpRegistry& registry);
// Adds the recurrent ops of tape/ops/rnn_ops.h (LSTMBlockCell) to `registry`. Errors:
// std::invalid_argument if one of its op names is already registered (OpRegistry::add).
void register_rnn_ops(OpRegistry& registry);
// All of the above plus the runtime's own ops (ReadVariableOp, CustomGradient).
void register_builtin_ops(OpRegistry& registry);

}  // namespace tapeflow
