// Batched reverse pass (see batched_backward.h). Mirrors TapeState::backward with a leading batch
// dimension K on every gradient; each op's batched gradient is still written with tapeflow ops, so
// outer tapes record it and the result is differentiable.
#include "tape/autodiff/internal/batched_backward.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "tape/ops/array_ops.h"
#include "tape/ops/linalg_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::internal {
namespace {

enum class Rule { kNone, kPointwise, kScale, kAddSub, kMul, kSelect, kReduce, kMinMax, kMatMul };

Rule rule_for(const OpRecord& r) {
  if (r.custom_gradient || !r.op) return Rule::kNone;
  static const std::unordered_map<std::string, Rule> kTable = [] {
    std::unordered_map<std::string, Rule> t;
    for (const char* name :
         {"RealDiv", "Pow", "Maximum", "Minimum", "Identity", "ReadVariableOp", "Cast", "Reshape", "BroadcastTo",
          "SumToShape"})
      t.emplace(name, Rule::kPointwise);
    // Element-wise ops whose inputs all have the output's shape: the gradient of input j is
    // g ⊙ f_j, f_j independent of g (unary activations, and the activation-gradient ops that
    // their gradients emit, which double backward goes through).
    for (const char* name : {"Neg", "Square", "Sqrt", "Rsqrt", "Reciprocal", "Exp", "Log", "Abs", "Sign", "Sin", "Cos",
                             "Tanh", "Sigmoid", "Relu", "Elu", "LeakyRelu", "Softplus", "TanhGrad", "ReluGrad",
                             "LeakyReluGrad", "SigmoidGrad", "EluGrad"})
      t.emplace(name, Rule::kScale);
    t.emplace("AddV2", Rule::kAddSub);
    t.emplace("Sub", Rule::kAddSub);
    t.emplace("Mul", Rule::kMul);
    t.emplace("SelectV2", Rule::kSelect);
    t.emplace("Sum", Rule::kReduce);
    t.emplace("Mean", Rule::kReduce);
    t.emplace("Max", Rule::kMinMax);
    t.emplace("Min", Rule::kMinMax);
    t.emplace("MatMul", Rule::kMatMul);
    return t;
  }();
  auto it = kTable.find(r.op->name);
  return it == kTable.end() ? Rule::kNone : it->second;
}

// [k, 1 (rank - s.rank() times), s...]: s right-aligned to `rank` behind the batch dimension.
Shape padded(std::int64_t k, const Shape& s, int rank) {
  Shape out{k};
  for (int i = s.rank(); i < rank; ++i) out.push_back(1);
  for (std::int64_t d : s) out.push_back(d);
  return out;
}

Tensor reshape_to(const Tensor& t, const Shape& s) { return t.shape() == s ? t : reshape(t, s); }

const GradientFn& gradient_fn(const OpRecord& r) { return r.custom_gradient ? *r.custom_gradient : r.op->gradient; }

TensorList call_gradient(const OpRecord& r, std::span<const Shape> shapes, const Attrs& attrs,
                         std::span<const Tensor> g) {
  GradContext ctx(std::span<const Tensor>(r.saved_inputs), std::span<const Tensor>(r.saved_outputs), shapes,
                  std::span<const DType>(r.input_dtypes), attrs, r.op->name.c_str());
  return gradient_fn(r)(ctx, g);
}

// The op's own gradient on gradients padded to a common rank R: saved tensors broadcast against
// [K, 1.., out], and unbroadcast/sum_to_shape reduce to [K, 1.., in], reshaped to [K, in].
TensorList pointwise(const OpRecord& r, std::span<const Tensor> g, std::int64_t k) {
  int rank = 0;
  for (const Shape& s : r.input_shapes) rank = std::max(rank, s.rank());
  for (const Shape& s : r.output_shapes) rank = std::max(rank, s.rank());
  TensorList gp;
  for (std::size_t i = 0; i < g.size(); ++i) gp.push_back(reshape_to(g[i], padded(k, r.output_shapes[i], rank)));
  SmallVector<Shape, 3> shapes;
  for (const Shape& s : r.input_shapes) shapes.push_back(padded(k, s, rank));
  TensorList res = call_gradient(r, std::span<const Shape>(shapes.begin(), shapes.end()), r.attrs,
                                 std::span<const Tensor>(gp.begin(), gp.end()));
  for (std::size_t i = 0; i < res.size() && i < r.input_shapes.size(); ++i)
    if (res[i].defined()) res[i] = reshape_to(res[i], padded(k, r.input_shapes[i], r.input_shapes[i].rank()));
  return res;
}

// Element-wise op whose gradients are g ⊙ f_j (f_j from the saved tensors): the f_j are computed
// once, unbatched (the op's own gradient of ones), and broadcast against the K cotangents. An
// input without gradient (an activation-gradient op's features) has no f_j.
TensorList scale_factors(const OpRecord& r) {
  Tensor one = ones(r.output_shapes[0], r.output_dtypes[0]);
  return call_gradient(r, std::span<const Shape>(r.input_shapes.begin(), r.input_shapes.end()), r.attrs,
                       std::span<const Tensor>(&one, 1));
}

// kScale applies when every input has the output's shape (no broadcast to undo).
bool same_shapes(const OpRecord& r) {
  for (const Shape& s : r.input_shapes)
    if (s != r.output_shapes[0]) return false;
  return r.output_shapes.size() == 1;
}

// Binary broadcasting ops by hand, computing only the gradients that are needed: d(a±b) = (g, ±g),
// d(ab) = (g b, g a), where(c, a, b): (g ⊙ c, g ⊙ !c); each summed back to [K, input shape].
TensorList binary(const OpRecord& r, Rule rule, std::span<const Tensor> g, std::int64_t k, const bool needed[3]) {
  int rank = r.output_shapes[0].rank();
  const std::size_t first = rule == Rule::kSelect ? 1 : 0;  // where's condition has no gradient
  Tensor gp = reshape_to(g[0], padded(k, r.output_shapes[0], rank));
  Tensor mask;
  if (rule == Rule::kSelect)
    mask = where(r.saved_inputs[0], scalar(1.0, r.output_dtypes[0]), scalar(0.0, r.output_dtypes[0]));
  TensorList out(r.input_ids.size());
  for (std::size_t j = first; j < r.input_ids.size(); ++j) {
    if (!needed[j]) continue;
    Tensor t;
    switch (rule) {
      case Rule::kAddSub: t = (j == 1 && r.op->name == "Sub") ? negative(gp) : gp; break;
      case Rule::kMul: t = gp * r.saved_inputs[1 - j]; break;
      default: t = j == 1 ? gp * mask : gp - gp * mask; break;
    }
    const Shape& in = r.input_shapes[j];
    out[j] = reshape_to(sum_to_shape(t, padded(k, in, rank)), padded(k, in, in.rank()));
  }
  return out;
}

// Sum/Mean: the batch dimension shifts every reduced axis by one.
TensorList reduction(const OpRecord& r, std::span<const Tensor> g, std::int64_t k) {
  Attrs attrs = r.attrs;
  std::vector<std::int64_t> axes = r.attrs.get_ints("axes");
  for (auto& a : axes) ++a;
  attrs.set("axes", axes);
  Shape in = padded(k, r.input_shapes[0], r.input_shapes[0].rank());
  return call_gradient(r, std::span<const Shape>(&in, 1), attrs, g);
}

// Max/Min: the tie weights (indicator / count) depend on the forward values only, so they are
// computed once unbatched and multiply the batched gradient.
TensorList min_max(const OpRecord& r, std::span<const Tensor> g, std::int64_t k) {
  const Tensor &x = r.saved_inputs[0], &y = r.saved_outputs[0];
  std::vector<int> axes;
  for (auto a : r.attrs.get_ints("axes")) axes.push_back(static_cast<int>(a));
  Shape keep;
  for (int i = 0; i < x.rank(); ++i)
    keep.push_back(std::find(axes.begin(), axes.end(), i) != axes.end() ? 1 : x.shape()[i]);
  Tensor indicators = cast(equal(x, reshape_to(y, keep)), x.dtype());
  Tensor weights = indicators / reduce_sum(indicators, axes, true);
  return TensorList{reshape_to(g[0], padded(k, keep, keep.rank())) * weights};
}

// 2-D matmul: fold K into the rows where the batched gradient is the left operand (one GEMM),
// otherwise a broadcast batched product; only the gradients that are needed are computed.
TensorList matmul_rule(const OpRecord& r, std::span<const Tensor> g, std::int64_t k, const bool needed[3]) {
  if (r.input_shapes[0].rank() != 2 || r.input_shapes[1].rank() != 2) return pointwise(r, g, k);
  const Tensor &a = r.saved_inputs[0], &b = r.saved_inputs[1], &gy = g[0];
  const bool ta = r.attrs.get_bool("transpose_a"), tb = r.attrs.get_bool("transpose_b");
  const std::int64_t m = gy.shape()[1], n = gy.shape()[2];
  Tensor da, db;
  if (needed[0]) {
    if (!ta) {  // da [m, ka] = g op(b)ᵀ: rows of all K cotangents in one product
      Tensor flat = matmul(reshape(gy, Shape{k * m, n}), b, false, !tb);
      da = reshape(flat, padded(k, r.input_shapes[0], 2));
    } else {  // da [ka, m] = op(b) gᵀ
      da = matmul(b, gy, tb, true);
    }
  }
  if (needed[1]) {
    if (!tb)  // db [kb, n] = op(a)ᵀ g
      db = matmul(a, gy, !ta, false);
    else  // db [n, kb] = gᵀ op(a)
      db = matmul(gy, a, true, ta);
  }
  return TensorList{da, db};
}

struct Plan {
  std::size_t n_ops = 0;
  std::vector<char> active;                 // op on a path from a source to a target
  std::unordered_set<std::int64_t> reachable;  // ids reachable from a source
};

Plan make_plan(const TapeState& tape, std::span<const Tensor> targets, std::span<const std::int64_t> source_ids) {
  const auto& ops = tape.records();
  Plan p;
  p.n_ops = ops.size();
  p.reachable.insert(source_ids.begin(), source_ids.end());
  std::vector<char> relevant(p.n_ops, 0);
  for (std::size_t i = 0; i < p.n_ops; ++i) {
    const OpRecord& r = ops[i];
    for (std::int64_t id : r.input_ids)
      if (p.reachable.count(id)) {
        relevant[i] = 1;
        break;
      }
    if (relevant[i])
      for (std::int64_t id : r.output_ids) p.reachable.insert(id);
  }
  std::unordered_set<std::int64_t> needed;
  for (const Tensor& t : targets)
    if (p.reachable.count(t.id())) needed.insert(t.id());
  p.active.assign(p.n_ops, 0);
  for (std::size_t i = p.n_ops; i-- > 0;) {
    if (!relevant[i]) continue;
    const OpRecord& r = ops[i];
    if (std::none_of(r.output_ids.begin(), r.output_ids.end(), [&](std::int64_t id) { return needed.count(id); }))
      continue;
    p.active[i] = 1;
    for (std::int64_t id : r.input_ids)
      if (p.reachable.count(id)) needed.insert(id);
  }
  return p;
}

}  // namespace

