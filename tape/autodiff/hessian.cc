// Hessians over several variables (one batched backward pass over the gradient graph, or a loop)
// and Hessian-vector products by double backward. See hessian.h.
#include "tape/autodiff/hessian.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tape/autodiff/internal/jacobian_util.h"
#include "tape/autodiff/internal/tape_state.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tape/runtime/batching.h"
#include "tape/runtime/recorder.h"

namespace tapeflow {
namespace {

void watch_source(GradientTape& tape, const Source& s) {
  if (s.is_variable())
    tape.watch(s.variable());
  else
    tape.watch(s.value());
}

// Common float dtype of the sources. Errors: std::invalid_argument naming the offending source.
DType check_sources(const std::vector<Source>& sources, const char* what) {
  if (sources.empty()) throw std::invalid_argument(std::string(what) + ": no sources");
  const DType dtype = sources[0].value().dtype();
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const Tensor v = sources[i].value();
    if (!is_floating(v.dtype()) || v.dtype() != dtype)
      throw std::invalid_argument(std::string(what) + ": sources must all be float32 or all float64; source " +
                                  std::to_string(i) + (sources[i].is_variable() ? " ('" + sources[i].variable().name() + "')" : "") +
                                  " has dtype " + dtype_name(v.dtype()) + ", source 0 has " + dtype_name(dtype));
  }
  return dtype;
}

void check_scalar_loss(const Tensor& loss, const char* what) {
  if (!loss.defined() || loss.num_elements() != 1)
    throw std::invalid_argument(std::string(what) + ": the loss must have one element, got shape " +
                                (loss.defined() ? loss.shape().to_string() : std::string("(undefined)")));
}

// Runs loss_fn under an inner tape inside `outer`, so the gradient computation is recorded on it.
std::pair<Tensor, std::vector<std::optional<Tensor>>> loss_and_gradients(GradientTape& outer, const LossFn& loss_fn,
                                                                          const std::vector<Source>& sources,
                                                                          const char* what) {
  for (const Source& s : sources) watch_source(outer, s);
  GradientTape inner({.watch_accessed_variables = false});
  for (const Source& s : sources) watch_source(inner, s);
  Tensor loss = loss_fn();
  check_scalar_loss(loss, what);
  auto grads = inner.gradient(loss, sources);
  return {loss, std::move(grads)};
}

// hessian() while a recorder is active (an outer tape or a function trace): gradient, matrix and
// blocks built by ops on this thread, from one batched pass over all n rows (or the loop in order),
// so that the recorder sees them (third derivatives, traced functions).
void record_hessian(const internal::TapeState& s, HessianResult& out, const std::vector<Tensor>& targets,
                    const std::vector<std::size_t>& target_source, const std::vector<Shape>& shapes,
                    const std::vector<std::int64_t>& ids, const std::vector<Tensor>& gradients, DType dtype,
                    const HessianOptions& options) {
  const std::int64_t n = out.offsets.back();
  const std::size_t k = shapes.size();
  auto size = [&](std::size_t j) { return shapes[j].num_elements(); };
  std::vector<Tensor> flat;
  for (std::size_t i = 0; i < k; ++i)
    flat.push_back(reshape(gradients[i].defined() ? gradients[i] : zeros(shapes[i], dtype), Shape{size(i)}));
  out.gradient = concat(flat, 0);
  // columns[j]: [n, size_j], the derivatives of all n gradient entries by source j.
  std::vector<Tensor> columns(k);
  const std::string op = targets.empty() ? std::string() : internal::first_loop_only_op(s, targets, ids);
  if (!op.empty()) internal::log_loop_fallback("hessian", op);
  bool vectorized = false;
  if (!targets.empty() && options.experimental_use_pfor && op.empty()) {
    std::vector<Tensor> seeds;
    for (std::size_t t = 0; t < targets.size(); ++t) {
      const std::size_t i = target_source[t];
      seeds.push_back(internal::block_one_hot_rows(shapes[i], dtype, out.offsets[i], 0, n));
    }
    try {
      std::vector<Tensor> g = s.backward(targets, seeds, ids, {.batch = n});
      for (std::size_t j = 0; j < k; ++j)
        if (g[j].defined()) columns[j] = reshape(g[j], Shape{n, size(j)});
      vectorized = true;
    } catch (const BatchingUnsupported& e) {
      internal::log_loop_fallback("hessian", e.op());
      columns.assign(k, Tensor());
    }
  }
  if (!targets.empty() && !vectorized) {
    // rows[j][row]: [size_j], undefined where row does not reach source j.
    std::vector<std::vector<Tensor>> rows(k, std::vector<Tensor>(static_cast<std::size_t>(n)));
    for (std::size_t t = 0; t < targets.size(); ++t) {
      const std::size_t i = target_source[t];
      for (std::int64_t r = 0; r < size(i); ++r) {
        Tensor seed = internal::one_hot_rows(shapes[i], dtype, r, 1).with_shape(shapes[i]);
        std::vector<Tensor> g = s.backward(std::span<const Tensor>(&targets[t], 1), std::span<const Tensor>(&seed, 1), ids);
        for (std::size_t j = 0; j < k; ++j)
          if (g[j].defined()) rows[j][static_cast<std::size_t>(out.offsets[i] + r)] = reshape(g[j], Shape{size(j)});
      }
    }
    for (std::size_t j = 0; j < k; ++j) columns[j] = internal::stack_rows(std::move(rows[j]), Shape{size(j)}, dtype, 0);
  }
  for (std::size_t j = 0; j < k; ++j)
    if (!columns[j].defined()) columns[j] = zeros(Shape{n, size(j)}, dtype);
  out.matrix = concat(columns, 1);
  if (options.blocks) {
    out.blocks.resize(k);
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < k; ++j) {
        Shape bs = shapes[i];
        for (std::int64_t d : shapes[j]) bs.push_back(d);
        out.blocks[i].push_back(reshape(slice(out.matrix, {out.offsets[i], out.offsets[j]}, {size(i), size(j)}), bs));
      }
  }
}

}  // namespace

