#include "tape/autodiff/internal/jacobian_util.h"

#include <spdlog/spdlog.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>

#include "tape/autodiff/internal/tape_state.h"
#include "tape/kernels/parallel.h"
#include "tape/ops/array_ops.h"
#include "tape/runtime/logging.h"
#include "tape/runtime/recorder.h"

namespace tapeflow::internal {

void run_rows(std::int64_t n, int parallel_iterations, const std::function<void(std::int64_t)>& row) {
  if (parallel_iterations == 1 || n <= 1) {
    RecordingPause pause;
    for (std::int64_t i = 0; i < n; ++i) row(i);
    return;
  }
  const int all = tbb::this_task_arena::max_concurrency();
  tbb::task_arena arena(parallel_iterations > 0 ? std::min(parallel_iterations, all) : all);
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, 1), [&](const tbb::blocked_range<std::int64_t>& r) {
      RecordingPause pause;
      for (std::int64_t i = r.begin(); i != r.end(); ++i) row(i);
    });
  });
}

// Total batched elements (widest gradient x rows) from which rows are split across threads.
constexpr std::int64_t kMinParallelElements = 1 << 18;

std::int64_t auto_chunk(const TapeState& tape, std::int64_t rows, std::int64_t budget_elements) {
  std::int64_t widest = 1;
  for (std::size_t i = 0; i < tape.num_records(); ++i) {
    const OpRecord& r = tape.records()[i];
    for (const Shape& sh : r.input_shapes) widest = std::max(widest, sh.num_elements());
    for (const Shape& sh : r.output_shapes) widest = std::max(widest, sh.num_elements());
  }
  std::int64_t chunk = budget_elements / widest;
  // Splitting small work across threads costs more in task overhead than it gains (W2 small:
  // 40 rows of 56-element gradients ran 2x slower in 4 parallel chunks than in one).
  if (widest * rows >= kMinParallelElements)
    chunk = std::min(chunk, (rows + 2 * kernels::num_threads() - 1) / (2 * kernels::num_threads()));
  return std::clamp<std::int64_t>(chunk, 1, std::max<std::int64_t>(rows, 1));
}

void run_chunks(std::int64_t rows, std::int64_t chunk, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  kernels::parallel_for((rows + chunk - 1) / chunk, 1, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) fn(c * chunk, std::min(chunk, rows - c * chunk));
  });
}

Tensor stack_rows(std::vector<Tensor> rows, const Shape& row_shape, DType dtype, int axis) {
  if (std::none_of(rows.begin(), rows.end(), [](const Tensor& t) { return t.defined(); })) return Tensor();
  for (Tensor& r : rows)
    if (!r.defined()) r = zeros(row_shape, dtype);
  return stack(rows, axis);
}

void log_loop_fallback(const char* what, const std::string& op) {
  static std::mutex mutex;
  static std::set<std::string> logged;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!logged.insert(op).second) return;
  }
  logger()->warn("{}: op {} cannot batch (no batching rule, or marked loop_only); vectorized jacobians and "
                 "hessians through it fall back to a loop of backward passes (logged once per op)", what, op);
}

std::string first_loop_only_op(const TapeState& tape, std::span<const Tensor> targets,
                               std::span<const std::int64_t> source_ids) {
  const std::size_t n = tape.num_records();
  const auto& ops = tape.records();
  std::vector<std::int64_t> sources(source_ids.begin(), source_ids.end());
  std::sort(sources.begin(), sources.end());
  auto is_source = [&](std::int64_t id) { return std::binary_search(sources.begin(), sources.end(), id); };
  // Forward: records that depend on a source (or produce one).
  std::vector<char> relevant(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const OpRecord& r = ops[i];
    for (std::int64_t id : r.output_ids) relevant[i] = relevant[i] || is_source(id);
    for (std::size_t j = 0; j < r.input_producers.size() && !relevant[i]; ++j) {
      const std::int64_t p = r.input_producers[j];
      relevant[i] = p >= 0 ? relevant[static_cast<std::size_t>(TapeState::slot_op(p))] != 0
                           : p == TapeState::kWatched && is_source(r.input_ids[j]);
    }
  }
  // Backward from the targets.
  std::vector<char> needed(n, 0);
  for (const Tensor& t : targets) {
    const std::int64_t p = tape.producer(t.id());
    if (p >= 0 && static_cast<std::size_t>(TapeState::slot_op(p)) < n) needed[static_cast<std::size_t>(TapeState::slot_op(p))] = 1;
  }
  for (std::size_t i = n; i-- > 0;) {
    if (!needed[i] || !relevant[i]) continue;
    const OpRecord& r = ops[i];
    if (!r.custom_gradient && r.op->loop_only) return r.op->name;
    for (std::int64_t p : r.input_producers)
      if (p >= 0) needed[static_cast<std::size_t>(TapeState::slot_op(p))] = 1;
  }
  return {};
}

