// Strided iteration plans shared by the broadcasting and copying kernels (no TBB, no Eigen).
// Facts:    A plan walks a contiguous output of `dims` while N inputs advance by their own strides
//           (stride 0 = broadcast). Size-1 dims are dropped and mergeable neighbours coalesced, so
//           the innermost run is as long as possible.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "tape/core/shape.h"

namespace tapeflow::kernels::internal {

template <int N>
struct StridedPlan {
  int rank = 1;  // >= 1 after planning
  std::array<std::int64_t, Shape::kMaxRank> dims{};
  std::array<std::array<std::int64_t, Shape::kMaxRank>, N> strides{};
};

// Builds a plan from output dims and per-input strides (both of length `rank`).
template <int N>
StridedPlan<N> make_plan(int rank, const std::int64_t* dims, const std::array<const std::int64_t*, N>& strides) {
  StridedPlan<N> p;
  int r = 0;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] == 1) continue;
    if (r > 0) {
      bool merge = true;
      for (int k = 0; k < N; ++k)
        if (p.strides[k][r - 1] != strides[k][i] * dims[i]) merge = false;
      if (merge) {
        p.dims[r - 1] *= dims[i];
        for (int k = 0; k < N; ++k) p.strides[k][r - 1] = strides[k][i];
        continue;
      }
    }
    p.dims[r] = dims[i];
    for (int k = 0; k < N; ++k) p.strides[k][r] = strides[k][i];
    ++r;
  }
  if (r == 0) {
    p.dims[0] = 1;
    for (int k = 0; k < N; ++k) p.strides[k][0] = 0;
    r = 1;
  }
  p.rank = r;
  return p;
}

// Strides that broadcast `in` (right-aligned) to an output of rank `out_rank`; 0 where broadcast.
// Errors: std::invalid_argument naming `op` if a dim is neither equal nor 1.
inline std::array<std::int64_t, Shape::kMaxRank> broadcast_strides(const Shape& in, const Shape& out, const char* op) {
  std::array<std::int64_t, Shape::kMaxRank> s{};
  if (in.rank() > out.rank())
    throw std::invalid_argument(std::string(op) + ": cannot broadcast " + in.to_string() + " to " + out.to_string());
  auto cs = in.strides();
  int off = out.rank() - in.rank();
  for (int i = 0; i < out.rank(); ++i) {
    int j = i - off;
    if (j < 0) continue;
    if (in[j] == out[i]) s[i] = in[j] == 1 ? 0 : cs[j];
    else if (in[j] == 1) s[i] = 0;
    else throw std::invalid_argument(std::string(op) + ": cannot broadcast " + in.to_string() + " to " + out.to_string());
  }
  return s;
}

template <int N>
StridedPlan<N> make_broadcast_plan(const std::array<const Shape*, N>& ins, const Shape& out, const char* op) {
  std::array<std::array<std::int64_t, Shape::kMaxRank>, N> s;
  std::array<const std::int64_t*, N> ptrs;
  for (int k = 0; k < N; ++k) {
    s[k] = broadcast_strides(*ins[k], out, op);
    ptrs[k] = s[k].data();
  }
  return make_plan<N>(out.rank(), out.begin(), ptrs);
}

// Calls body(out_offset, in_offsets, len, inner_strides) for each innermost run of output
// elements in [begin, end), in order.
template <int N, class Body>
void for_each_run(const StridedPlan<N>& p, std::int64_t begin, std::int64_t end, Body&& body) {
  const int r = p.rank;
  std::array<std::int64_t, Shape::kMaxRank> idx{};
  std::int64_t rem = begin;
  for (int i = r - 1; i >= 0; --i) {
    idx[i] = rem % p.dims[i];
    rem /= p.dims[i];
  }
  std::array<std::int64_t, N> inner;
  for (int k = 0; k < N; ++k) inner[k] = p.strides[k][r - 1];
  std::array<std::int64_t, N> offs;
  for (int k = 0; k < N; ++k) {
    offs[k] = 0;
    for (int i = 0; i < r; ++i) offs[k] += idx[i] * p.strides[k][i];
  }
  const std::int64_t d = p.dims[r - 1];
  std::int64_t pos = begin;
  while (pos < end) {
    std::int64_t len = d - idx[r - 1];
    if (len > end - pos) len = end - pos;
    body(pos, offs, len, inner);
    pos += len;
    if (pos >= end) break;
    // Advance the odometer by len along the innermost dim, carrying outwards.
    for (int k = 0; k < N; ++k) offs[k] -= idx[r - 1] * inner[k];
    idx[r - 1] = 0;
    for (int i = r - 2; i >= 0; --i) {
      ++idx[i];
      for (int k = 0; k < N; ++k) offs[k] += p.strides[k][i];
      if (idx[i] < p.dims[i]) break;
      for (int k = 0; k < N; ++k) offs[k] -= idx[i] * p.strides[k][i];
      idx[i] = 0;
    }
  }
}

}  // namespace tapeflow::kernels::internal