HessianResult hessian(GradientTape& tape, const std::vector<Tensor>& gradients, const std::vector<Source>& sources,
                      const HessianOptions& options) {
  const DType dtype = check_sources(sources, "hessian");
  if (gradients.size() != sources.size())
    throw std::invalid_argument("hessian: " + std::to_string(gradients.size()) + " gradients for " +
                                std::to_string(sources.size()) + " sources");
  internal::TapeState& s = tape.state();
  if (!s.options().persistent && !options.experimental_use_pfor)
    throw std::logic_error("hessian: the loop path (experimental_use_pfor = false) needs a persistent tape");
  s.begin_gradient_call("hessian");
  HessianResult out;
  out.offsets.push_back(0);
  std::vector<Shape> shapes;
  std::vector<std::int64_t> ids;
  for (const Source& src : sources) {
    shapes.push_back(src.value().shape());
    ids.push_back(src.id());
    out.offsets.push_back(out.offsets.back() + src.value().num_elements());
  }
  const std::int64_t n = out.offsets.back();
  // Gradient vector; targets are the defined gradients (a missing one is an all-zero block row).
  out.gradient = Tensor::empty(Shape{n}, dtype);
  std::vector<Tensor> targets;
  std::vector<std::size_t> target_source;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const Tensor& g = gradients[i];
    if (g.defined() && g.shape() != shapes[i])
      throw std::invalid_argument("hessian: gradient " + std::to_string(i) + " has shape " + g.shape().to_string() +
                                  ", its source has shape " + shapes[i].to_string());
    internal::copy_into(out.gradient, out.offsets[i], g.defined() ? g : zeros(shapes[i], dtype));
    if (g.defined()) {
      targets.push_back(g);
      target_source.push_back(i);
    }
  }
  if (is_recording()) {
    record_hessian(s, out, targets, target_source, shapes, ids, gradients, dtype, options);
    return out;
  }
  out.matrix = zeros(Shape{n, n}, dtype);
  // Row block [first, first + count) of H from batched gradients [count, shape_j] per source j.
  auto store = [&](std::int64_t first, std::int64_t count, const std::vector<Tensor>& g) {
    for (std::size_t j = 0; j < g.size(); ++j)
      if (g[j].defined()) internal::copy_block(out.matrix, first, out.offsets[j], g[j], count, shapes[j].num_elements());
  };
  std::string op = targets.empty() ? std::string() : internal::first_loop_only_op(s, targets, ids);
  if (!op.empty()) internal::log_loop_fallback("hessian", op);
  bool vectorized = false;
  if (!targets.empty() && options.experimental_use_pfor && op.empty()) {
    // Automatic chunks: widest batched gradient <= max(H / 16, 64K elements) per chunk, two chunks
    // in flight on 2 threads, so that peak memory stays within about 2x the Hessian.
    const std::int64_t chunk = options.parallel_iterations > 0
                                   ? options.parallel_iterations
                                   : internal::auto_chunk(s, n, std::max<std::int64_t>(n * n / 16, 1 << 16));
    RecordingPause pause;  // the matrix is assembled in raw memory
    try {
      internal::run_chunks(n, chunk, [&](std::int64_t first, std::int64_t count) {
        std::vector<Tensor> seeds;
        for (std::size_t t = 0; t < targets.size(); ++t) {
          const std::size_t i = target_source[t];
          seeds.push_back(internal::block_one_hot_rows(shapes[i], dtype, out.offsets[i], first, count));
        }
        store(first, count, s.backward(targets, seeds, ids, {.batch = count}));
      });
      vectorized = true;
    } catch (const BatchingUnsupported& e) {
      internal::log_loop_fallback("hessian", e.op());
    }
  }
  if (!targets.empty() && !vectorized) {
    internal::run_rows(n, options.parallel_iterations, [&](std::int64_t row) {
      std::size_t t = 0;
      while (t < targets.size() && out.offsets[target_source[t] + 1] <= row) ++t;
      if (t == targets.size() || out.offsets[target_source[t]] > row) return;  // unconnected source: zero row
      const std::size_t i = target_source[t];
      Tensor seed = internal::one_hot_rows(shapes[i], dtype, row - out.offsets[i], 1).with_shape(shapes[i]);
      std::vector<Tensor> g = s.backward(std::span<const Tensor>(&targets[t], 1), std::span<const Tensor>(&seed, 1), ids);
      for (std::size_t j = 0; j < g.size(); ++j)
        if (g[j].defined()) internal::copy_block(out.matrix, row, out.offsets[j], g[j], 1, shapes[j].num_elements());
    });
  }
  if (options.blocks) {
    out.blocks.resize(sources.size());
    for (std::size_t i = 0; i < sources.size(); ++i)
      for (std::size_t j = 0; j < sources.size(); ++j) {
        Shape bs = shapes[i];
        for (std::int64_t d : shapes[j]) bs.push_back(d);
        const std::int64_t ni = shapes[i].num_elements(), nj = shapes[j].num_elements();
        Tensor block = Tensor::empty(Shape{ni, nj}, dtype);
        Tensor m = out.matrix;
        dispatch_dtype(dtype, [&](auto tag) {
          using T = decltype(tag);
          const T* src = m.data<T>();
          T* dst = block.mutable_data<T>();
          for (std::int64_t r = 0; r < ni; ++r)
            for (std::int64_t c = 0; c < nj; ++c) dst[r * nj + c] = src[(out.offsets[i] + r) * n + out.offsets[j] + c];
        });
        out.blocks[i].push_back(block.with_shape(bs));
      }
  }
  return out;
}

