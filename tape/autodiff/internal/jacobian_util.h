// Helpers of the jacobian/hessian code: one-hot cotangents, row copies, axis swaps (raw memory:
// results are plain tensors no tape records), the row loop, and what the recorded paths (an outer
// tape or a trace active) use instead. When is_recording() (recorder.h), jacobian,
// batch_jacobian and hessian build their results with ops, on this thread, in one batched pass
// (or a sequential loop), so that the recorder sees how the result depends on its tensors (TF:
// these results are differentiable and traceable).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow::internal {

class TapeState;

// Rows per batched backward pass (the vectorized paths run rows in chunks, the chunks in parallel
// on kernels::num_threads() threads): the widest tensor on the tape times the chunk stays within
// budget_elements, and when the work is large (widest x rows >= 2^18 elements) there are at least
// two chunks per thread. Smaller chunks
// keep the batched intermediates in cache and bound memory; each chunk costs one pass of op
// dispatch. Always in [1, rows].
std::int64_t auto_chunk(const TapeState& tape, std::int64_t rows, std::int64_t budget_elements);
// Runs chunk(first, count) for consecutive chunks of [0, rows), in parallel (oneTBB); chunks must
// write disjoint results. Exceptions propagate to the caller.
void run_chunks(std::int64_t rows, std::int64_t chunk, const std::function<void(std::int64_t, std::int64_t)>& fn);

// Runs row(i) for every i in [0, n): in order on this thread when parallel_iterations == 1, else on
// at most parallel_iterations oneTBB threads (0 = all) in a task arena. Recording is paused on
// every thread, so rows only read the tape. Exceptions propagate to the caller.
void run_rows(std::int64_t n, int parallel_iterations, const std::function<void(std::int64_t)>& row);
// The rows stacked by ops along `axis`, missing (undefined) rows as zeros of row_shape; undefined
// if no row is defined. How the recorded paths assemble loop results.
Tensor stack_rows(std::vector<Tensor> rows, const Shape& row_shape, DType dtype, int axis);
// The first op marked loop_only (OpDef::loop_only), in backward order, on a path from a source to
// a target; empty if none. The vectorized paths take the loop when there is one.
std::string first_loop_only_op(const TapeState& tape, std::span<const Tensor> targets,
                               std::span<const std::int64_t> source_ids);
// Logs at warning level, once per op name and process, that `what` takes the loop of backward
// passes because of `op` (loop_only, or no batching rule: BatchingUnsupported).
void log_loop_fallback(const char* what, const std::string& op);

// [count, shape...] zeros with a 1 at flat index first + k of row k.
Tensor one_hot_rows(const Shape& shape, DType dtype, std::int64_t first, std::int64_t count);
// [count, b, y...] zeros with a 1 at [k, i, first + k] (flat y index) for every example i.
Tensor batch_one_hot_rows(const Shape& target_shape, DType dtype, std::int64_t first, std::int64_t count);
// Copies src's elements (converted to dst's dtype) into dst starting at element `offset`.
void copy_into(const Tensor& dst, std::int64_t offset, const Tensor& src);
// src viewed as [k, b, rest] -> dst [b, total_k, rest] rows [first, first + k) of axis 1.
void swap_leading_into(const Tensor& dst, std::int64_t total_k, std::int64_t first, const Tensor& src);

// [count, shape...] zeros with a 1 at flat index r of row (offset + r - first) for the rows of
// [first, first + count) that fall in [offset, offset + shape.num_elements()): the block of an
// n x n identity's rows that belongs to one variable (Hessian seeds).
Tensor block_one_hot_rows(const Shape& shape, DType dtype, std::int64_t offset, std::int64_t first, std::int64_t count);
// dst [rows, cols] row-major: dst[r, col0 + c] = src[r - row0, c] for src viewed as [nr, nc].
void copy_block(const Tensor& dst, std::int64_t row0, std::int64_t col0, const Tensor& src, std::int64_t nr,
                std::int64_t nc);

}  // namespace tapeflow::internal
