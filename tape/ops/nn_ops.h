// Neural-network ops: softmax, log-softmax, cross-entropy losses, Euclidean norm, clip_by_norm and
// Dropout's packed keep mask.
//
// DTypes:   float32, float64 (labels of the sparse cross-entropy: int32, int64).
// Gradient: every gradient is written with tapeflow ops, so all of these differentiate twice.
// Ref:      tf.nn, tf.norm, tf.clip_by_norm, tensorflow/python/ops/nn_grad.py
#pragma once

#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow {

// Returns x with Dropout's packed keep mask applied: x · (kept ? scale : 0) per element (the bits of
// x times a mask tensor of scale / 0 values, without that tensor: 1 bit per element).
// Shapes:   x any shape, n = x.num_elements(); keep_bits int32 [(n + 31) / 32], bit i % 32 of word
//           i / 32 for element i (row-major), as Generator::fill_keep_bits draws them.
// DTypes:   x float32, float64; keep_bits int32 (read as unsigned words).
// Errors:   std::invalid_argument naming apply_dropout_mask for another dtype or a keep_bits shape
//           other than [(n + 31) / 32].
// Gradient: dx = apply_dropout_mask(g, keep_bits, scale) (linear in x; none for keep_bits). Saves
//           its inputs (x, and the n / 8 bytes of bits).
// Ref:      keras.layers.Dropout (inputs · mask), tf.nn.dropout
Tensor apply_dropout_mask(const Tensor& x, const Tensor& keep_bits, double scale);

// exp(x) / sum(exp(x)) along `axis`, computed stably (the max is subtracted first).
// Shapes:   logits any rank >= 1 -> same shape.
// Errors:   std::invalid_argument for rank 0, an axis out of range or a non-float dtype.
// Gradient: dx = y * (g - sum(g * y, axis)).
// Ref:      tf.nn.softmax
Tensor softmax(const Tensor& logits, int axis = -1);

// Softmax's gradient from its output: y * (g - sum(g * y, axis, keepdims)) in one pass over the rows
// (softmax's own gradient uses it for the last axis; composed ops otherwise).
// Shapes:   y, g the same shape, rank >= 1 -> that shape; axis must be the last one (-1 or rank - 1).
// Errors:   std::invalid_argument naming softmax_grad and both shapes for different shapes or dtypes,
//           rank 0, another axis, or a non-float dtype.
// Gradient: d/dg = softmax_grad(y, u); d/dy = u * (g - sum(g y)) - g * sum(u y) (u: the incoming
//           gradient; sums along the axis, kept), written with ops.
// Ref:      tensorflow/python/ops/nn_grad.py (_SoftmaxGrad)
Tensor softmax_grad(const Tensor& y, const Tensor& g, int axis = -1);

// Keras 3's masked softmax: softmax of where(mask, logits, -1e9) along `axis`, then 0 where the mask
// is false (a row masked entirely gives zeros, not a uniform distribution). Composed from ops.
// Shapes:   logits any rank >= 1; mask bool (or numbers, true where > 0.5) broadcastable to logits.
// Errors:   as softmax; std::invalid_argument if the mask does not broadcast (names both shapes).
// Gradient: through where and softmax (zero at masked places).
// Ref:      keras/src/layers/activations/softmax.py (Softmax.call with a mask)
Tensor masked_softmax(const Tensor& logits, const Tensor& mask, int axis = -1);

// x - log(sum(exp(x))) along `axis`, computed stably.
// Shapes:   logits any rank >= 1 -> same shape.
// Errors:   as softmax.
// Gradient: dx = g - exp(y) * sum(g, axis).
// Ref:      tf.nn.log_softmax
Tensor log_softmax(const Tensor& logits, int axis = -1);

// Per-example loss logsumexp(logits) - logits[label] with a fused, stable kernel.
// Shapes:   labels [d0, ..., dn], logits [d0, ..., dn, classes] -> loss [d0, ..., dn] (usually
//           labels [batch], logits [batch, classes] -> [batch]).
// DTypes:   labels int32/int64; logits float32/float64.
// Errors:   std::invalid_argument: a label outside [0, classes) (message names the label and the
//           class count), shapes that do not match, non-integer labels, non-float logits.
// Gradient: logits: (softmax(logits) - onehot(labels)) * g[..., None], with softmax recomputed by the
//           Softmax op so the gradient differentiates again (unlike TF, second order works); labels: none.
// Ref:      tf.nn.sparse_softmax_cross_entropy_with_logits
Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);

// Per-element max(x, 0) - x * z + log(1 + exp(-|x|)) for logits x and labels z (composed from ops).
// Shapes:   labels and logits the same shape -> same shape.
// DTypes:   float32/float64; labels and logits must match.
// Errors:   std::invalid_argument if shapes or dtypes differ.
// Gradient: dx = sigmoid(x) - z (exact at x = 0, as TF's composition), dz = -x.
// Ref:      tf.nn.sigmoid_cross_entropy_with_logits
Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);

// Euclidean (ord 2) norm sqrt(sum(x²)) over all elements, or over `axes` (keepdims keeps them as 1).
// Shapes:   x any rank -> scalar, or x with `axes` removed (kept as 1 with keepdims). An empty `axes`
//           list means all axes.
// DTypes:   float32, float64.
// Errors:   std::invalid_argument for a bad or repeated axis or a non-float dtype.
// Gradient: dx = g * x / norm where norm > 0, and 0 where norm == 0 (a subgradient; TF's tf.norm
//           gives NaN there). The forward of the all-zero input is 0 (no NaN).
// Ref:      tf.norm (ord='euclidean'), tf.math.reduce_euclidean_norm
Tensor norm(const Tensor& x);
// The L2 norm over `axes` (all of them if empty), those axes kept as 1 with keepdims (see above).
Tensor norm(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);

// Rescales t so its L2 norm (over all elements, or `axes`) is at most clip_norm:
// t * clip_norm / max(l2norm(t), clip_norm). The zero tensor stays zero (no NaN, no NaN gradient).
// Shapes:   any -> same shape.
// DTypes:   float32, float64.
// Errors:   std::invalid_argument for clip_norm <= 0 or a bad axis.
// Gradient: through the composing ops (TF's own composition, including the safe sqrt at 0).
// Ref:      tf.clip_by_norm
Tensor clip_by_norm(const Tensor& t, double clip_norm);
// clip_by_norm with the L2 norm taken over `axes` (broadcast back over them). Ref: tf.clip_by_norm(t, clip_norm, axes)
Tensor clip_by_norm(const Tensor& t, double clip_norm, const std::vector<int>& axes);

}  // namespace tapeflow
