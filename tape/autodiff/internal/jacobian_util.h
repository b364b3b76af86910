// Raw-memory helpers of the jacobian code: one-hot cotangents, row copies, axis swaps.
// Facts:    nothing here is an op: results are plain tensors no tape records.
#pragma once

#include <cstdint>

#include "tape/core/tensor.h"

namespace tapeflow::internal {

// [count, shape...] zeros with a 1 at flat index first + k of row k.
Tensor one_hot_rows(const Shape& shape, DType dtype, std::int64_t first, std::int64_t count);
// [count, b, y...] zeros with a 1 at [k, i, first + k] (flat y index) for every example i.
Tensor batch_one_hot_rows(const Shape& target_shape, DType dtype, std::int64_t first, std::int64_t count);
// Copies src's elements (converted to dst's dtype) into dst starting at element `offset`.
void copy_into(const Tensor& dst, std::int64_t offset, const Tensor& src);
// src viewed as [k, b, rest] -> dst [b, total_k, rest] rows [first, first + k) of axis 1.
void swap_leading_into(const Tensor& dst, std::int64_t total_k, std::int64_t first, const Tensor& src);

}  // namespace tapeflow::internal
