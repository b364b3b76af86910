// Batched dense matrix products and linear solves (Eigen GEMM / LU, split into oneTBB tasks).
// Shapes:   matmul: for each b < batch, C_b [m, n] = op(A_b) @ op(B_b) with op(A_b) [m, k] and
//           op(B_b) [k, n]; op = transpose when the flag is set (A_b is then stored [k, m]).
//           A_b = a + b * a_batch_stride (stride 0 broadcasts one matrix), same for B;
//           C is contiguous [batch, m, n]. All row-major.
//           solve: a [n, n], b [n, nrhs] -> x [n, nrhs].
// DTypes:   float, double.
// Facts:    Products with m*n*k < kMatmulSerialWork run single-threaded with no task overhead;
//           larger ones split the larger output dimension (or the batch) into one task per thread.
//           Eigen's cache sizes are set from /sys on the first call (configure_eigen_cache).
//           Results repeat bit for bit at a fixed thread count; the split (and so the last bits
//           of edge rows) may change with the thread count.
// Errors:   solve: std::invalid_argument("solve: matrix is singular ...") for a singular or
//           non-finite system.
// Ref:      tf.linalg.matmul, tf.linalg.solve
#pragma once

#include <cstdint>

namespace tapeflow::kernels {

inline constexpr std::int64_t kMatmulSerialWork = 32 * 1024;

template <class T>
void matmul(const T* a, const T* b, T* c, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
            bool transpose_a, bool transpose_b, std::int64_t a_batch_stride, std::int64_t b_batch_stride);

// Sets Eigen's L1/L2/L3 cache sizes from /sys/devices/system/cpu/cpu0/cache (the VM reports a bogus
// L3 through cpuid). Thread-safe; runs once, later calls do nothing.
void configure_eigen_cache();

// Solves A X = B by partial-pivot LU.
template <class T>
void solve(const T* a, const T* b, T* x, std::int64_t n, std::int64_t nrhs);

}  // namespace tapeflow::kernels
