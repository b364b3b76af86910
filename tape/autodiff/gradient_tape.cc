#include "tape/autodiff/gradient_tape.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "tape/autodiff/internal/tape_state.h"
#include "tape/ops/math_ops.h"
#include "tape/runtime/batching.h"
#include "tape/runtime/internal/recorder_stack.h"
#include "tape/runtime/logging.h"

namespace tapeflow {
namespace internal {

// ---- recording ----
void TapeState::record(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                       const Attrs& attrs, const std::shared_ptr<const GradientFn>& custom_gradient) {
  if (!custom_gradient && !op.gradient) return;  // not differentiable: outputs stay untracked
  SmallVector<std::int64_t, 3> producers;
  bool any = false;
  for (const Tensor& t : inputs) {
    std::int64_t p = is_floating(t.dtype()) ? producer_.find(t.id()) : kUntracked;
    any = any || p != kUntracked;
    producers.push_back(p);
  }
  if (!any) return;
  if (outputs.size() > 0xffff)
    throw std::invalid_argument(op.name + ": too many outputs to record (" + std::to_string(outputs.size()) + ")");
  std::int64_t index = static_cast<std::int64_t>(ops_.size());
  OpRecord& r = ops_.emplace_back();
  r.op = &op;
  r.custom_gradient = custom_gradient;
  r.input_producers = std::move(producers);
  for (const Tensor& t : inputs) {
    r.input_ids.push_back(t.id());
    r.input_shapes.push_back(t.shape());
    r.input_dtypes.push_back(t.dtype());
  }
  r.first_slot = num_slots_;
  num_slots_ += static_cast<std::int64_t>(outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& t = outputs[k];
    r.output_ids.push_back(t.id());
    r.output_shapes.push_back(t.shape());
    r.output_dtypes.push_back(t.dtype());
    producer_.set(t.id(), encode_slot(index, static_cast<std::int64_t>(k)));
  }
  std::uint8_t saves = custom_gradient ? static_cast<std::uint8_t>(kSaveAll) : op.saves;
  if (saves & kSaveInputs) r.saved_inputs = TensorList(inputs.begin(), inputs.end());
  if (saves & kSaveOutputs) r.saved_outputs = TensorList(outputs.begin(), outputs.end());
  if (!attrs.empty()) r.attrs = attrs;
}

void TapeState::variable_accessed(const Variable& variable) {
  if (options_.watch_accessed_variables && variable.trainable() && is_floating(variable.dtype())) watch(variable);
}

void TapeState::watch(const Tensor& t) {
  if (!is_floating(t.dtype())) {
    logger()->warn("The dtype of the watched tensor must be floating (e.g. tf.float32), got {}", dtype_name(t.dtype()));
    return;
  }
  producer_.insert(t.id(), kWatched);
}

void TapeState::watch(const Variable& v) {
  if (!is_floating(v.dtype())) {
    logger()->warn("The dtype of the watched variable '{}' must be floating (e.g. tf.float32), got {}", v.name(),
                   dtype_name(v.dtype()));
    return;
  }
  if (producer_.insert(v.handle_id(), kWatched) ||
      std::none_of(watched_variables_.begin(), watched_variables_.end(),
                   [&](const Variable& w) { return w.same_as(v); }))
    watched_variables_.push_back(v);
}

std::vector<Variable> TapeState::watched_variables() const {
  std::vector<Variable> out = watched_variables_;
  std::sort(out.begin(), out.end(), [](const Variable& a, const Variable& b) { return a.handle_id() < b.handle_id(); });
  return out;
}

void TapeState::start() {
  if (recording_) return;
  push_recorder(this);
  recording_ = true;
}

void TapeState::stop() {
  if (!recording_) return;
  remove_recorder(this);
  recording_ = false;
}

int TapeState::pause() {
  const int pos = recording_ ? remove_recorder(this) : -1;
  if (pos < 0) throw std::logic_error("GradientTape::stop_recording: the tape is not currently recording");
  return pos;
}

void TapeState::resume(int position) {
  if (!recording_) return;  // stopped meanwhile
  insert_recorder(this, static_cast<std::size_t>(std::max(position, 0)));
}

void TapeState::reset() {
  release();
  watched_variables_.clear();
  used_ = false;
}

void TapeState::release() {
  ops_.clear();
  producer_.clear();
  num_slots_ = 0;
}

void TapeState::begin_gradient_call(const char* what) {
  if (used_ && !options_.persistent)
    throw std::logic_error(std::string("GradientTape::") + what +
                           ": a non-persistent GradientTape can only be used to compute one set of gradients "
                           "(or jacobians); use GradientTape({.persistent = true}) to call it several times");
  used_ = true;
  if (!options_.persistent) stop();
}

// ---- backward ----
// The algorithm (TensorFlow's tape.h vocabulary): the tape is a list of op records in execution
// order, each naming the *producer* of every input (an earlier record's output slot, a watched
// tensor/variable, or untracked). 1. Prune: a forward scan marks the records that depend on a
// source ("relevant"). 2. Seed: each target's slot gets its seed (output_gradients, or ones).
// 3. Reverse sweep: records in reverse execution order are a topological order of the backward
// graph, so when a record is reached every consumer of its outputs has already added its
// contribution (fan-in summed with `add`): its output gradients are complete. Its gradient function
// (written with ops, so enclosing tapes record this sweep: higher order) maps them to input
// gradients, which are routed to the producers' slots; slots nobody needs any more are freed.
// 4. The sources' slots are the result. With BackwardOptions::batch = K the same sweep carries K
// cotangents: a BatchScope is active, seeds are marked batched, and every op the gradient functions
// execute on batched values runs through its batching rule.
namespace {
void accumulate(Tensor& slot, const Tensor& g) { slot = slot.defined() ? add(slot, g) : g; }

Shape with_leading(std::int64_t k, const Shape& s) {
  Shape out{k};
  for (std::int64_t d : s) out.push_back(d);
  return out;
}
}  // namespace

std::vector<Tensor> TapeState::backward(std::span<const Tensor> targets, std::span<const Tensor> seeds,
                                        std::span<const std::int64_t> source_ids,
                                        const BackwardOptions& options) const {
  const std::size_t n_ops = ops_.size();  // the pass may append records (persistent tape in context)
  const std::int64_t n_slots = num_slots_;
  const std::int64_t k_batch = options.batch;
  std::optional<BatchScope> scope;
  if (k_batch > 0) scope.emplace(k_batch);
  // Sources are watched tensors/variables (gradients kept by id) or recorded outputs (kept in slots).
  std::vector<std::int64_t> watched_sources;
  std::vector<std::int64_t> source_codes(source_ids.size());
  std::vector<char> relevant_out(n_ops, 0);  // op is on a path from a source (or produces one)
  for (std::size_t s = 0; s < source_ids.size(); ++s) {
    std::int64_t code = producer_.find(source_ids[s]);
    source_codes[s] = code;
    if (code == kWatched) watched_sources.push_back(source_ids[s]);
    if (code >= 0 && static_cast<std::size_t>(slot_op(code)) < n_ops) relevant_out[static_cast<std::size_t>(slot_op(code))] = 1;
  }
  std::sort(watched_sources.begin(), watched_sources.end());
  auto is_watched_source = [&](std::int64_t id) {
    return std::binary_search(watched_sources.begin(), watched_sources.end(), id);
  };
  // Forward sweep: prune to ops that depend on a source.
  std::vector<char> relevant(n_ops, 0);
  for (std::size_t i = 0; i < n_ops; ++i) {
    const OpRecord& r = ops_[i];
    for (std::size_t j = 0; j < r.input_producers.size(); ++j) {
      std::int64_t p = r.input_producers[j];
      if (p >= 0 ? relevant_out[static_cast<std::size_t>(slot_op(p))] != 0 : (p == kWatched && is_watched_source(r.input_ids[j]))) {
        relevant[i] = 1;
        relevant_out[i] = 1;
        break;
      }
    }
  }
  std::vector<Tensor> slots(static_cast<std::size_t>(n_slots));
  std::vector<char> keep(static_cast<std::size_t>(n_slots), 0);  // slots that are sources outlive the pass
  for (std::int64_t code : source_codes)
    if (code >= 0 && static_cast<std::size_t>(slot_op(code)) < n_ops)
      keep[static_cast<std::size_t>(ops_[static_cast<std::size_t>(slot_op(code))].first_slot + slot_output(code))] = 1;
  std::vector<Tensor> watched_grads(watched_sources.size());
  auto watched_index = [&](std::int64_t id) {
    return static_cast<std::size_t>(std::lower_bound(watched_sources.begin(), watched_sources.end(), id) - watched_sources.begin());
  };
  auto source_slot = [&](std::size_t s) -> Tensor* {
    const std::int64_t code = source_codes[s];
    if (code == kWatched) return &watched_grads[watched_index(source_ids[s])];
    if (code >= 0 && static_cast<std::size_t>(slot_op(code)) < n_ops)
      return &slots[static_cast<std::size_t>(ops_[static_cast<std::size_t>(slot_op(code))].first_slot + slot_output(code))];
    return nullptr;
  };
  auto route = [&](std::int64_t code, std::int64_t id, const Tensor& g) {
    if (code >= 0) {
      std::size_t op = static_cast<std::size_t>(slot_op(code));
      if (op < n_ops && relevant_out[op]) accumulate(slots[static_cast<std::size_t>(ops_[op].first_slot + slot_output(code))], g);
    } else if (code == kWatched && is_watched_source(id)) {
      accumulate(watched_grads[watched_index(id)], g);
    }
  };
  // on_gradient_final: source s is final after op final_after[s] (its consumer with the smallest
  // index), or right after seeding (-1) if no relevant op consumes it.
  std::vector<std::vector<std::size_t>> finals_at;
  std::vector<std::size_t> final_at_seed;
  auto finish = [&](std::size_t s) {
    Tensor* slot = source_slot(s);
    Tensor value = slot ? *slot : Tensor();
    if (scope && value.defined()) value = *slot = scope->dense(value);
    options.on_gradient_final(s, value);
  };
  if (options.on_gradient_final) {
    std::vector<std::int64_t> final_after(source_ids.size(), -1);
    std::unordered_map<std::int64_t, std::vector<std::size_t>> by_code, by_id;
    for (std::size_t s = 0; s < source_ids.size(); ++s) {
      if (source_codes[s] == kWatched) by_id[source_ids[s]].push_back(s);
      else if (source_codes[s] >= 0) by_code[source_codes[s]].push_back(s);
    }
    for (std::size_t i = 0; i < n_ops; ++i) {
      if (!relevant[i]) continue;
      const OpRecord& r = ops_[i];
      for (std::size_t j = 0; j < r.input_producers.size(); ++j) {
        const std::int64_t p = r.input_producers[j];
        const auto& map = p == kWatched ? by_id : by_code;
        auto it = map.find(p == kWatched ? r.input_ids[j] : p);
        if (p == kUntracked || it == map.end()) continue;
        for (std::size_t s : it->second)
          if (final_after[s] < 0 || static_cast<std::int64_t>(i) < final_after[s]) final_after[s] = static_cast<std::int64_t>(i);
      }
    }
    finals_at.resize(n_ops);
    for (std::size_t s = 0; s < source_ids.size(); ++s)
      (final_after[s] < 0 ? final_at_seed : finals_at[static_cast<std::size_t>(final_after[s])]).push_back(s);
  }

  for (std::size_t t = 0; t < targets.size(); ++t) {
    Tensor seed = seeds[t];
    if (scope) {
      const Tensor& y = targets[t];
      if (options.one_hot_offset >= 0 && targets.size() == 1 && y.rank() == 2 &&
          options.one_hot_offset + k_batch <= y.shape()[1]) {
        scope->enable_one_hot(options.one_hot_offset, y.shape());
        seed = ones(y.shape(), y.dtype());
        scope->mark_one_hot(seed);
      } else {
        if (seed.shape() != with_leading(k_batch, y.shape()))
          throw std::logic_error("TapeState::backward: batched seed of shape " + seed.shape().to_string() +
                                 " for target " + y.shape().to_string() + " and K = " + std::to_string(k_batch));
        scope->mark(seed);
      }
    }
    route(producer_.find(targets[t].id()), targets[t].id(), seed);
  }
  for (std::size_t s : final_at_seed) finish(s);

  // Reverse sweep: records are in execution order, so reverse order is a topological order.
  auto process = [&](std::size_t i) {
    const OpRecord& r = ops_[i];
    TensorList out_grads;
    bool any = false;
    for (std::size_t k = 0; k < r.output_ids.size(); ++k) {
      Tensor& slot = slots[static_cast<std::size_t>(r.first_slot) + k];
      any = any || slot.defined();
      out_grads.push_back(slot);
    }
    if (!any) return;
    // Missing output gradients are zeros (unbatched under a BatchScope: the same for all K), unless
    // the op's gradient takes them undefined; an integer output (an argmax) has none, as in TF, and
    // its gradient stays undefined.
    const bool make_zeros = r.custom_gradient || !r.op->takes_missing_grads;
    for (std::size_t k = 0; k < out_grads.size(); ++k)
      if (make_zeros && !out_grads[k].defined() && is_floating(r.output_dtypes[k]))
        out_grads[k] = zeros(r.output_shapes[k], r.output_dtypes[k]);
    const GradientFn& fn = r.custom_gradient ? *r.custom_gradient : r.op->gradient;
    if (!fn) return;  // gradient removed from the registry after recording
    SmallVector<char, 3> needed;
    for (std::size_t k = 0; k < r.input_ids.size(); ++k) {
      const std::int64_t p = r.input_producers[k];
      needed.push_back(p >= 0 ? (static_cast<std::size_t>(slot_op(p)) < n_ops && relevant_out[static_cast<std::size_t>(slot_op(p))] != 0)
                              : (p == kWatched && is_watched_source(r.input_ids[k])));
    }
    GradContext ctx(std::span<const Tensor>(r.saved_inputs), std::span<const Tensor>(r.saved_outputs),
                    std::span<const Shape>(r.input_shapes), std::span<const DType>(r.input_dtypes), r.attrs,
                    r.op->name.c_str(), std::span<const char>(needed.data(), needed.size()),
                    std::span<const Shape>(r.output_shapes));
    TensorList in_grads = fn(ctx, std::span<const Tensor>(out_grads));
    if (in_grads.size() != r.input_ids.size())
      throw std::logic_error("gradient of " + r.op->name + " returned " + std::to_string(in_grads.size()) +
                             " gradients for " + std::to_string(r.input_ids.size()) + " inputs");
    for (std::size_t k = 0; k < in_grads.size(); ++k) {
      Tensor& g = in_grads[k];
      if (!g.defined() || r.input_producers[k] == kUntracked || !needed[k]) {
        g = Tensor();
        continue;
      }
      const bool batched_g = scope && scope->batched(g);
      if (batched_g ? g.shape() != with_leading(k_batch, r.input_shapes[k]) : g.shape() != r.input_shapes[k])
        throw std::logic_error("gradient of " + r.op->name + " returned shape " + g.shape().to_string() +
                               " for input " + std::to_string(k) + " of shape " + r.input_shapes[k].to_string() +
                               (scope ? " (batched: K = " + std::to_string(k_batch) + ")" : std::string()));
      if (g.dtype() != r.input_dtypes[k]) {
        const bool one_hot = scope && scope->one_hot(g);
        g = convert(g, r.input_dtypes[k]);
        if (batched_g) scope->mark(g);
        if (one_hot) scope->mark_one_hot(g);
      }
    }
    if (options.on_op) options.on_op(r, i, std::span<const Tensor>(in_grads.begin(), in_grads.end()));
    for (std::size_t k = 0; k < in_grads.size(); ++k)
      if (in_grads[k].defined()) route(r.input_producers[k], r.input_ids[k], in_grads[k]);
    for (std::size_t k = 0; k < r.output_ids.size(); ++k) {  // free what no earlier op needs
      std::size_t slot = static_cast<std::size_t>(r.first_slot) + k;
      if (!keep[slot]) slots[slot] = Tensor();
    }
  };
  for (std::size_t i = n_ops; i-- > 0;) {
    if (!relevant[i]) continue;
    process(i);
    if (!finals_at.empty())
      for (std::size_t s : finals_at[i]) finish(s);
  }
  std::vector<Tensor> result;
  result.reserve(source_ids.size());
  for (std::size_t s = 0; s < source_ids.size(); ++s) {
    Tensor* slot = source_slot(s);
    Tensor g = slot ? *slot : Tensor();
    if (scope && g.defined()) g = scope->dense(g);  // [K, source shape]
    result.push_back(g);
  }
  return result;
}

}  // namespace internal

// ---- GradientTape ----
GradientTape::GradientTape(GradientTapeOptions options) : state_(std::make_shared<internal::TapeState>(options)) {
  state_->start();
}
GradientTape::~GradientTape() {
  if (state_) state_->stop();
}
GradientTape::GradientTape(GradientTape&& other) noexcept = default;
GradientTape& GradientTape::operator=(GradientTape&& other) noexcept {
  if (this != &other) {
    if (state_) state_->stop();
    state_ = std::move(other.state_);
  }
  return *this;
}

internal::TapeState& GradientTape::state() const {
  if (!state_) throw std::logic_error("GradientTape: use of a moved-from tape");
  return *state_;
}

void GradientTape::watch(const Tensor& tensor) { state().watch(tensor); }
void GradientTape::watch(const Variable& variable) { state().watch(variable); }
void GradientTape::watch(const std::vector<Tensor>& tensors) {
  for (const auto& t : tensors) state().watch(t);
}
void GradientTape::watch(const std::vector<Variable>& variables) {
  for (const auto& v : variables) state().watch(v);
}
void GradientTape::stop() { state().stop(); }
bool GradientTape::recording() const { return state().recording(); }
bool GradientTape::persistent() const { return state().options().persistent; }
void GradientTape::reset() { state().reset(); }
std::vector<Variable> GradientTape::watched_variables() const { return state().watched_variables(); }

GradientTape::StopRecording::StopRecording(std::shared_ptr<internal::TapeState> state, int position)
    : state_(std::move(state)), position_(position) {}
GradientTape::StopRecording::StopRecording(StopRecording&& o) noexcept
    : state_(std::move(o.state_)), position_(o.position_) {}
GradientTape::StopRecording::~StopRecording() {
  if (state_) state_->resume(position_);
}
GradientTape::StopRecording GradientTape::stop_recording() {
  int position = state().pause();
  return StopRecording(state_, position);
}

std::vector<std::optional<Tensor>> GradientTape::gradient(const std::vector<Tensor>& targets,
                                                          const std::vector<Source>& sources,
                                                          const GradientOptions& options) {
  internal::TapeState& s = state();
  if (!options.output_gradients.empty() && options.output_gradients.size() != targets.size())
    throw std::invalid_argument("GradientTape::gradient: " + std::to_string(options.output_gradients.size()) +
                                " output_gradients for " + std::to_string(targets.size()) + " targets");
  s.begin_gradient_call("gradient");
  std::vector<Tensor> live_targets, seeds;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const Tensor& t = targets[i];
    if (!is_floating(t.dtype())) {
      logger()->warn("The dtype of the target tensor must be floating (e.g. tf.float32) when calling "
                     "GradientTape.gradient, got {}", dtype_name(t.dtype()));
      continue;
    }
    Tensor seed = options.output_gradients.empty() ? ones_like(t) : options.output_gradients[i];
    if (seed.shape() != t.shape() || seed.dtype() != t.dtype())
      throw std::invalid_argument("GradientTape::gradient: output_gradients[" + std::to_string(i) + "] has shape " +
                                  seed.shape().to_string() + " dtype " + dtype_name(seed.dtype()) +
                                  ", target has shape " + t.shape().to_string() + " dtype " + dtype_name(t.dtype()));
    live_targets.push_back(t);
    seeds.push_back(seed);
  }
  std::vector<std::int64_t> ids;
  std::vector<bool> floating;
  for (const Source& src : sources) {
    Tensor v = src.value();
    bool ok = is_floating(v.dtype());
    if (!ok)
      logger()->warn("The dtype of the source tensor must be floating (e.g. tf.float32) when calling "
                     "GradientTape.gradient, got {}", dtype_name(v.dtype()));
    floating.push_back(ok);
    ids.push_back(src.id());
  }
  internal::BackwardOptions backward_options;
  std::vector<char> reported(sources.size(), 0);
  if (options.on_gradient_final)
    backward_options.on_gradient_final = [&](std::size_t i, const Tensor& g) {
      if (!floating[i] || !g.defined()) return;  // unconnected: reported at the end
      reported[i] = 1;
      options.on_gradient_final(i, g);
    };
  std::vector<Tensor> grads = s.backward(live_targets, seeds, ids, backward_options);
  if (!s.options().persistent) s.release();  // TF: a non-persistent tape frees its records here
  std::vector<std::optional<Tensor>> out;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (!floating[i]) {
      out.emplace_back(std::nullopt);
    } else if (grads[i].defined()) {
      out.emplace_back(grads[i]);
    } else if (options.unconnected_gradients == UnconnectedGradients::kZero) {
      out.emplace_back(zeros_like(sources[i].value()));
    } else {
      out.emplace_back(std::nullopt);
    }
  }
  if (options.on_gradient_final)
    for (std::size_t i = 0; i < sources.size(); ++i)
      if (floating[i] && !reported[i]) options.on_gradient_final(i, out[i] ? *out[i] : Tensor());
  return out;
}

std::vector<std::optional<Tensor>> GradientTape::gradient(const Tensor& target, const std::vector<Source>& sources,
                                                          const GradientOptions& options) {
  return gradient(std::vector<Tensor>{target}, sources, options);
}

std::optional<Tensor> GradientTape::gradient(const Tensor& target, const Source& source,
                                             const GradientOptions& options) {
  return gradient(std::vector<Tensor>{target}, std::vector<Source>{source}, options)[0];
}

std::map<std::string, std::optional<Tensor>> GradientTape::gradient_map(const Tensor& target,
                                                                        const std::map<std::string, Source>& sources,
                                                                        const GradientOptions& options) {
  std::vector<Source> list;
  for (const auto& kv : sources) list.push_back(kv.second);
  auto grads = gradient(std::vector<Tensor>{target}, list, options);
  std::map<std::string, std::optional<Tensor>> out;
  std::size_t i = 0;
  for (const auto& kv : sources) out.emplace(kv.first, grads[i++]);
  return out;
}

}  // namespace tapeflow