TensorList BatchedCache::get(const OpRecord& r, const std::function<TensorList()>& make) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = scales_.find(&r);
    if (it != scales_.end()) return it->second;
  }
  TensorList t = make();  // outside the lock: two threads may both compute it, with the same result
  std::lock_guard<std::mutex> lock(mutex_);
  return scales_.try_emplace(&r, t).first->second;
}

std::string first_unbatched_op(const TapeState& tape, std::span<const Tensor> targets,
                               std::span<const std::int64_t> source_ids) {
  Plan p = make_plan(tape, targets, source_ids);
  for (std::size_t i = p.n_ops; i-- > 0;)
    if (p.active[i] && rule_for(tape.records()[i]) == Rule::kNone) {
      const OpRecord& r = tape.records()[i];
      return r.custom_gradient ? std::string("CustomGradient") : r.op->name;
    }
  return {};
}

std::vector<Tensor> batched_backward(const TapeState& tape, std::span<const Tensor> targets,
                                     std::span<const Tensor> seeds, std::span<const std::int64_t> source_ids,
                                     const BatchedOpHook& hook, std::int64_t one_hot_offset, BatchedCache* cache) {
  auto scales_of = [cache](const OpRecord& r) {
    return cache ? cache->get(r, [&r] { return scale_factors(r); }) : scale_factors(r);
  };
  if (seeds.size() != targets.size() || seeds.empty())
    throw std::logic_error("batched_backward: " + std::to_string(seeds.size()) + " seeds for " +
                           std::to_string(targets.size()) + " targets");
  const std::int64_t k = seeds[0].rank() > 0 ? seeds[0].shape()[0] : 0;
  Plan p = make_plan(tape, targets, source_ids);
  const auto& ops = tape.records();
  std::unordered_map<std::int64_t, Tensor> grads;
  // one_hot_offset >= 0: gradients of the form seed ⊙ s (s [b, n], unbatched) are kept as s until an
  // op needs them dense; element-wise scales and same-shape adds keep the form, and a 2-D matmul
  // turns it into a broadcast product (da[k, i, :] = s[i, o + k] op(b)ᵀ[o + k, :], o the offset)
  // instead of a GEMM.
  std::unordered_map<std::int64_t, Tensor> diag;
  const Tensor& pattern = seeds[0];
  auto accumulate = [&](std::int64_t id, const Tensor& g) {
    auto [it, inserted] = grads.try_emplace(id, g);
    if (!inserted) it->second = add(it->second, g);
    auto d = diag.find(id);
    if (d != diag.end()) {
      it->second = add(it->second, pattern * d->second);
      diag.erase(d);
    }
  };
  auto add_diag = [&](std::int64_t id, const Tensor& scale) {
    if (grads.count(id)) return accumulate(id, pattern * scale);
    auto [it, inserted] = diag.try_emplace(id, scale);
    if (!inserted) it->second = add(it->second, scale);
  };
  auto materialize = [&](std::int64_t id) {
    auto d = diag.find(id);
    if (d == diag.end()) return;
    Tensor dense = pattern * d->second;
    diag.erase(d);
    accumulate(id, dense);
  };
  // Propagates a diagonal gradient through op r; false if r needs it dense.
  auto try_diag = [&](const OpRecord& r, const Tensor& sc, const bool needed[3]) {
    const Shape& out = r.output_shapes[0];
    switch (rule_for(r)) {
      case Rule::kScale: {
        if (!same_shapes(r)) return false;
        const TensorList f = scales_of(r);
        for (std::size_t j = 0; j < r.input_ids.size() && j < f.size(); ++j)
          if (needed[j] && f[j].defined()) add_diag(r.input_ids[j], sc * f[j]);
        return true;
      }
      case Rule::kAddSub:
        for (int j = 0; j < 2; ++j)
          if (needed[j] && r.input_shapes[static_cast<std::size_t>(j)] != out) return false;
        for (int j = 0; j < 2; ++j)
          if (needed[j]) add_diag(r.input_ids[static_cast<std::size_t>(j)], j == 1 && r.op->name == "Sub" ? negative(sc) : sc);
        return true;
      case Rule::kMatMul: {
        if (needed[1] || !needed[0] || r.attrs.get_bool("transpose_a") || r.input_shapes[0].rank() != 2 ||
            r.input_shapes[1].rank() != 2)
          return false;
        const Tensor& b = r.saved_inputs[1];
        Tensor bt = r.attrs.get_bool("transpose_b") ? b : transpose(b);  // op(b)ᵀ [n, in]
        const std::int64_t rows = out[0], n = out[1], in = bt.shape()[1];
        Tensor st = transpose(sc);  // [n, rows]
        if (k != n) {  // this chunk's columns only
          st = slice(st, {one_hot_offset, 0}, {k, rows});
          bt = slice(bt, {one_hot_offset, 0}, {k, in});
        }
        accumulate(r.input_ids[0], reshape(st, Shape{k, rows, 1}) * reshape(bt, Shape{k, 1, in}));
        return true;
      }
      default: return false;
    }
  };
  for (std::size_t t = 0; t < targets.size(); ++t) {
    if (seeds[t].shape() != padded(k, targets[t].shape(), targets[t].rank()))
      throw std::logic_error("batched_backward: seed of shape " + seeds[t].shape().to_string() + " for target " +
                             targets[t].shape().to_string());
    if (!p.reachable.count(targets[t].id())) continue;
    if (one_hot_offset >= 0 && targets.size() == 1 && targets[0].rank() == 2 &&
        one_hot_offset + k <= targets[0].shape()[1])
      diag.emplace(targets[t].id(), ones(targets[t].shape(), targets[t].dtype()));
    else
      accumulate(targets[t].id(), seeds[t]);
  }
  std::unordered_set<std::int64_t> keep(source_ids.begin(), source_ids.end());
  for (std::size_t i = p.n_ops; i-- > 0;) {
    if (!p.active[i]) continue;
    const OpRecord& r = ops[i];
    bool needed[3] = {false, false, false};
    for (std::size_t j = 0; j < r.input_ids.size() && j < 3; ++j)
      needed[j] = p.reachable.count(r.input_ids[j]) != 0 && is_floating(r.input_dtypes[j]);
    if (!diag.empty()) {
      for (std::int64_t id : r.output_ids) {
        auto d = diag.find(id);
        if (d == diag.end()) continue;
        if (r.output_ids.size() == 1 && !hook && try_diag(r, d->second, needed)) {
          if (!keep.count(id)) diag.erase(id);
          break;
        }
        materialize(id);
        break;
      }
      if (r.output_ids.size() == 1 && !grads.count(r.output_ids[0])) continue;
    }
    TensorList out_grads;
    bool any = false;
    for (std::size_t j = 0; j < r.output_ids.size(); ++j) {
      auto it = grads.find(r.output_ids[j]);
      any = any || it != grads.end();
      out_grads.push_back(it != grads.end() ? it->second
                                            : zeros(padded(k, r.output_shapes[j], r.output_shapes[j].rank()),
                                                    r.output_dtypes[j]));
    }
    if (!any) continue;
    std::span<const Tensor> g(out_grads.begin(), out_grads.end());
    TensorList in_grads;
    const Rule rule = rule_for(r);
    switch (rule) {
      case Rule::kPointwise: in_grads = pointwise(r, g, k); break;
      case Rule::kScale:
        if (!same_shapes(r)) {
          in_grads = pointwise(r, g, k);
          break;
        }
        in_grads = scales_of(r);
        for (std::size_t j = 0; j < in_grads.size(); ++j)
          if (in_grads[j].defined()) in_grads[j] = j < 3 && needed[j] ? g[0] * in_grads[j] : Tensor();
        break;
      case Rule::kAddSub:
      case Rule::kMul:
      case Rule::kSelect: in_grads = binary(r, rule, g, k, needed); break;
      case Rule::kReduce: in_grads = reduction(r, g, k); break;
      case Rule::kMinMax: in_grads = min_max(r, g, k); break;
      case Rule::kMatMul: in_grads = matmul_rule(r, g, k, needed); break;
      case Rule::kNone: {
        if (k != 1)
          throw std::logic_error("batched_backward: op " + (r.custom_gradient ? std::string("CustomGradient") : r.op->name) +
                                 " has no batched gradient rule");
        TensorList squeezed;
        for (std::size_t j = 0; j < out_grads.size(); ++j) squeezed.push_back(reshape_to(out_grads[j], r.output_shapes[j]));
        in_grads = call_gradient(r, std::span<const Shape>(r.input_shapes.begin(), r.input_shapes.end()), r.attrs,
                                 std::span<const Tensor>(squeezed.begin(), squeezed.end()));
        for (std::size_t j = 0; j < in_grads.size() && j < r.input_shapes.size(); ++j)
          if (in_grads[j].defined()) in_grads[j] = reshape_to(in_grads[j], padded(1, r.input_shapes[j], r.input_shapes[j].rank()));
        break;
      }
    }
    if (in_grads.size() != r.input_ids.size())
      throw std::logic_error("batched gradient of " + r.op->name + " returned " + std::to_string(in_grads.size()) +
                             " gradients for " + std::to_string(r.input_ids.size()) + " inputs");
    for (std::size_t j = 0; j < in_grads.size(); ++j) {
      Tensor& gj = in_grads[j];
      if (!gj.defined() || !p.reachable.count(r.input_ids[j]) || !is_floating(r.input_dtypes[j])) {
        gj = Tensor();
        continue;
      }
      const Shape want = padded(k, r.input_shapes[j], r.input_shapes[j].rank());
      if (gj.shape() != want)
        throw std::logic_error("batched gradient of " + r.op->name + " returned shape " + gj.shape().to_string() +
                               " for input " + std::to_string(j) + ", expected " + want.to_string());
      if (gj.dtype() != r.input_dtypes[j]) gj = convert(gj, r.input_dtypes[j]);
    }
    if (hook) hook(r, i, std::span<const Tensor>(in_grads.begin(), in_grads.end()));
    for (std::size_t j = 0; j < in_grads.size(); ++j)
      if (in_grads[j].defined()) accumulate(r.input_ids[j], in_grads[j]);
    for (std::int64_t id : r.output_ids)
      if (!keep.count(id)) grads.erase(id);
  }
  std::vector<Tensor> result;
  for (std::int64_t id : source_ids) materialize(id);
  for (std::int64_t id : source_ids) {
    auto it = grads.find(id);
    result.push_back(it == grads.end() ? Tensor() : it->second);
  }
  return result;
}

}  // namespace tapeflow::internal
