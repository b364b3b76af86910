// kernels::solve (tape/kernels/matmul.h) on Eigen's LU; matmul and MatmulRhs are gemm/dispatch.cc,
// configure_eigen_cache gemm/eigen.cc.
#define EIGEN_DONT_PARALLELIZE
#include "tape/kernels/matmul.h"

#include <Eigen/Core>
#include <Eigen/LU>

#include <stdexcept>
#include <string>

#include "tape/kernels/gemm/internal/eigen.h"

namespace tapeflow::kernels {

using internal::ConstMap;
using internal::Map;

template <class T>
void solve(const T* a, const T* b, T* x, std::int64_t n, std::int64_t nrhs) {
  if (n < 0 || nrhs < 0)
    throw std::invalid_argument("solve: negative size n=" + std::to_string(n) + ", nrhs=" + std::to_string(nrhs));
  if (n == 0 || nrhs == 0) return;
  ConstMap<T> A(a, n, n);
  ConstMap<T> B(b, n, nrhs);
  if (!A.allFinite() || !B.allFinite())
    throw std::invalid_argument("solve: matrix is singular or non-finite (input has inf/nan), n=" + std::to_string(n));
  Eigen::PartialPivLU<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>> lu(A);
  const auto& U = lu.matrixLU();
  for (std::int64_t i = 0; i < n; ++i)
    if (U(i, i) == T(0))
      throw std::invalid_argument("solve: matrix is singular (zero pivot at row " + std::to_string(i) +
                                  "), n=" + std::to_string(n));
  Map<T> X(x, n, nrhs);
  X = lu.solve(B);
  if (!X.allFinite())
    throw std::invalid_argument("solve: matrix is singular (solution is not finite), n=" + std::to_string(n));
}

template void solve<float>(const float*, const float*, float*, std::int64_t, std::int64_t);
template void solve<double>(const double*, const double*, double*, std::int64_t, std::int64_t);

}  // namespace tapeflow::kernels
