// Transformer ops: layer normalization over the last axis (plain, and with gamma and beta) and
// GELU (exact and tanh approximation).
//
// DTypes:   float32, float64.
// Gradient: written with tapeflow ops (LayerNormGrad, LayerNormAffineGrad and GeluGrad are ops
//           with their own gradients), so all of these differentiate to any order.
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

// (x - mean) / sqrt(var + epsilon) · gamma + beta over the last axis: layer_norm and its scale and
// offset in one op (what LayerNormalization runs for axis -1 with center and scale).
// Shapes:   x [..., n] (rank >= 1), gamma [n], beta [n] -> x's shape.
// DTypes:   float32, float64; gamma and beta must match x.
// Facts:    var the biased variance, the moments as layer_norm's. One fused kernel forward, one
//           backward (kernels::layer_norm_affine{,_grad}). Backward keeps x, gamma and beta (not y);
//           each row's mean and rstd are recomputed from x inside the backward kernel, where the
//           row is in L1 anyway (cheaper than keeping two more outputs alive on the tape).
// Errors:   std::invalid_argument for rank 0, gamma or beta not of shape [n], a dtype that differs
//           from x's, a non-float dtype, epsilon < 0 or non-finite (names the op and the values).
// Gradient: layer_norm_affine_grad(x, gamma, g): dx = layer_norm_grad(x, g gamma),
//           dgamma = Σ g y, dbeta = Σ g (Σ over all axes but the last, y = layer_norm(x)).
// Ref:      keras.layers.LayerNormalization (axis -1, center, scale), keras.ops.layer_normalization
Tensor layer_norm_affine(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon = 1e-3);

// The gradients layer_norm_affine_grad returns.
struct LayerNormAffineGrads {
  Tensor dx;      // [..., n]
  Tensor dgamma;  // [n]
  Tensor dbeta;   // [n]
};

// layer_norm_affine's gradient at (x, gamma) applied to dy, one fused op (LayerNormAffineGrad).
// Shapes:   x, dy [..., n] of the same shape, gamma [n] -> dx [..., n], dgamma [n], dbeta [n].
// Errors:   as layer_norm_affine; std::invalid_argument when x and dy differ in shape or dtype.
// Gradient: for upstream (hx, hg, hb) and J h = layer_norm_grad(x, h): d dy = gamma J hx + hg y + hb;
//           d gamma = Σ dy J hx; dx = LayerNormGrad's x-gradient at (x, gamma dy, hx) + J (dy hg).
LayerNormAffineGrads layer_norm_affine_grad(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                            double epsilon = 1e-3);

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
