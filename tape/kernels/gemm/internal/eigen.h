// The Eigen back end of kernels::matmul (gemm/eigen.cc): the portable product, run at the
// baseline level and for the shapes Eigen multiplies faster (matmul.cc), and the A/B baseline of
// the benchmarks.
// Facts:    matmul_eigen is matmul on Eigen's products (GEMM with per-thread packing buffers; lazy
//           product or GEMV for thin blocks), with matmul's signature and contract. The split:
//           kFixed cuts the larger output dimension into parts fixed by the shape alone (parts of
//           >= kEigenPartWork multiply-adds), so results do not depend on the thread count;
//           kPerThread (the path before the packed GEMM, kept for A/B benchmarks) cuts it into
//           one block per thread, and the last bits then change with the thread count.
//           RowMat, ConstMap and Map are row-major Eigen views of raw buffers.
#pragma once

#include <Eigen/Core>

#include <cstdint>

namespace tapeflow::kernels::internal {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMat<T>>;
template <class T>
using Map = Eigen::Map<RowMat<T>>;

inline constexpr std::int64_t kEigenPartWork = 256 * 1024;
enum class EigenSplit { kFixed, kPerThread };

template <class T>
void matmul_eigen(const T* a, const T* b, T* c, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                  bool transpose_a, bool transpose_b, std::int64_t a_batch_stride, std::int64_t b_batch_stride,
                  EigenSplit split);

}  // namespace tapeflow::kernels::internal
