// Transformer ops: layer normalization over the last axis and GELU (exact and tanh approximation).
//
// DTypes:   float32, float64.
// Gradient: written with tapeflow ops (LayerNormGrad and GeluGrad are ops with their own gradients),
//           so all of these differentiate to any order.
// Ref:      keras.ops.layer_normalization, keras.activations.gelu, tf.nn.gelu
#pragma once

#include "tape/core/tensor.h"

namespace tapeflow {

// (x - mean) / sqrt(var + epsilon) over the last axis (no scale or offset: the layer applies them).
// Shapes:   x [..., n] (rank >= 1) -> same shape.
// Facts:    var is the biased variance, both moments in two passes (accumulated in double for
//           float32): stable for large means. One fused kernel; backward keeps x only.
// Errors:   std::invalid_argument for rank 0, epsilon < 0 or non-finite, a non-float dtype.
// Gradient: dx = layer_norm_grad(x, g) = r (g - mean(g) - y mean(g y)), r = 1 / sqrt(var + epsilon).
// Ref:      keras.ops.layer_normalization (gamma = beta = None), torch.nn.functional.layer_norm
Tensor layer_norm(const Tensor& x, double epsilon = 1e-3);

// The gradient of layer_norm at x applied to dy (the Jacobian is symmetric: also its transpose).
// Shapes:   x, dy [..., n] of the same shape -> [..., n].
// Errors:   as layer_norm; std::invalid_argument when x and dy differ in shape or dtype.
// Gradient: d dy = layer_norm_grad(x, h); dx = -(r/n)(h·f) y - layer_norm_grad(x, r((h·y)/n a + s h))
//           for upstream h, output f, y = layer_norm(x), a = dy - mean(dy), s = mean(dy y) (row sums).
Tensor layer_norm_grad(const Tensor& x, const Tensor& dy, double epsilon = 1e-3);

// GELU: x Φ(x) (approximate = false, Φ the standard normal CDF, via erf), or
// 0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³))) (approximate = true, composed from ops).
// Shapes:   any -> same shape.
// Errors:   std::invalid_argument for a non-float dtype.
// Gradient: exact: gelu_grad(g, x) = g (Φ(x) + x φ(x)); approximate: through its ops.
// Ref:      keras.activations.gelu (default approximate=False), tf.nn.gelu
Tensor gelu(const Tensor& x, bool approximate = false);

// dy (Φ(x) + x φ(x)), the exact GELU's gradient.
// Shapes:   dy, x of the same shape -> same shape.
// Errors:   std::invalid_argument for different shapes or dtypes, a non-float dtype.
// Gradient: d dy = gelu_grad(h, x); dx = h dy φ(x) (2 - x²).
Tensor gelu_grad(const Tensor& dy, const Tensor& x);

}  // namespace tapeflow
