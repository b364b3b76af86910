// Internal: fused batch-normalization training kernels over a [n, c] view (normalising each column).
// Facts: column sums accumulate in double; columns are split across threads in blocks, so results
//        do not depend on the thread count.
#pragma once

#include <cstdint>

namespace tapeflow::layers::internal {

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

}  // namespace tapeflow::layers::internal
