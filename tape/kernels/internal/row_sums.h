// The row loops of nn.cc, layer_norm.cc and ukernels/layer_norm_loops.cc: for_row_blocks and
// for_rows run rows in parallel; the float row sums take kParts independent partial results (lane
// k takes the elements j ≡ k mod kParts), combined pairwise in a fixed tree, then the tail in index
// order.
// Facts:    one accumulator is one dependency chain (an add or max latency per element); kParts of
//           them vectorize. The order depends on neither the thread count, the ISA nor the row's
//           alignment, so a row's bits repeat wherever it is computed.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tape/kernels/parallel.h"

namespace tapeflow::kernels::internal {

inline constexpr int kParts = 16;

// part[0] after combining the kParts partials pairwise with op (a fixed tree).
template <class Op>
float combine_parts(float (&part)[kParts], Op op) {
  for (int w = kParts / 2; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k) part[k] = op(part[k], part[k + w]);
  return part[0];
}

// Σ f(j) over [0, cols) with kParts float partial sums.
template <class F>
float row_sum16(std::int64_t cols, F f) {
  float part[kParts] = {};
  std::int64_t j = 0;
  for (; j + kParts <= cols; j += kParts)
    for (int k = 0; k < kParts; ++k) part[k] += f(j + k);
  float s = combine_parts(part, [](float a, float b) { return a + b; });
  for (; j < cols; ++j) s += f(j);
  return s;
}

// Runs f(r0, r1) over blocks of rows [0, rows) in parallel, about kElementwiseGrain / 8 elements each.
template <class F>
void for_row_blocks(std::int64_t rows, std::int64_t cols, F&& f) {
  parallel_for(rows, std::max<std::int64_t>(1, kElementwiseGrain / 8 / std::max<std::int64_t>(1, cols)), f);
}

// Runs f(r) for every row r in [0, rows), in for_row_blocks' blocks.
template <class F>
void for_rows(std::int64_t rows, std::int64_t cols, F&& f) {
  for_row_blocks(rows, cols, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) f(r);
  });
}

}  // namespace tapeflow::kernels::internal
