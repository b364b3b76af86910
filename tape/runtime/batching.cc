#include "tape/runtime/batching.h"

#include <algorithm>

#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

namespace {
thread_local BatchScope* active_scope = nullptr;

Shape with_leading(std::int64_t k, const Shape& s) {
  Shape out{k};
  for (std::int64_t d : s) out.push_back(d);
  return out;
}
}  // namespace

BatchingUnsupported::BatchingUnsupported(const std::string& op)
    : std::logic_error("op '" + op + "' has no batching rule (OpDef::batch) or is marked loop_only"), op_(op) {}

BatchScope::BatchScope(std::int64_t size) : size_(size), previous_(active_scope) { active_scope = this; }
BatchScope::~BatchScope() { active_scope = previous_; }
BatchScope* BatchScope::current() { return active_scope; }

BatchScope::Suspend::Suspend() : saved_(active_scope) { active_scope = nullptr; }
BatchScope::Suspend::~Suspend() { active_scope = saved_; }

void BatchScope::mark(const Tensor& t) {
  if (t.rank() < 1 || t.shape()[0] != size_)
    throw std::logic_error("BatchScope: a batched tensor must have leading dimension " + std::to_string(size_) +
                           ", got shape " + t.shape().to_string());
  batched_.insert(t.id());
  empty_ = false;
}

Shape BatchScope::logical_shape(const Tensor& t) const {
  if (!batched(t)) return t.shape();
  return Shape(t.shape().begin() + 1, t.shape().end());
}

void BatchScope::enable_one_hot(std::int64_t offset, const Shape& shape) {
  offset_ = offset;
  one_hot_shape_ = shape;
}

void BatchScope::mark_one_hot(const Tensor& scale) {
  if (offset_ < 0 || scale.shape() != one_hot_shape_)
    throw std::logic_error("BatchScope: one-hot value of shape " + scale.shape().to_string() +
                           " without a matching one-hot form");
  one_hot_.insert(scale.id());
  empty_ = false;
}

Tensor BatchScope::dense(const Tensor& t) {
  if (batched(t)) return t;
  Suspend suspend;
  Tensor out;
  if (one_hot(t)) {
    if (!pattern_.defined() || pattern_.dtype() != t.dtype()) {
      // [K, b, n] with a 1 at [k, i, offset + k] for every i.
      const std::int64_t b = one_hot_shape_[0], n = one_hot_shape_[1];
      Tensor p = Tensor::empty(with_leading(size_, one_hot_shape_), t.dtype());
      dispatch_dtype(t.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T* d = p.mutable_data<T>();
        std::fill(d, d + p.num_elements(), T(0));
        for (std::int64_t k = 0; k < size_; ++k)
          for (std::int64_t i = 0; i < b; ++i) d[(k * b + i) * n + offset_ + k] = T(1);
      });
      pattern_ = p;
    }
    static const OpDef& mul = op_def("Mul");
    out = execute1(mul, {pattern_, t});
  } else {
    static const OpDef& broadcast = op_def("BroadcastTo");
    out = execute1(broadcast, {t}, Attrs().set("shape", with_leading(size_, t.shape()).to_vector()));
  }
  mark(out);
  return out;
}

Shape BatchContext::shape(int i) const {
  const Tensor& t = inputs_[static_cast<std::size_t>(i)];
  if (!batched(i) || one_hot(i)) return t.shape();
  return Shape(t.shape().begin() + 1, t.shape().end());
}

Tensor BatchContext::dense(int i) const {
  const Tensor& t = inputs_[static_cast<std::size_t>(i)];
  if (batched(i) && !one_hot(i)) return t;
  if (!scope_) throw std::logic_error("BatchContext::dense: no batch scope");
  BatchScope* saved = scope_;
  // The scope is suspended while the rule runs; materialise through it directly.
  return saved->dense(t);
}

std::int64_t BatchContext::one_hot_offset() const { return scope_ ? scope_->one_hot_offset() : -1; }

TensorList execute_batched(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs, BatchScope& scope) {
  if (!op.batch || op.loop_only) throw BatchingUnsupported(op.name);
  const std::size_t n = inputs.size();
  TensorList in(inputs.begin(), inputs.end());
  SmallVector<char, 3> batched(n), one_hot(n);
  bool any_one_hot = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (scope.one_hot(in[i])) {
      batched[i] = 1;
      if (op.batch.accepts_one_hot()) {
        one_hot[i] = 1;
        any_one_hot = true;
      } else {
        in[i] = scope.dense(in[i]);
      }
    } else {
      batched[i] = scope.batched(in[i]);
    }
  }
  BatchContext ctx(op, attrs, scope.size(), std::span<const Tensor>(in.begin(), in.end()),
                   std::span<const char>(batched.data(), n),
                   any_one_hot ? std::span<const char>(one_hot.data(), n) : std::span<const char>(), &scope);
  TensorList out;
  {
    BatchScope::Suspend suspend;
    out = op.batch(std::span<const Tensor>(in.begin(), in.end()), ctx);
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!out[i].defined()) continue;
    if (ctx.one_hot_output(static_cast<int>(i))) {
      scope.mark_one_hot(out[i]);
      continue;
    }
    if (out[i].rank() < 1 || out[i].shape()[0] != scope.size())
      throw std::logic_error("batching rule of " + op.name + " returned output " + std::to_string(i) + " of shape " +
                             out[i].shape().to_string() + " without the leading batch dimension " +
                             std::to_string(scope.size()));
    scope.mark(out[i]);
  }
  return out;
}

}  // namespace tapeflow

namespace tapeflow {
Shape logical_shape(const Tensor& t) {
  BatchScope* scope = active_scope;
  return scope ? scope->logical_shape(t) : t.shape();
}
}  // namespace tapeflow
