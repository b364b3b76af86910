// Ready-made batching rules (OpDef::batch) for op registrations: how an op runs when some of its
// inputs carry an extra leading dimension K. See tape/runtime/batching.h for the model and
// tape/ops/README.md for which op uses which rule.
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "tape/runtime/batching.h"
#include "tape/runtime/op_def.h"

namespace tapeflow::batching {

// Element-wise op with broadcasting, any number of inputs (AddV2, Mul, Maximum, SelectV2, Equal,
// Pow...): batched inputs are padded to the common per-example rank behind K, unbatched ones
// broadcast against them, the op runs once.
BatchRule elementwise();

// Element-wise op linear in the inputs of `linear` (a bit mask), for the one-hot form of
// batch_jacobian: when only inputs of `linear` are batched, all in one-hot form and the output keeps
// their shape, the op runs on the scales and its output stays one-hot. `additive`: linear jointly
// (a sum: every input of `linear` must be one-hot, e.g. AddV2); otherwise multilinear (Mul).
// Otherwise as elementwise().
BatchRule linear_elementwise(std::uint32_t linear, bool additive);

// One input, output of the same shape, no axis attrs (Exp, Relu, Cast, Identity...): the op runs on
// [K, s] as is.
BatchRule unary();

// Element-wise op whose kernel needs inputs of equal shapes (TanhGrad, ReluGrad): unbatched inputs are
// broadcast to [K, s]. When only input `linear` is batched (the op is linear in it, e.g. ReluGrad's dy):
// x ⊙ op(..., ones) without K-fold work on the others, and one-hot inputs stay one-hot.
// linear = -1: no such input.
BatchRule same_shape(int linear = -1);

// Reductions with an "axes" attr (Sum, Mean, Max, Min, EuclideanNorm): axes shift by one.
BatchRule reduction();

// Ops with one axis attr `attr` (Softmax, LogSoftmax, ArgMax, GatherV2's params, ConcatV2): the
// axis, normalised with the per-example rank of input 0, shifts by one; unbatched inputs are broadcast
// to [K, s] (ConcatV2). Inputs listed in `never_batched` (integer indices) must not be batched.
BatchRule axis_attr(const char* attr, std::initializer_list<int> never_batched = {});

// Ops whose attr `attr` is a shape of the output (Reshape, BroadcastTo, SumToShape): K is prepended
// (BroadcastTo/SumToShape inputs are padded to the output rank first).
BatchRule shape_attr(const char* attr);

// Ops whose inputs `inputs` have an independent example axis 0, as do the outputs (Conv2D's input
// and dy, pooling): when only those inputs are batched, K is merged into axis 0 ([K, N, ...] ->
// [K*N, ...], unbatched ones among them tiled K times), the op runs once and the outputs are split
// back. Any other batched input: sequential().
BatchRule fold_into_axis0(std::initializer_list<int> inputs);

// Always correct, not fast: runs the op once per k on the k-th slices (unbatched inputs shared) and
// stacks the outputs. A building block for rules of rare cases (K op calls, not K backward passes).
TensorList sequential(std::span<const Tensor> inputs, const BatchContext& ctx);

// Helpers for writing rules.
// [K, 1 (rank - s.rank() times), s...]: per-example shape s padded to `rank` behind K.
Shape padded(std::int64_t k, const Shape& s, int rank);
// Input i of a rule made physically ready to broadcast at per-example rank `rank`: batched inputs
// reshaped to padded(K, shape, rank), unbatched ones unchanged (they right-align).
Tensor at_rank(std::span<const Tensor> inputs, const BatchContext& ctx, int i, int rank);
// Runs ctx.op() on physical inputs (recorded like any op call).
TensorList run(const BatchContext& ctx, std::span<const Tensor> inputs, const Attrs& attrs);

}  // namespace tapeflow::batching
