// Batched dense matrix products (own AVX2/FMA GEMM, Eigen for thin ones) and linear solves (Eigen LU).
// Shapes:   matmul: for each b < batch, C_b [m, n] = op(A_b) @ op(B_b) with op(A_b) [m, k] and
//           op(B_b) [k, n]; op = transpose when the flag is set (A_b is then stored [k, m]).
//           A_b = a + b * a_batch_stride (stride 0 broadcasts one matrix), same for B;
//           C is contiguous [batch, m, n] and overwritten (k = 0 gives zeros). All row-major.
//           solve: a [n, n], b [n, nrhs] -> x [n, nrhs].
// DTypes:   float, double.
// Facts:    With AVX2 + FMA (gemm/internal/packed.h) products run on a packed GEMM with 6 x 16
//           (float) / 6 x 8 (double) register tiles, 6 x 32 / 6 x 16 with AVX-512 (same bits); thin
//           ones (m < 6 or n < 6) on Eigen's GEMV / lazy products, which measure faster there.
//           Without AVX2 + FMA everything runs on Eigen's GEMM (gemm/internal/eigen.h). Tiny products (m*n*k <= 2048, e.g. the thousands of
//           7 x 5 x 8 products of a small batched Hessian) run as plain loops on any target:
//           setup would cost more than the arithmetic.
//           Parallel over products and over row or column blocks of C (oneTBB, num_threads()),
//           tasks of >= kMatmulSerialWork multiply-adds; smaller calls run on the calling thread.
//           Deterministic: each element of C sums its k products in one fixed order (Eigen's
//           products on blocks fixed by the shape alone), so results are bitwise identical for any
//           thread count. Only the outputs are partitioned, except for a single packed product whose
//           K dwarfs its output (k >= 2048, k >= 16 max(m, n) and m n <= 2^18: a weight gradient):
//           its K is cut into 8 pieces placed by k alone, each summed from zero, then added in order.
//           Eigen's cache sizes are set from /sys on the first Eigen product (configure_eigen_cache).
// Errors:   solve: std::invalid_argument("solve: matrix is singular ...") for a singular or
//           non-finite system.
// Ref:      tf.linalg.matmul, tf.linalg.solve
#pragma once

#include <cstdint>
#include <memory>

namespace tapeflow::kernels {
namespace internal {
template <class T>
class PackedB;  // gemm/internal/packed.h
}  // namespace internal

// Multiply-adds below which a product runs on the calling thread, and the least work per task.
inline constexpr std::int64_t kMatmulSerialWork = 128 * 1024;

// C_b = op(A_b) @ op(B_b) for each of `batch` products (see above for shapes, strides and threads).
template <class T>
void matmul(const T* a, const T* b, T* c, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
            bool transpose_a, bool transpose_b, std::int64_t a_batch_stride, std::int64_t b_batch_stride);

// op(B) [k, n] prepared once for many products with it: a convolution multiplies its filter with
// every patch tile. With the packed GEMM, B is packed here once (k x n values, rounded up to 16
// float / 8 double columns) instead of in every product; the products then run on the calling
// thread, and callers parallelise over their tiles. b must outlive this object.
// Results are bit-identical to matmul(a, b, c, 1, m, k, n, transpose_a, transpose_b, 0, 0).
template <class T>
class MatmulRhs {
 public:
  // Prepares op(B) [k, n] (b stored [n, k] if transpose_b), packing it for the packed GEMM.
  MatmulRhs(const T* b, std::int64_t k, std::int64_t n, bool transpose_b);
  ~MatmulRhs();
  MatmulRhs(const MatmulRhs&) = delete;
  MatmulRhs& operator=(const MatmulRhs&) = delete;
  // c [m, n] = op(A) @ op(B), op(A) [m, k]: a is [m, k], or [k, m] when transpose_a.
  void multiply(const T* a, std::int64_t m, T* c, bool transpose_a = false) const;

 private:
  const T* b_;
  std::int64_t k_, n_;
  bool tb_;
  std::unique_ptr<internal::PackedB<T>> packed_;  // null: every product goes through matmul
};

// Sets Eigen's L1/L2/L3 cache sizes from /sys/devices/system/cpu/cpu0/cache (the VM reports a bogus
// L3 through cpuid). Thread-safe; runs once, later calls do nothing.
void configure_eigen_cache();

// Solves A X = B by partial-pivot LU.
template <class T>
void solve(const T* a, const T* b, T* x, std::int64_t n, std::int64_t nrhs);

}  // namespace tapeflow::kernels
