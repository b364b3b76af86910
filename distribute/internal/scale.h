// The division of reduced sums by the number of ranks (averages), in Eigen packets (not public API).
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <cstring>

namespace tapeflow::distribute::internal {

// out[i] = in[i] / divisor for n elements of T (divisor >= 1; 1: a copy); out may be in. A true division
// (as TF's MEAN reduction), in Eigen packets: a scalar loop's divisions cost about as much as the
// allreduce itself (W1's 270k floats). Used for gradients and for Context::allreduce alike.
template <class T>
void scale_copy(const void* in, std::int64_t n, int divisor, void* out) {
  const T* src = static_cast<const T*>(in);
  T* dst = static_cast<T*>(out);
  if (divisor == 1) {
    if (dst != src) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  if ((divisor & (divisor - 1)) == 0) {
    // A power of two: x / 2^k and x * 2^-k are the same real number, so both round to the same
    // bits (subnormals, infinities and NaNs alike), and a multiplication costs a fraction of a
    // division.
    Eigen::Map<Array>(dst, n) = Eigen::Map<const Array>(src, n) * (T(1) / static_cast<T>(divisor));
    return;
  }
  Eigen::Map<Array>(dst, n) = Eigen::Map<const Array>(src, n) / static_cast<T>(divisor);
}

}  // namespace tapeflow::distribute::internal
