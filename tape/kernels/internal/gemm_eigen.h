// Row-major Eigen views of raw buffers, for the Eigen parts of matmul.cc and gemm.cc.
#pragma once

#include <Eigen/Core>

namespace tapeflow::kernels::internal {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMat<T>>;
template <class T>
using Map = Eigen::Map<RowMat<T>>;

}  // namespace tapeflow::kernels::internal
