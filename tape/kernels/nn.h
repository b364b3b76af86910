// Neural-network kernels: softmax, log_softmax and the fused sparse softmax cross-entropy over the
// last axis; element-wise activations and their single-pass gradient kernels.
// Shapes:   x [rows, cols]; softmax over cols. sparse_softmax_xent: logits [rows, cols], labels
//           [rows] -> loss [rows], backprop [rows, cols] (backprop may be null).
// DTypes:   float, double; labels int32, int64.
// Facts:    Numerically stable (the row max is subtracted before exp). softmax<float>: the row max
//           and the row sum each in 16 independent float partials (lane k takes j ≡ k mod 16,
//           combined in a fixed pairwise tree, then the tail in order) and one exp of ~1 ulp
//           (Cody-Waite reduction, Cephes' polynomial, no multiply-add: ukernels/softmax_loops.cc)
//           on every element: the bits depend on neither the thread count, the row's alignment
//           nor the instruction-set level (softmax and softmax_grad run per level, every level
//           the baseline's bits); until 2026-12 the exp was Eigen's 4-lane SSE packet exp.
//           loss[r] = logsumexp(x_r) - x_r[label_r]; backprop = softmax(x) - onehot(label).
// Errors:   sparse_softmax_xent: std::invalid_argument naming the label and cols if a label is
//           outside [0, cols).
// Ref:      tf.nn.softmax, tf.nn.log_softmax, tf.nn.sparse_softmax_cross_entropy_with_logits
#pragma once

#include <cstdint>

