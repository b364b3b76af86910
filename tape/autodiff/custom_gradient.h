// custom_gradient: a function that supplies its own gradient.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow {

// Gradient function of a custom-gradient call: one upstream gradient per output in, one gradient
// per input out (an undefined Tensor for "None").
using CustomGradFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& upstream)>;
// A forward function that returns its outputs and its gradient function.
using CustomForwardFn = std::function<std::pair<std::vector<Tensor>, CustomGradFn>(const std::vector<Tensor>& inputs)>;

// Wraps `forward` so that tapes differentiate its calls with the gradient function it returns.
// The forward runs with recording paused (its inner ops are not recorded); the call is recorded
// as one "CustomGradient" op whose backward runs the gradient function with ordinary ops, so
// enclosing tapes record it and higher-order gradients go through it.
// Batching: vectorized jacobians and hessians run the gradient function once with K upstream
// gradients stacked in a leading dimension; its ops batch through their batching rules, so it must
// take shapes from the inputs it captured, not from `upstream` (whose physical shape carries K), and
// build constants from those shapes (zeros(x.shape()), a scalar) rather than zeros_like(upstream).
// Public op functions (reduce_sum, clip_by_norm, reshape, ...) already treat axes per example.
// Errors: std::invalid_argument (naming the op) if the gradient function returns the wrong number
// of gradients or a gradient of the wrong shape.
// Ref: tf.custom_gradient
std::function<std::vector<Tensor>(const std::vector<Tensor>&)> custom_gradient(CustomForwardFn forward);

// The one-input, one-output form, as in the advanced-autodiff guide:
//   auto clip_gradients = tf::custom_gradient([](const tf::Tensor& y) {
//     return std::make_pair(y, [](const tf::Tensor& dy) { return tf::clip_by_norm(dy, 0.5); });
//   });
std::function<Tensor(const Tensor&)> custom_gradient(
    std::function<std::pair<Tensor, std::function<Tensor(const Tensor&)>>(const Tensor&)> forward);

// Runs one custom-gradient call directly (what the wrappers above do).
std::vector<Tensor> call_with_custom_gradient(const CustomForwardFn& forward, const std::vector<Tensor>& inputs);

}  // namespace tapeflow
