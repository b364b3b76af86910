// Ready-made batching rules (see batching_rules.h).
#include "tape/ops/internal/batching_rules.h"

#include <algorithm>
#include <string>

#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/runtime/execute.h"

namespace tapeflow::batching {

Shape padded(std::int64_t k, const Shape& s, int rank) {
  Shape out{k};
  for (int i = s.rank(); i < rank; ++i) out.push_back(1);
  for (std::int64_t d : s) out.push_back(d);
  return out;
}

namespace {

Tensor reshape_to(const Tensor& t, const Shape& s) { return t.shape() == s ? t : reshape(t, s); }

Shape with_leading(std::int64_t k, const Shape& s) { return padded(k, s, s.rank()); }

// Unbatched input i broadcast to [K, s]; batched ones dense.
Tensor dense_input(std::span<const Tensor> in, const BatchContext& ctx, int i) {
  if (ctx.batched(i)) return ctx.dense(i);
  return broadcast_to(in[static_cast<std::size_t>(i)], with_leading(ctx.size(), in[static_cast<std::size_t>(i)].shape()));
}

int max_rank(const BatchContext& ctx) {
  int rank = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) rank = std::max(rank, ctx.shape(i).rank());
  return rank;
}

TensorList elementwise_dense(std::span<const Tensor> in, const BatchContext& ctx) {
  const int rank = max_rank(ctx);
  TensorList args;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor t = ctx.one_hot(i) ? ctx.dense(i) : in[static_cast<std::size_t>(i)];
    args.push_back(ctx.batched(i) ? reshape_to(t, padded(ctx.size(), ctx.shape(i), rank)) : t);
  }
  return run(ctx, std::span<const Tensor>(args.begin(), args.end()), ctx.attrs());
}

// The one-hot path applies when every batched input is one-hot and in `linear`, every input of
// `linear` is batched if `additive`, and the output keeps the one-hot shape.
bool one_hot_applies(const BatchContext& ctx, std::uint32_t linear, bool additive) {
  Shape out;
  Shape one_hot_shape;
  bool any = false;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const bool in_linear = (linear >> i) & 1u;
    if (ctx.batched(i)) {
      if (!ctx.one_hot(i) || !in_linear) return false;
      one_hot_shape = ctx.shape(i);
      any = true;
    } else if (additive && in_linear) {
      return false;
    }
    out = i == 0 ? ctx.shape(i) : broadcast_shapes(out, ctx.shape(i), ctx.op().name.c_str());
  }
  return any && out == one_hot_shape;
}

}  // namespace

Tensor at_rank(std::span<const Tensor> inputs, const BatchContext& ctx, int i, int rank) {
  const Tensor& t = inputs[static_cast<std::size_t>(i)];
  return ctx.batched(i) ? reshape_to(t, padded(ctx.size(), ctx.shape(i), rank)) : t;
}

TensorList run(const BatchContext& ctx, std::span<const Tensor> inputs, const Attrs& attrs) {
  return execute(ctx.op(), inputs, attrs);
}

BatchRule elementwise() { return elementwise_dense; }

BatchRule linear_elementwise(std::uint32_t linear, bool additive) {
  return BatchRule([linear, additive](std::span<const Tensor> in, const BatchContext& ctx) {
    if (one_hot_applies(ctx, linear, additive)) {
      TensorList out = run(ctx, in, ctx.attrs());
      ctx.mark_one_hot_output(0);
      return out;
    }
    return elementwise_dense(in, ctx);
  }, true);
}

BatchRule unary() {
  return [](std::span<const Tensor> in, const BatchContext& ctx) { return run(ctx, in, ctx.attrs()); };
}

BatchRule same_shape(int linear) {
  return BatchRule([linear](std::span<const Tensor> in, const BatchContext& ctx) {
    bool only_linear = linear >= 0;
    for (int i = 0; i < ctx.num_inputs(); ++i)
      if (ctx.batched(i) && i != linear) only_linear = false;
    if (only_linear) {
      const auto j = static_cast<std::size_t>(linear);
      if (ctx.one_hot(linear)) {  // linear in it: the op maps the scale, the pattern stays
        TensorList out = run(ctx, in, ctx.attrs());
        ctx.mark_one_hot_output(0);
        return out;
      }
      // op(..., x, ...) = x ⊙ op(..., 1, ...): the factor is computed once, per example.
      TensorList args(in.begin(), in.end());
      args[j] = ones(ctx.shape(linear), in[j].dtype());
      Tensor factor = run(ctx, std::span<const Tensor>(args.begin(), args.end()), ctx.attrs())[0];
      return TensorList{in[j] * factor};
    }
    TensorList args;
    for (int i = 0; i < ctx.num_inputs(); ++i) args.push_back(dense_input(in, ctx, i));
    return run(ctx, std::span<const Tensor>(args.begin(), args.end()), ctx.attrs());
  }, linear >= 0);
}