namespace tapeflow::kernels {

// y[r] = softmax(x[r]) over each of `rows` rows of `cols` values (stable: the row max subtracted).
template <class T>
void softmax(const T* x, std::int64_t rows, std::int64_t cols, T* y);
// y[r] = x[r] - logsumexp(x[r]) over each row (stable).
template <class T>
void log_softmax(const T* x, std::int64_t rows, std::int64_t cols, T* y);
// dx[r] = y[r] ⊙ (g[r] - Σ_j g[r, j] y[r, j]) over each row: softmax's gradient from its output y and
// the incoming gradient g in one pass (the composed form reads the rows four times). The row sum is
// taken with 8 partial sums (fixed order, so results do not depend on the thread count).
template <class T>
void softmax_grad(const T* y, const T* g, std::int64_t rows, std::int64_t cols, T* dx);
// loss[r] = logsumexp(logits[r]) - logits[r, labels[r]]; backprop (if not null) = softmax - onehot.
// Errors: std::invalid_argument for a label outside [0, cols).
template <class T, class I>
void sparse_softmax_xent(const T* logits, const I* labels, std::int64_t rows, std::int64_t cols, T* loss,
                         T* backprop);

// Element-wise activations and gradients over n contiguous elements (parallel above
// kElementwiseGrain; every element independent, so results do not depend on the thread count).
// Outputs must not alias inputs.
// DTypes:   float, double.
// Facts:    tanh<float> is Eigen's vectorized rational approximation (the one TensorFlow's CPU
//           Tanh kernel evaluates). Error against double tanh over every float in [-20, 20]:
//           < 5 ulp (max 4.90) when compiled with FMA (the opt-in TAPEFLOW_NATIVE on AVX2+FMA),
//           < 7 ulp (max 6.88) without (the default portable build: each Horner step of Eigen's
//           polynomials then rounds twice). Exactly ±1 for |x| >= 8, x itself for |x| < 4e-4, NaN stays NaN; about
//           9x faster than libm's tanhf. tanh<double> is std::tanh.
// Ref:      tf.math.tanh, tf.raw_ops.TanhGrad, ReluGrad, LeakyRelu, LeakyReluGrad
template <class T>
void tanh(const T* x, T* y, std::int64_t n);
// y = 1 / (1 + e⁻ˣ). sigmoid<float> is Eigen's vectorized logistic (the one TensorFlow's CPU
// Sigmoid kernel evaluates: a clamped rational approximation, about 1e-7 relative); sigmoid<double>
// is the scalar overflow-safe form (eˣ / (1 + eˣ) for x < 0). Ref: tf.math.sigmoid
template <class T>
void sigmoid(const T* x, T* y, std::int64_t n);
// dx = dy·(1 - y²) from the tanh output y.
template <class T>
void tanh_grad(const T* y, const T* dy, T* dx, std::int64_t n);
// y = x where x > 0, else expm1(x) (ELU with alpha 1; NaN stays NaN, -inf gives -1).
// elu<float> is Eigen's vectorized expm1 (exp with a log-based correction, not TF's exp(x) - 1,
// which cancels near 0): against double expm1 over every negative float down to -30, max 2.43 ulp
// with FMA and 2.50 without; about 4.7x faster than libm's expm1f (2.4 vs 11 ns per element).
// elu<double> is std::expm1. Ref: tf.nn.elu
template <class T>
void elu(const T* x, T* y, std::int64_t n);
// dx = dy·(y + 1) where y < 0, else dy (y: the elu output; TF's EluGrad).
template <class T>
void elu_grad(const T* dy, const T* y, T* dx, std::int64_t n);
// dx = dy where y > 0, else 0 (y: the relu input or output).
template <class T>
void relu_grad(const T* dy, const T* y, T* dx, std::int64_t n);
// y = x where x > 0, else alpha·x.
template <class T>
void leaky_relu(const T* x, T alpha, T* y, std::int64_t n);
// dx = dy where x > 0, else alpha·dy.
template <class T>
void leaky_relu_grad(const T* dy, const T* x, T alpha, T* dx, std::int64_t n);

// Layer normalization over the last axis and GELU, forward and gradient.
// Shapes:   x, dy, y, dx [rows, cols] (row-major); normalization over cols.
// DTypes:   float, double.
// Facts:    layer_norm: y = (x - mean) · rsqrt(var + epsilon), var the biased (population)
//           variance, computed in two passes (mean first, then the centred squares: no
//           cancellation). double: every row sum one chain in double (as before). float: the
//           moments and layer_norm_grad's two row sums in 16 float partials each (fixed order,
//           as softmax<float>; until 2026-12 they were single double chains, which do not
//           vectorize): the result bits changed, within ~1e-6 relative of the double reference. layer_norm_grad: dx = r · (dy - mean(dy) - y · mean(dy · y)), the
//           Jacobian of layer_norm (symmetric) applied to dy, with r and y recomputed from x.
//           gelu: x · Φ(x) with Φ(x) = (1 + erf(x / √2)) / 2; gelu_grad: dx = dy · (Φ(x) + x φ(x)).
//           Rows / elements are independent, so results do not depend on the thread count.
//           The layer_norm row loops are compiled per instruction-set level
//           (ukernels/layer_norm_loops.cc, no multiply-add contraction): every level gives the
//           baseline's bits. Outputs must not alias inputs.
// Ref:      keras.ops.layer_normalization, keras.activations.gelu (approximate=False)
template <class T>
void layer_norm(const T* x, std::int64_t rows, std::int64_t cols, double epsilon, T* y);
// dx = r · (dy - mean(dy) - y · mean(dy · y)) per row, r and y recomputed from x (see above).
template <class T>
void layer_norm_grad(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, double epsilon, T* dx);
// y = (x - mean) · rsqrt(var + epsilon) · gamma + beta per row (gamma, beta [cols]): layer_norm and
// the affine in one pass over the row (the same float operations in the same order as layer_norm,
// then · gamma, then + beta, so without FMA contraction the bits equal the three-op form).
template <class T>
void layer_norm_affine(const T* x, const T* gamma, const T* beta, std::int64_t rows, std::int64_t cols,
                       double epsilon, T* y);
// layer_norm_affine's gradient from x, gamma and dy, the row moments recomputed from x (each row is
// read from memory once and stays in L1): dx = layer_norm_grad(x, dy · gamma),
// dgamma = Σ_rows dy · y, dbeta = Σ_rows dy (dgamma, dbeta [cols]; y = layer_norm(x)). The column
// sums are taken per fixed chunk of rows (kReduceChunk / cols), chunk partials added in order in
// double: the bits do not depend on the thread count.
template <class T>
void layer_norm_affine_grad(const T* x, const T* gamma, const T* dy, std::int64_t rows, std::int64_t cols,
                            double epsilon, T* dx, T* dgamma, T* dbeta);
// y = x · Φ(x), the exact (erf) GELU.
template <class T>
void gelu(const T* x, T* y, std::int64_t n);
// dx = dy · (Φ(x) + x φ(x)).
template <class T>
void gelu_grad(const T* dy, const T* x, T* dx, std::int64_t n);

}  // namespace tapeflow::kernels
