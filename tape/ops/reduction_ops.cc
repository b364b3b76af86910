// Reductions: forward kernels and gradients.
#include "tape/ops/reduction_ops.h"

#include <algorithm>

#include "tape/kernels/reduce.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/runtime/batching.h"
#include "tape/ops/math_ops.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

namespace {

std::vector<int> all_axes(const Tensor& x) {
  const int rank = logical_rank(x);
  std::vector<int> axes(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) axes[static_cast<std::size_t>(i)] = i;
  return axes;
}

Tensor reduce(const char* opname, const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  std::vector<std::int64_t> norm;
  const Shape xs = logical_shape(x);  // per example inside a vectorized backward pass
  for (int a : axes) {
    int n = normalize_axis(a, xs.rank(), opname);
    if (std::find(norm.begin(), norm.end(), n) != norm.end())
      throw std::invalid_argument(std::string(opname) + ": axis " + std::to_string(a) + " repeated for shape " +
                                  xs.to_string());
    norm.push_back(n);
  }
  std::sort(norm.begin(), norm.end());
  return execute1(op_def(opname), {x}, Attrs().set("axes", norm).set("keepdims", keepdims));
}

Shape reduced_shape(const Shape& s, std::uint32_t mask, bool keepdims) {
  Shape out;
  for (int i = 0; i < s.rank(); ++i) {
    if (mask & (1u << i)) {
      if (keepdims) out.push_back(1);
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

template <typename Kernel>
TensorList reduce_forward(const char* name, std::span<const Tensor> in, const Attrs& at, Kernel k, bool mean,
                          bool empty_is_zero) {
  ops_internal::check_arity(name, in, 1);
  const Tensor& x = in[0];
  const std::uint32_t mask = ops_internal::axes_mask(name, at.get_ints("axes"), x.shape());
  Shape sy = reduced_shape(x.shape(), mask, at.get_bool("keepdims"));
  Tensor y = Tensor::empty(sy, x.dtype());
  ops_internal::dispatch_kind<ops_internal::Kinds::kNumeric>(name, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (x.num_elements() == 0) {  // TF: the sum (and here the mean) of nothing is 0; max/min have no value
      if (!empty_is_zero && y.num_elements() != 0)
        throw std::invalid_argument(std::string(name) + ": empty reduction of shape " + x.shape().to_string());
      T* p = y.mutable_data<T>();
      std::fill(p, p + y.num_elements(), T(0));
      return;
    }
    k(x.data<T>(), x.shape(), mask, y.mutable_data<T>());
    if (mean) {
      std::int64_t count = sy.num_elements() ? x.num_elements() / std::max<std::int64_t>(sy.num_elements(), 1) : 0;
      T* p = y.mutable_data<T>();
      for (std::int64_t i = 0; i < sy.num_elements(); ++i) p[i] = count ? static_cast<T>(p[i] / static_cast<T>(count)) : T(0);
    }
  });
  return {y};
}

// g reshaped so that it broadcasts against the input (reduced axes as size 1).
Tensor keepdims_grad(const GradContext& c, const Tensor& g) {
  Shape keep = reduced_shape(c.input_shape(0), ops_internal::axes_mask("reduce", c.attrs().get_ints("axes"), c.input_shape(0)), true);
  return reshape(g, keep);
}

TensorList minmax_grad(const GradContext& c, std::span<const Tensor> g) {
  const Tensor& x = c.input(0);
  Tensor y = keepdims_grad(c, c.output(0));
  Tensor indicators = cast(equal(x, y), x.dtype());
  Tensor count = reshape(reduce_sum(indicators, std::vector<int>(c.attrs().get_ints("axes").begin(), c.attrs().get_ints("axes").end()), true),
                         y.shape());
  return TensorList{indicators / count * keepdims_grad(c, g[0])};
}

}  // namespace

Tensor reduce_sum(const Tensor& x) { return reduce("Sum", x, all_axes(x), false); }
Tensor reduce_sum(const Tensor& x, const std::vector<int>& axes, bool keepdims) { return reduce("Sum", x, axes, keepdims); }
Tensor reduce_sum(const Tensor& x, std::nullopt_t, bool keepdims) { return reduce("Sum", x, all_axes(x), keepdims); }
Tensor reduce_mean(const Tensor& x) { return reduce("Mean", x, all_axes(x), false); }
Tensor reduce_mean(const Tensor& x, const std::vector<int>& axes, bool keepdims) { return reduce("Mean", x, axes, keepdims); }
Tensor reduce_mean(const Tensor& x, std::nullopt_t, bool keepdims) { return reduce("Mean", x, all_axes(x), keepdims); }
Tensor reduce_max(const Tensor& x) { return reduce("Max", x, all_axes(x), false); }
Tensor reduce_max(const Tensor& x, const std::vector<int>& axes, bool keepdims) { return reduce("Max", x, axes, keepdims); }
Tensor reduce_max(const Tensor& x, std::nullopt_t, bool keepdims) { return reduce("Max", x, all_axes(x), keepdims); }
Tensor reduce_min(const Tensor& x) { return reduce("Min", x, all_axes(x), false); }
Tensor reduce_min(const Tensor& x, const std::vector<int>& axes, bool keepdims) { return reduce("Min", x, axes, keepdims); }
Tensor reduce_min(const Tensor& x, std::nullopt_t, bool keepdims) { return reduce("Min", x, all_axes(x), keepdims); }

void register_reduction_ops(OpRegistry& r) {
  using In = std::span<const Tensor>;
  using G = std::span<const Tensor>;
  using C = const GradContext&;
  auto sum_k = [](const auto* x, const Shape& s, std::uint32_t m, auto* y) { kernels::reduce_sum(x, s, m, y); };
  auto max_k = [](const auto* x, const Shape& s, std::uint32_t m, auto* y) { kernels::reduce_max(x, s, m, y); };
  auto min_k = [](const auto* x, const Shape& s, std::uint32_t m, auto* y) { kernels::reduce_min(x, s, m, y); };
  r.add({"Sum", [sum_k](In in, const Attrs& a) { return reduce_forward("reduce_sum", in, a, sum_k, false, true); },
         [](C c, G g) { return TensorList{broadcast_to(keepdims_grad(c, g[0]), c.input_shape(0))}; }, kSaveNone, batching::reduction(),
         false, ops_internal::check_axes_attrs_of("Sum")});
  r.add({"Mean", [sum_k](In in, const Attrs& a) { return reduce_forward("reduce_mean", in, a, sum_k, true, true); },
         [](C c, G g) {
           const Shape kept = reduced_shape(
               c.input_shape(0), ops_internal::axes_mask("reduce_mean", c.attrs().get_ints("axes"), c.input_shape(0)), true);
           double count = static_cast<double>(c.input_shape(0).num_elements()) /
                          static_cast<double>(std::max<std::int64_t>(kept.num_elements(), 1));
           return TensorList{broadcast_to(keepdims_grad(c, g[0]), c.input_shape(0)) / count};
         },
         kSaveNone, batching::reduction(), false, ops_internal::check_axes_attrs_of("Mean")});
  r.add({"Max", [max_k](In in, const Attrs& a) { return reduce_forward("reduce_max", in, a, max_k, false, false); },
         minmax_grad, kSaveAll, batching::reduction(), false, ops_internal::check_axes_attrs_of("Max")});
  r.add({"Min", [min_k](In in, const Attrs& a) { return reduce_forward("reduce_min", in, a, min_k, false, false); },
         minmax_grad, kSaveAll, batching::reduction(), false, ops_internal::check_axes_attrs_of("Min")});
}

}  // namespace tapeflow
