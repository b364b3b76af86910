// Fused batch-normalization training kernels over a [n, c] view, normalizing each column (the
// kernels behind layers/batch_normalization.h's training step).
// Shapes:   x, y, g, dx [n, c]; gamma, beta, mean, var, inv, dgamma, dbeta [c].
// DTypes:   float, double.
// Facts:    Column sums accumulate in double; the columns are split across threads in blocks and
//           each column is computed alone, so results do not depend on the thread count. One
//           source (ukernels/batch_norm_loops.cc) compiled per instruction-set level (baseline,
//           AVX2, AVX-512; tape/core/cpu_isa.h); each call runs the copy for cpu_isa(). Bits: the
//           same at every level — every element takes the same IEEE operations in the same order,
//           with no multiply-add contraction (-ffp-contract=off), as the baseline (which has no
//           FMA) computed before these copies.
// Ref:      tf.nn.fused_batch_norm (tensorflow/core/kernels/fused_batch_norm_op.cc)
#pragma once

#include <cstdint>

namespace tapeflow::kernels {

// y = (x - mean) · inv · gamma + beta with mean, biased var and inv = 1/sqrt(var + eps) per column.
// Outputs mean, var, inv have c elements.
template <class T>
void batch_norm_forward(const T* x, std::int64_t n, std::int64_t c, const T* gamma, const T* beta, double eps, T* y,
                        T* mean, T* var, T* inv);

// Gradients of the forward above for upstream g: dx [n, c], dgamma [c], dbeta [c].
// dx = gamma·inv/n · (n·g - Σg - x̂·Σ(g·x̂)), dgamma = Σ(g·x̂), dbeta = Σg, x̂ = (x - mean)·inv.
template <class T>
void batch_norm_backward(const T* x, const T* g, std::int64_t n, std::int64_t c, const T* gamma, const T* mean,
                         const T* inv, T* dx, T* dgamma, T* dbeta);

}  // namespace tapeflow::kernels
