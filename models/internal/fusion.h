// Internal: the models' layer-fusion pass, the one place where a model runs its layers other than
// one call at a time (as TF's grappler remapper.cc keeps op fusion out of the ops and layers it
// rewrites). Sequential and Functional describe their layer graph as LayerCalls; plan_fusion()
// matches the patterns once, run_planned() runs each call as planned. The layers know nothing of it:
// a Conv2D called on its own runs conv2d, the bias add and its activation as three ops.
//
// Patterns, matched in this order (a call takes part in one at most):
//   1. conv -> max pool: a Conv2D / Conv2DTranspose with activation relu whose output is read only
//      by a MaxPooling2D of the same dtype (not also by another call, not a model output) runs as
//      conv -> pool -> relu: max and relu commute (relu is non-decreasing), so values and
//      gradients of every order are those of conv -> relu -> pool, bit for bit (a window whose
//      maximum is <= 0 gets a zero gradient either way), while the relu and its gradient touch the
//      pooled tensor, a quarter of the size for 2x2 pools. A Conv2D with a bias runs conv + bias +
//      pool + relu as one fused_conv2d_max_pool2d op (values bit-identical but for float 3x3
//      stride-1 VALID convolutions of >= 16 input and output channels under a 2x2 stride-2 pool,
//      W8's conv2, which run Winograd F(2x2, 3x3) within rounding; tape/ops/conv_ops.h): with a 2x2 pool over few input channels (W8's conv1) the
//      convolution's output is never stored, and the pool's gradient scatters from the argmax
//      without reading it. Only a NaN in a window can tell the orders apart (it may hide the
//      window's maximum from the pool).
//   2. conv + bias + activation: any other Conv2D with a bias and activation "", "linear" or
//      "relu" runs as one fused_conv2d op (bit-identical to conv2d, + bias and relu in turn, values
//      and gradients; one or two passes fewer over the output).
// Facts:    Every other call runs as written. `training` changes nothing: the patterns hold (and
//           fire) in training and in inference. A fused call's output carries no Keras mask, as
//           Conv2D, Conv2DTranspose and MaxPooling2D drop masks (functional_masks.h). Layers are
//           matched by type and options, so a plan stays valid for as long as the graph does.
// Errors:   run_planned: the layers' own (shape errors name the conv or the pool they concern).
// Ref:      tensorflow/core/grappler/optimizers/remapper.cc (FusedConv2D: Conv2D + BiasAdd + Relu)
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "layers/layer.h"

namespace tapeflow::layers {
class ConvBase;
}  // namespace tapeflow::layers

namespace tapeflow::models::internal {

// One layer call of a model's graph: the layer, the value slots it reads and the slot it writes.
struct LayerCall {
  layers::Layer* layer = nullptr;
  std::vector<std::size_t> inputs;
  std::size_t output = 0;
};

// How a call runs.
enum class FusedRun {
  kAsWritten,    // the layer's own call (not part of a pattern)
  kConvBias,     // pattern 2: fused_conv2d
  kPassOn,       // pattern 1's conv: its output is its input, which the pool's call convolves
  kConvMaxPool,  // pattern 1's pool: the conv (`conv`), the pool and the relu
};

// One call's plan. conv: pattern 1's conv, on the pool's entry.
struct FusedCall {
  FusedRun run = FusedRun::kAsWritten;
  layers::ConvBase* conv = nullptr;
};

// The plan of each call, in the order of `calls` (a topological order, each output slot written by
// one call). `outputs`: the slots the model returns (a conv whose output is returned is not folded
// into its pool).
std::vector<FusedCall> plan_fusion(const std::vector<LayerCall>& calls, const std::vector<std::size_t>& outputs);

// The plan of a chain of layers (a Sequential model: each layer reads the previous one's output,
// the last one's is the model's).
std::vector<FusedCall> plan_chain_fusion(const std::vector<std::shared_ptr<layers::Layer>>& chain);

// Runs `layer` (the call `plan` belongs to) on its one input `x`, as `plan` says: kAsWritten is
// layer(x, training), kPassOn returns x.
Tensor run_planned(const FusedCall& plan, layers::Layer& layer, const Tensor& x, bool training);

}  // namespace tapeflow::models::internal