BatchRule reduction() {
  return [](std::span<const Tensor> in, const BatchContext& ctx) {
    std::vector<std::int64_t> axes = ctx.attrs().get_ints("axes");
    for (auto& a : axes) ++a;
    Attrs attrs = ctx.attrs();
    attrs.set("axes", axes);
    return run(ctx, in, attrs);
  };
}

BatchRule axis_attr(const char* attr, std::initializer_list<int> never_batched) {
  std::vector<int> fixed(never_batched);
  return [attr, fixed](std::span<const Tensor> in, const BatchContext& ctx) {
    for (int i : fixed)
      if (i < ctx.num_inputs() && ctx.batched(i)) return sequential(in, ctx);
    const int rank = ctx.shape(0).rank();
    const int axis = normalize_axis(static_cast<int>(ctx.attrs().get_int(attr)), rank, ctx.op().name.c_str());
    Attrs attrs = ctx.attrs();
    attrs.set(attr, std::int64_t{axis + 1});
    TensorList args;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const bool is_fixed = std::find(fixed.begin(), fixed.end(), i) != fixed.end();
      args.push_back(is_fixed ? in[static_cast<std::size_t>(i)] : dense_input(in, ctx, i));
    }
    return run(ctx, std::span<const Tensor>(args.begin(), args.end()), attrs);
  };
}

BatchRule shape_attr(const char* attr) {
  return [attr](std::span<const Tensor> in, const BatchContext& ctx) {
    const Shape target(ctx.attrs().get_ints(attr));
    const Shape s = ctx.shape(0);
    const int rank = std::max(s.rank(), target.rank());
    Attrs attrs = ctx.attrs();
    attrs.set(attr, padded(ctx.size(), target, rank).to_vector());
    const Tensor x = reshape_to(in[0], padded(ctx.size(), s, rank));
    Tensor y = run(ctx, std::span<const Tensor>(&x, 1), attrs)[0];
    return TensorList{reshape_to(y, with_leading(ctx.size(), target))};
  };
}

BatchRule fold_into_axis0(std::initializer_list<int> inputs) {
  std::vector<int> folded(inputs);
  return [folded](std::span<const Tensor> in, const BatchContext& ctx) {
    for (int i = 0; i < ctx.num_inputs(); ++i)
      if (ctx.batched(i) && std::find(folded.begin(), folded.end(), i) == folded.end()) return sequential(in, ctx);
    const std::int64_t k = ctx.size();
    TensorList args(in.begin(), in.end());
    for (int i : folded) {
      if (i >= ctx.num_inputs()) continue;
      const Shape s = ctx.shape(i);
      if (s.rank() < 1) return sequential(in, ctx);
      Shape merged = s;
      merged[0] *= k;
      args[static_cast<std::size_t>(i)] = reshape(dense_input(in, ctx, i), merged);
    }
    TensorList out = run(ctx, std::span<const Tensor>(args.begin(), args.end()), ctx.attrs());
    for (Tensor& y : out) {
      if (!y.defined()) continue;
      Shape split{k};
      for (int d = 0; d < y.rank(); ++d) split.push_back(d == 0 ? y.shape()[0] / k : y.shape()[d]);
      y = reshape(y, split);
    }
    return out;
  };
}

TensorList sequential(std::span<const Tensor> inputs, const BatchContext& ctx) {
  const std::int64_t k = ctx.size();
  std::vector<std::vector<Tensor>> parts(inputs.size());
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.batched(i)) parts[static_cast<std::size_t>(i)] = unstack(ctx.dense(i), 0);
  std::vector<std::vector<Tensor>> outs;
  for (std::int64_t j = 0; j < k; ++j) {
    TensorList args;
    for (int i = 0; i < ctx.num_inputs(); ++i)
      args.push_back(ctx.batched(i) ? parts[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]
                                    : inputs[static_cast<std::size_t>(i)]);
    TensorList y = run(ctx, std::span<const Tensor>(args.begin(), args.end()), ctx.attrs());
    if (outs.empty()) outs.resize(y.size());
    for (std::size_t o = 0; o < y.size(); ++o) outs[o].push_back(y[o]);
  }
  TensorList result;
  for (auto& o : outs) result.push_back(stack(o, 0));
  return result;
}

}  // namespace tapeflow::batching
