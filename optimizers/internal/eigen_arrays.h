// Internal: Eigen array views over raw variable/slot memory, for vectorized update kernels.
#pragma once

#include <Eigen/Core>

namespace tapeflow::optimizers::internal {

template <class T>
using Arr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

}  // namespace tapeflow::optimizers::internal
