// Naive reference helpers for the kernel tests (float64, index arithmetic only).
#pragma once

#include <cstdint>
#include <vector>

#include "tape/core/random.h"
#include "tape/core/shape.h"

namespace tapeflow::kernels::testref {

// Multi-index of linear index i in shape s.
inline std::vector<std::int64_t> unravel(std::int64_t i, const Shape& s) {
  std::vector<std::int64_t> idx(s.rank());
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[d] = s[d] == 0 ? 0 : i % s[d];
    i = s[d] == 0 ? 0 : i / s[d];
  }
  return idx;
}

// Linear index into `in` of output multi-index `out_idx` under NumPy broadcasting.
inline std::int64_t broadcast_index(const std::vector<std::int64_t>& out_idx, const Shape& in) {
  const int off = static_cast<int>(out_idx.size()) - in.rank();
  std::int64_t lin = 0;
  for (int d = 0; d < in.rank(); ++d) lin = lin * in[d] + (in[d] == 1 ? 0 : out_idx[d + off]);
  return lin;
}

template <class T>
std::vector<T> random_vector(std::int64_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator g(seed);
  std::vector<double> d(static_cast<std::size_t>(n));
  g.fill_uniform(d.data(), n, lo, hi);
  return std::vector<T>(d.begin(), d.end());
}

}  // namespace tapeflow::kernels::testref