HessianResult hessian(const LossFn& loss_fn, const std::vector<Source>& sources, const HessianOptions& options) {
  check_sources(sources, "hessian");
  GradientTape outer({.persistent = !options.experimental_use_pfor, .watch_accessed_variables = false});
  auto [loss, grads] = loss_and_gradients(outer, loss_fn, sources, "hessian");
  outer.stop();
  std::vector<Tensor> g;
  for (auto& gi : grads) g.push_back(gi ? *gi : Tensor());
  HessianResult out = hessian(outer, g, sources, options);
  out.loss = loss;
  return out;
}

std::vector<Tensor> hessian_vector_product(const LossFn& loss_fn, const std::vector<Source>& sources,
                                           const std::vector<Tensor>& vectors) {
  const DType dtype = check_sources(sources, "hessian_vector_product");
  if (vectors.size() != sources.size())
    throw std::invalid_argument("hessian_vector_product: " + std::to_string(vectors.size()) + " vectors for " +
                                std::to_string(sources.size()) + " sources");
  for (std::size_t i = 0; i < sources.size(); ++i)
    if (!vectors[i].defined() || vectors[i].shape() != sources[i].value().shape())
      throw std::invalid_argument("hessian_vector_product: vector " + std::to_string(i) + " has shape " +
                                  (vectors[i].defined() ? vectors[i].shape().to_string() : std::string("(undefined)")) +
                                  ", its source has shape " + sources[i].value().shape().to_string());
  GradientTape outer({.watch_accessed_variables = false});
  auto [loss, grads] = loss_and_gradients(outer, loss_fn, sources, "hessian_vector_product");
  // <g, v>: its gradient is H v (v is a constant).
  Tensor dot;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (!grads[i]) continue;
    Tensor term = reduce_sum(*grads[i] * (vectors[i].dtype() == dtype ? vectors[i] : convert(vectors[i], dtype)));
    dot = dot.defined() ? dot + term : term;
  }
  std::vector<Tensor> out;
  if (!dot.defined()) {
    for (const Source& s : sources) out.push_back(zeros_like(s.value()));
    return out;
  }
  GradientOptions zero_if_unconnected;
  zero_if_unconnected.unconnected_gradients = UnconnectedGradients::kZero;
  auto hv = outer.gradient(dot, sources, zero_if_unconnected);
  for (auto& h : hv) out.push_back(*h);
  return out;
}

}  // namespace tapeflow