namespace {
// [count, shape...] zeros; set(p, n) then writes the ones (p: the data, n: elements per row).
template <class Set>
Tensor rows_of_zeros(const Shape& shape, DType dtype, std::int64_t count, Set set) {
  Shape s{count};
  for (std::int64_t d : shape) s.push_back(d);
  Tensor t = Tensor::empty(s, dtype);
  const std::int64_t n = shape.num_elements();
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.mutable_data<T>();
    std::fill(p, p + count * n, T(0));
    set(p, n);
  });
  return t;
}
}  // namespace

Tensor one_hot_rows(const Shape& shape, DType dtype, std::int64_t first, std::int64_t count) {
  return block_one_hot_rows(shape, dtype, 0, first, count);
}

Tensor batch_one_hot_rows(const Shape& target_shape, DType dtype, std::int64_t first, std::int64_t count) {
  const std::int64_t b = target_shape[0];
  return rows_of_zeros(target_shape, dtype, count, [&](auto* p, std::int64_t n) {
    const std::int64_t ny = n / b;
    for (std::int64_t k = 0; k < count; ++k)
      for (std::int64_t i = 0; i < b; ++i) p[(k * b + i) * ny + first + k] = 1;
  });
}

Tensor block_one_hot_rows(const Shape& shape, DType dtype, std::int64_t offset, std::int64_t first,
                          std::int64_t count) {
  return rows_of_zeros(shape, dtype, count, [&](auto* p, std::int64_t n) {
    for (std::int64_t k = 0; k < count; ++k) {
      const std::int64_t r = first + k - offset;
      if (r >= 0 && r < n) p[k * n + r] = 1;
    }
  });
}

void copy_into(const Tensor& dst, std::int64_t offset, const Tensor& src) {
  Tensor s = src.dtype() == dst.dtype() ? src : convert(src, dst.dtype());
  if (offset + s.num_elements() > dst.num_elements())
    throw std::logic_error("jacobian: row copy out of range");
  const std::size_t size = dtype_size(dst.dtype());
  if (s.nbytes())
    std::memcpy(static_cast<char*>(dst.mutable_raw_data()) + static_cast<std::size_t>(offset) * size, s.raw_data(),
                s.nbytes());
}

void swap_leading_into(const Tensor& dst, std::int64_t total_k, std::int64_t first, const Tensor& src) {
  Tensor s = src.dtype() == dst.dtype() ? src : convert(src, dst.dtype());
  const std::int64_t k = s.shape()[0], b = s.rank() > 1 ? s.shape()[1] : 1;
  const std::int64_t rest = (k > 0 && b > 0) ? s.num_elements() / (k * b) : 0;
  const std::size_t size = dtype_size(dst.dtype());
  const char* in = static_cast<const char*>(s.raw_data());
  char* out = static_cast<char*>(dst.mutable_raw_data());
  for (std::int64_t j = 0; j < k; ++j)
    for (std::int64_t i = 0; i < b; ++i)
      std::memcpy(out + static_cast<std::size_t>((i * total_k + first + j) * rest) * size,
                  in + static_cast<std::size_t>((j * b + i) * rest) * size, static_cast<std::size_t>(rest) * size);
}


void copy_block(const Tensor& dst, std::int64_t row0, std::int64_t col0, const Tensor& src, std::int64_t nr,
                std::int64_t nc) {
  Tensor s = src.dtype() == dst.dtype() ? src : convert(src, dst.dtype());
  const std::int64_t cols = dst.shape()[dst.rank() - 1];
  const std::size_t size = dtype_size(dst.dtype());
  const char* in = static_cast<const char*>(s.raw_data());
  char* out = static_cast<char*>(dst.mutable_raw_data());
  for (std::int64_t r = 0; r < nr; ++r)
    std::memcpy(out + static_cast<std::size_t>((row0 + r) * cols + col0) * size,
                in + static_cast<std::size_t>(r * nc) * size, static_cast<std::size_t>(nc) * size);
}

}  // namespace tapeflow::internal
