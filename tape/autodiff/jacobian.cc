// GradientTape::jacobian and batch_jacobian: the loop (sequential or oneTBB-parallel) and the
// vectorized path (one batched backward pass). See jacobian.h.
#include "tape/autodiff/jacobian.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <stdexcept>

#include "tape/autodiff/internal/independence_check.h"
#include "tape/autodiff/internal/jacobian_util.h"
#include "tape/autodiff/internal/tape_state.h"
#include "tape/ops/array_ops.h"
#include "tape/runtime/batching.h"
#include "tape/runtime/logging.h"
#include "tape/runtime/recorder.h"

namespace tapeflow {
namespace {

Shape concat_shapes(const Shape& a, const Shape& b) {
  Shape out = a;
  for (std::int64_t d : b) out.push_back(d);
  return out;
}

// Per-source output buffers filled by rows; a source stays unconnected if no row reached it.
struct RowResults {
  std::vector<Tensor> out;
  std::unique_ptr<std::atomic<bool>[]> connected;
  RowResults(std::span<const Shape> shapes, std::span<const DType> dtypes) : connected(new std::atomic<bool>[shapes.size()]) {
    for (std::size_t j = 0; j < shapes.size(); ++j) {
      out.push_back(Tensor::empty(shapes[j], dtypes[j]));
      connected[j] = false;
    }
  }
  std::vector<Tensor> finish() {
    for (std::size_t j = 0; j < out.size(); ++j)
      if (!connected[j]) out[j] = Tensor();
    return out;
  }
};

struct SourceInfo {
  std::vector<std::int64_t> ids;
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  std::vector<bool> floating;
};

SourceInfo source_info(const std::vector<Source>& sources, const char* what) {
  SourceInfo info;
  for (const Source& src : sources) {
    Tensor v = src.value();
    bool ok = is_floating(v.dtype());
    if (!ok)
      logger()->warn("The dtype of the source tensor must be floating (e.g. tf.float32) when calling "
                     "GradientTape.{}, got {}", what, dtype_name(v.dtype()));
    info.ids.push_back(src.id());
    info.shapes.push_back(v.shape());
    info.dtypes.push_back(v.dtype());
    info.floating.push_back(ok);
  }
  return info;
}

std::vector<Tensor> jacobian_loop(const internal::TapeState& s, const Tensor& target, const SourceInfo& src,
                                  int parallel_iterations) {
  std::vector<Shape> shapes;
  for (const Shape& sh : src.shapes) shapes.push_back(concat_shapes(target.shape(), sh));
  if (is_recording()) {  // rows in order on this thread, stacked by ops
    std::vector<std::vector<Tensor>> rows(src.ids.size());
    for (std::int64_t i = 0; i < target.num_elements(); ++i) {
      Tensor seed = internal::one_hot_rows(target.shape(), target.dtype(), i, 1).with_shape(target.shape());
      std::vector<Tensor> g = s.backward(std::span<const Tensor>(&target, 1), std::span<const Tensor>(&seed, 1), src.ids);
      for (std::size_t j = 0; j < g.size(); ++j) rows[j].push_back(g[j]);
    }
    std::vector<Tensor> out(src.ids.size());
    for (std::size_t j = 0; j < out.size(); ++j) {
      Tensor m = internal::stack_rows(rows[j], src.shapes[j], src.dtypes[j], 0);
      if (m.defined()) out[j] = reshape(m, shapes[j]);
    }
    return out;
  }
  RowResults rows(shapes, src.dtypes);
  internal::run_rows(target.num_elements(), parallel_iterations, [&](std::int64_t i) {
    Tensor seed = internal::one_hot_rows(target.shape(), target.dtype(), i, 1).with_shape(target.shape());
    std::vector<Tensor> g = s.backward(std::span<const Tensor>(&target, 1), std::span<const Tensor>(&seed, 1), src.ids);
    for (std::size_t j = 0; j < g.size(); ++j)
      if (g[j].defined()) {
        internal::copy_into(rows.out[j], i * src.shapes[j].num_elements(), g[j]);
        rows.connected[j] = true;
      }
  });
  return rows.finish();
}

// The vectorized path: batched backward passes (K one-hot cotangents each), or nullopt (logged) if
// an op on the way cannot batch.
std::optional<std::vector<Tensor>> jacobian_vectorized(const internal::TapeState& s, const Tensor& target,
                                                       const SourceInfo& src, int chunk) {
  std::string op = internal::first_loop_only_op(s, std::span<const Tensor>(&target, 1), src.ids);
  if (!op.empty()) {
    internal::log_loop_fallback("GradientTape::jacobian", op);
    return std::nullopt;
  }
  const std::int64_t n = target.num_elements();
  std::vector<Tensor> out(src.ids.size());
  try {
    if (chunk <= 0 || chunk >= n || is_recording()) {  // one pass; reshape keeps it recorded
      Tensor seeds = internal::one_hot_rows(target.shape(), target.dtype(), 0, n);
      std::vector<Tensor> g = s.backward(std::span<const Tensor>(&target, 1), std::span<const Tensor>(&seeds, 1), src.ids,
                                         {.batch = n});
      for (std::size_t j = 0; j < g.size(); ++j)
        if (g[j].defined()) out[j] = reshape(g[j], concat_shapes(target.shape(), src.shapes[j]));
      return out;
    }
    std::vector<Shape> shapes;
    for (const Shape& sh : src.shapes) shapes.push_back(concat_shapes(target.shape(), sh));
    RowResults rows(shapes, src.dtypes);
    RecordingPause pause;  // chunks are assembled in raw memory: recording them would be useless
    internal::run_chunks(n, chunk, [&](std::int64_t first, std::int64_t count) {
      Tensor seeds = internal::one_hot_rows(target.shape(), target.dtype(), first, count);
      std::vector<Tensor> g = s.backward(std::span<const Tensor>(&target, 1), std::span<const Tensor>(&seeds, 1), src.ids,
                                         {.batch = count});
      for (std::size_t j = 0; j < g.size(); ++j)
        if (g[j].defined()) {
          internal::copy_into(rows.out[j], first * src.shapes[j].num_elements(), g[j]);
          rows.connected[j] = true;
        }
    });
    return rows.finish();
  } catch (const BatchingUnsupported& e) {
    internal::log_loop_fallback("GradientTape::jacobian", e.op());
    return std::nullopt;
  }
}

void check_persistence(const internal::TapeState& s, bool use_pfor, const char* what) {
  if (!s.options().persistent && !use_pfor)
    throw std::logic_error(std::string("GradientTape::") + what +
                           ": a non-persistent tape only supports the vectorized path "
                           "(experimental_use_pfor = true); use GradientTape({.persistent = true}) for the loop");
}

bool floating_target(const Tensor& target, const char* what) {
  if (!target.defined()) throw std::invalid_argument(std::string("GradientTape::") + what + ": undefined target");
  if (is_floating(target.dtype())) return true;
  logger()->warn("The dtype of the target tensor must be floating (e.g. tf.float32) when calling GradientTape.{}, got {}",
                 what, dtype_name(target.dtype()));
  return false;
}

}  // namespace

std::vector<std::optional<Tensor>> GradientTape::jacobian(const Tensor& target, const std::vector<Source>& sources,
                                                          const JacobianOptions& options) {
  internal::TapeState& s = state();
  check_persistence(s, options.experimental_use_pfor, "jacobian");
  s.begin_gradient_call("jacobian");
  std::vector<std::optional<Tensor>> result(sources.size());
  if (!floating_target(target, "jacobian")) return result;
  SourceInfo src = source_info(sources, "jacobian");
  std::vector<Tensor> out;
  if (target.num_elements() == 0) {
    out.resize(sources.size());
  } else {
    std::optional<std::vector<Tensor>> v;
    if (options.experimental_use_pfor) v = jacobian_vectorized(s, target, src, options.parallel_iterations);
    out = v ? std::move(*v) : jacobian_loop(s, target, src, options.parallel_iterations);
  }
  for (std::size_t j = 0; j < sources.size(); ++j) {
    if (!src.floating[j]) continue;
    if (out[j].defined())
      result[j] = out[j];
    else if (options.unconnected_gradients == UnconnectedGradients::kZero || target.num_elements() == 0)
      result[j] = zeros(concat_shapes(target.shape(), src.shapes[j]), src.dtypes[j]);
  }
  return result;
}

std::optional<Tensor> GradientTape::jacobian(const Tensor& target, const Source& source, const JacobianOptions& options) {
  return jacobian(target, std::vector<Source>{source}, options)[0];
}

std::map<std::string, std::optional<Tensor>> GradientTape::jacobian(const Tensor& target,
                                                                    const std::map<std::string, Source>& sources,
                                                                    const JacobianOptions& options) {
  std::vector<Source> list;
  for (const auto& kv : sources) list.push_back(kv.second);
  auto j = jacobian(target, list, options);
  std::map<std::string, std::optional<Tensor>> out;
  std::size_t i = 0;
  for (const auto& kv : sources) out.emplace(kv.first, j[i++]);
  return out;
}

std::optional<Tensor> GradientTape::batch_jacobian(const Tensor& target, const Source& source,
                                                   const BatchJacobianOptions& options) {
  internal::TapeState& s = state();
  if (!target.defined()) throw std::invalid_argument("GradientTape::batch_jacobian: undefined target");
  const Tensor x = source.value();
  if (target.rank() < 2 || x.rank() < 2)
    throw std::invalid_argument("GradientTape::batch_jacobian: target and source must have rank >= 2 ([b, ...]), "
                                "got target " + target.shape().to_string() + ", source " + x.shape().to_string());
  if (target.shape()[0] != x.shape()[0])
    throw std::invalid_argument("GradientTape::batch_jacobian: first dimensions of target and source differ: target " +
                                target.shape().to_string() + ", source " + x.shape().to_string());
  check_persistence(s, options.experimental_use_pfor, "batch_jacobian");
  s.begin_gradient_call("batch_jacobian");
  if (!floating_target(target, "batch_jacobian")) return std::nullopt;
  SourceInfo src = source_info({source}, "batch_jacobian");
  if (!src.floating[0]) return std::nullopt;
  const std::int64_t b = target.shape()[0], ny = b ? target.num_elements() / b : 0;
  Shape out_shape = target.shape();
  for (int d = 1; d < x.rank(); ++d) out_shape.push_back(x.shape()[d]);
  auto unconnected = [&]() -> std::optional<Tensor> {
    if (options.unconnected_gradients == UnconnectedGradients::kZero || ny == 0 || b == 0)
      return zeros(out_shape, x.dtype());
    return std::nullopt;
  };
  if (ny == 0 || b == 0 || x.num_elements() == 0) return zeros(out_shape, x.dtype());
#ifdef NDEBUG
  const bool check = options.check_independence.value_or(false);
#else
  const bool check = options.check_independence.value_or(true);
#endif
  std::string loop_op = options.experimental_use_pfor
                            ? internal::first_loop_only_op(s, std::span<const Tensor>(&target, 1), src.ids)
                            : std::string();
  if (!loop_op.empty()) internal::log_loop_fallback("GradientTape::batch_jacobian", loop_op);
  const bool recorded = is_recording();
  // The whole computation on one path; the vectorized one throws BatchingUnsupported when an op
  // its gradients execute cannot batch, and the loop runs instead.
  auto compute = [&](bool vectorize) -> std::optional<Tensor> {
    if (check && b > 1) internal::check_batch_independence(s, target, src.ids[0], vectorize);
    if (recorded) {
      // One pass (or the loop in order) on this thread, the result assembled by ops.
      Tensor j;
      if (vectorize) {
        Tensor seeds = internal::batch_one_hot_rows(target.shape(), target.dtype(), 0, ny);
        std::vector<Tensor> g = s.backward(std::span<const Tensor>(&target, 1), std::span<const Tensor>(&seeds, 1),
                                           src.ids, {.batch = ny, .one_hot_offset = 0});
        if (g[0].defined()) {  // [ny, b, x...] -> [b, ny, x...]
          std::vector<int> perm{1, 0};
          for (int d = 2; d < g[0].rank(); ++d) perm.push_back(d);
          j = transpose(g[0], perm);
        }
      } else {
        std::vector<Tensor> rows;
        for (std::int64_t r = 0; r < ny; ++r) {
          Tensor seed = internal::batch_one_hot_rows(target.shape(), target.dtype(), r, 1).with_shape(target.shape());
          rows.push_back(s.backward(std::span<const Tensor>(&target, 1), std::span<const Tensor>(&seed, 1), src.ids)[0]);
        }
        j = internal::stack_rows(rows, x.shape(), x.dtype(), 1);
      }
      if (!j.defined()) return unconnected();
      return reshape(j, out_shape);
    }
    Tensor out = Tensor::empty(out_shape, x.dtype());
    std::atomic<bool> connected{false};
    if (vectorize) {
      // Automatic chunks: widest batched gradient <= max(result / 4, 256K elements) per chunk.
      const std::int64_t chunk =
          options.parallel_iterations > 0
              ? options.parallel_iterations
              : internal::auto_chunk(s, ny, std::max<std::int64_t>(out_shape.num_elements() / 4, 1 << 18));
      RecordingPause pause;  // assembled in raw memory (and chunks may run on other threads)
      internal::run_chunks(ny, chunk, [&](std::int64_t first, std::int64_t count) {
        // Rank-2 targets: the seeds are carried in one-hot form (backward ignores `seeds`).
        const Tensor seeds = target.rank() == 2 ? Tensor()
                                                : internal::batch_one_hot_rows(target.shape(), target.dtype(), first, count);
        std::vector<Tensor> g = s.backward(std::span<const Tensor>(&target, 1), std::span<const Tensor>(&seeds, 1),
                                           src.ids, {.batch = count, .one_hot_offset = first});
        if (!g[0].defined()) return;
        internal::swap_leading_into(out, ny, first, g[0]);
        connected = true;
      });
    } else {
      internal::run_rows(ny, options.parallel_iterations, [&](std::int64_t j) {
        Tensor seed = internal::batch_one_hot_rows(target.shape(), target.dtype(), j, 1).with_shape(target.shape());
        std::vector<Tensor> g = s.backward(std::span<const Tensor>(&target, 1), std::span<const Tensor>(&seed, 1), src.ids);
        if (!g[0].defined()) return;
        Shape one{1};
        for (std::int64_t d : g[0].shape()) one.push_back(d);
        internal::swap_leading_into(out, ny, j, g[0].with_shape(one));
        connected = true;
      });
    }
    if (!connected) return unconnected();
    return out;
  };
  if (options.experimental_use_pfor && loop_op.empty()) {
    try {
      return compute(true);
    } catch (const BatchingUnsupported& e) {
      internal::log_loop_fallback("GradientTape::batch_jacobian", e.op());
    }
  }
  return compute(false);
}
}  // namespace tapeflow
