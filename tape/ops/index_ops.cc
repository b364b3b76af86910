// Index ops: forward kernels and gradients.
#include "tape/ops/index_ops.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tape/kernels/transform.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/ops/math_ops.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

namespace {

using ops_internal::describe;

// Calls f(I{}) with I the index type of `t`. Errors: std::invalid_argument unless int32/int64.
template <typename F>
decltype(auto) dispatch_index(const char* op, const char* what, const Tensor& t, F&& f) {
  if (t.dtype() == DType::kInt32) return f(std::int32_t{});
  if (t.dtype() == DType::kInt64) return f(std::int64_t{});
  throw std::invalid_argument(std::string(op) + ": " + what + " must be int32 or int64, got " + describe(t));
}

// Flat copy of integer ids as int64 (ids are small compared with the data they index).
std::vector<std::int64_t> ids_of(const Tensor& t) { return t.to_vector<std::int64_t>(); }

// The int64 index/id tensor viewed as a vector (an int tensor: never differentiated, not recorded).
Tensor flat(const Tensor& t) { return t.with_shape(Shape{t.num_elements()}); }

TensorList gather_forward(std::span<const Tensor> in, const Attrs& a) {
  ops_internal::check_arity("gather", in, 2);
  const Tensor &params = in[0], &indices = in[1];
  if (params.rank() == 0)
    throw std::invalid_argument("gather: params must have rank >= 1, got " + describe(params));
  const int axis = ops_internal::axis_attr("gather", a);
  if (axis < -params.rank() || axis >= params.rank())
    throw std::invalid_argument("gather: axis " + std::to_string(axis) + " out of range for params " +
                                describe(params));
  const int ax = axis < 0 ? axis + params.rank() : axis;
  const Shape& sp = params.shape();
  Shape sy;
  for (int i = 0; i < ax; ++i) sy.push_back(sp[i]);
  for (std::int64_t d : indices.shape()) sy.push_back(d);
  for (int i = ax + 1; i < sp.rank(); ++i) sy.push_back(sp[i]);
  Tensor y = Tensor::empty(sy, params.dtype());
  dispatch_index("gather", "indices", indices, [&](auto itag) {
    using I = decltype(itag);
    const I* idx = indices.data<I>();
    for (std::int64_t j = 0; j < indices.num_elements(); ++j)
      if (idx[j] < 0 || idx[j] >= sp[ax])
        throw std::invalid_argument("gather: index " + std::to_string(idx[j]) + " out of range [0, " +
                                    std::to_string(sp[ax]) + ") for axis " + std::to_string(axis) + " of params " +
                                    sp.to_string());
    dispatch_dtype(params.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::gather(params.data<T>(), sp, idx, indices.num_elements(), ax, y.mutable_data<T>());
    });
  });
  return {y};
}

// d params = scatter-add of g's slices back to the gathered positions:
// g [outer, n, inner] -> [n, outer*inner] -> segment sum by index -> [p_axis, outer, inner] -> params.
TensorList gather_grad(const GradContext& c, std::span<const Tensor> g) {
  const Shape& sp = c.input_shape(0);
  const Tensor& indices = c.input(1);
  const int axis = static_cast<int>(c.attrs().get_int("axis"));
  const int ax = axis < 0 ? axis + sp.rank() : axis;
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < ax; ++i) outer *= sp[i];
  for (int i = ax + 1; i < sp.rank(); ++i) inner *= sp[i];
  const std::int64_t n = indices.num_elements();
  Tensor t = reshape(g[0], Shape{outer, n, inner});
  if (outer > 1) t = transpose(t, {1, 0, 2});
  Tensor s = unsorted_segment_sum(reshape(t, Shape{n, outer * inner}), flat(indices), sp[ax]);
  s = reshape(s, Shape{sp[ax], outer, inner});
  if (outer > 1) s = transpose(s, {1, 0, 2});
  return TensorList{reshape(s, sp), Tensor()};
}

TensorList segment_sum_forward(std::span<const Tensor> in, const Attrs& a) {
  ops_internal::check_arity("unsorted_segment_sum", in, 2);
  const Tensor &data = in[0], &ids = in[1];
  const std::int64_t num_segments = a.get_int("num_segments");
  const Shape& sd = data.shape();
  bool prefix = ids.rank() <= sd.rank();
  for (int i = 0; prefix && i < ids.rank(); ++i) prefix = ids.shape()[i] == sd[i];
  if (!prefix || num_segments < 0)
    throw std::invalid_argument("unsorted_segment_sum: segment_ids " + describe(ids) +
                                " must be a prefix of data " + describe(data) + " and num_segments (" +
                                std::to_string(num_segments) + ") >= 0");
  Shape sy{num_segments};
  std::int64_t row_size = 1;
  for (int i = ids.rank(); i < sd.rank(); ++i) {
    sy.push_back(sd[i]);
    row_size *= sd[i];
  }
  Tensor y = Tensor::empty(sy, data.dtype());
  dispatch_index("unsorted_segment_sum", "segment_ids", ids, [&](auto itag) {
    using I = decltype(itag);
    ops_internal::dispatch_kind<ops_internal::Kinds::kNumeric>("unsorted_segment_sum", data.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>)
        kernels::unsorted_segment_sum(data.data<T>(), ids.num_elements(), row_size, ids.data<I>(), num_segments,
                                      y.mutable_data<T>());
    });
  });
  return {y};
}

// d data = g[ids] (TF's _GatherDropNegatives: rows whose id is negative get 0).
TensorList segment_sum_grad(const GradContext& c, std::span<const Tensor> g) {
  const Tensor& ids = c.input(1);
  std::vector<std::int64_t> v = ids_of(ids);
  bool negative = false;
  for (auto& id : v)
    if (id < 0) {
      negative = true;
      id = 0;
    }
  if (!negative) return TensorList{gather(g[0], ids, 0), Tensor()};
  Tensor gathered = gather(g[0], constant(v, ids.shape()), 0);
  std::vector<bool> keep;
  for (std::int64_t id : ids_of(ids)) keep.push_back(id >= 0);
  Shape mask_shape = ids.shape();
  while (mask_shape.rank() < c.input_shape(0).rank()) mask_shape.push_back(1);
  return TensorList{where(constant(keep, mask_shape), gathered, scalar(0.0, gathered.dtype())), Tensor()};
}

// Batched data [K, ids..., rest...]: K moves behind the id axes, the op runs once, K moves back.
TensorList segment_sum_batch(std::span<const Tensor> in, const BatchContext& c) {
  if (c.batched(1)) return batching::sequential(in, c);  // ids never carry cotangents
  const int ids_rank = in[1].rank(), rank = c.shape(0).rank() + 1;
  std::vector<int> perm;
  for (int i = 1; i <= ids_rank; ++i) perm.push_back(i);
  perm.push_back(0);
  for (int i = ids_rank + 1; i < rank; ++i) perm.push_back(i);
  const Tensor args[2] = {transpose(in[0], perm), in[1]};
  Tensor y = batching::run(c, args, c.attrs())[0];  // [num_segments, K, rest...]
  std::vector<int> back{1, 0};
  for (int i = 2; i < y.rank(); ++i) back.push_back(i);
  return {transpose(y, back)};
}

TensorList one_hot_forward(std::span<const Tensor> in, const Attrs& a) {
  ops_internal::check_arity("one_hot", in, 1);
  const Tensor& indices = in[0];
  const std::int64_t depth = a.get_int("depth");
  if (depth < 0) throw std::invalid_argument("one_hot: depth must be >= 0, got " + std::to_string(depth));
  Shape sy = indices.shape();
  sy.push_back(depth);
  const double on = a.get_float("on"), off = a.get_float("off");
  Tensor y = Tensor::empty(sy, a.get_dtype("dtype"));
  dispatch_index("one_hot", "indices", indices, [&](auto itag) {
    using I = decltype(itag);
    dispatch_dtype(y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        bool* out = y.mutable_data<bool>();
        const I* idx = indices.data<I>();
        std::fill(out, out + sy.num_elements(), off != 0);
        for (std::int64_t i = 0; i < indices.num_elements(); ++i)
          if (idx[i] >= 0 && idx[i] < depth) out[i * depth + static_cast<std::int64_t>(idx[i])] = on != 0;
      } else {
        kernels::one_hot(indices.data<I>(), indices.num_elements(), depth, static_cast<T>(on), static_cast<T>(off),
                         y.mutable_data<T>());
      }
    });
  });
  return {y};
}

// arg-max (is_max) or arg-min along one axis; x viewed as [outer, dim, inner].
TensorList arg_forward(const char* name, std::span<const Tensor> in, const Attrs& a, bool is_max) {
  ops_internal::check_arity(name, in, 1);
  const Tensor& x = in[0];
  const int axis = ops_internal::axis_attr(name, a);
  if (x.rank() == 0 || axis < -x.rank() || axis >= x.rank() || x.shape()[axis < 0 ? axis + x.rank() : axis] == 0)
    throw std::invalid_argument(std::string(name) + ": axis " + std::to_string(axis) +
                                " must name a non-empty axis of the input, got " + describe(x));
  const int ax = axis < 0 ? axis + x.rank() : axis;
  const Shape& sx = x.shape();
  Shape sy;
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < sx.rank(); ++i) {
    if (i != ax) sy.push_back(sx[i]);
    if (i < ax) outer *= sx[i];
    if (i > ax) inner *= sx[i];
  }
  const std::int64_t dim = sx[ax];
  Tensor y = Tensor::empty(sy, DType::kInt64);
  std::int64_t* out = y.mutable_data<std::int64_t>();
  ops_internal::dispatch_kind<ops_internal::Kinds::kNumeric>(name, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        const T* col = p + o * dim * inner + i;
        std::int64_t best = 0;
        for (std::int64_t d = 1; d < dim; ++d) {
          const T v = col[d * inner], b = col[best * inner];
          bool better = is_max ? v > b : v < b;
          if constexpr (std::is_floating_point_v<T>) better = !std::isnan(b) && (better || std::isnan(v));
          if (better) best = d;
        }
        out[o * inner + i] = best;
      }
  });
  return {y};
}

}  // namespace

Tensor gather(const Tensor& params, const Tensor& indices, int axis) {
  static const OpDef& op = op_def("GatherV2");
  return execute1(op, {params, indices}, Attrs().set("axis", std::int64_t{axis}));
}

Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, std::int64_t num_segments) {
  static const OpDef& op = op_def("UnsortedSegmentSum");
  return execute1(op, {data, segment_ids}, Attrs().set("num_segments", num_segments));
}

Tensor one_hot(const Tensor& indices, std::int64_t depth, double on_value, double off_value, DType dtype) {
  static const OpDef& op = op_def("OneHot");
  return execute1(op, {indices},
                  Attrs().set("depth", depth).set("on", on_value).set("off", off_value).set("dtype", dtype));
}

Tensor argmax(const Tensor& x, int axis) {
  static const OpDef& op = op_def("ArgMax");
  return execute1(op, {x}, Attrs().set("axis", std::int64_t{axis}));
}

Tensor argmin(const Tensor& x, int axis) {
  static const OpDef& op = op_def("ArgMin");
  return execute1(op, {x}, Attrs().set("axis", std::int64_t{axis}));
}

void register_index_ops(OpRegistry& r) {
  using In = std::span<const Tensor>;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  // Batched params: the axis shifts by one (indices are integers, never batched). Backward needs the indices.
  r.add({"GatherV2", gather_forward, gather_grad, kSaveInputs, batching::axis_attr("axis", {1}), false,
         ops_internal::check_axis_attr_of("GatherV2")});
  r.add({"UnsortedSegmentSum", segment_sum_forward, segment_sum_grad, kSaveInputs, segment_sum_batch,  // needs the ids
         false, [](const Attrs& a) { check_int_attr("UnsortedSegmentSum", a, "num_segments", 0, kMax); }});
  r.add({"OneHot", one_hot_forward, {}, kSaveNone, batching::unary(), false,  // per element, depth appended
         [](const Attrs& a) {
           check_int_attr("OneHot", a, "depth", 0, kMax);
           check_attr_type<double>("OneHot", a, "on");
           check_attr_type<double>("OneHot", a, "off");
           check_attr_type<DType>("OneHot", a, "dtype");
         }});
  r.add({"ArgMax", [](In in, const Attrs& a) { return arg_forward("argmax", in, a, true); }, {}, kSaveNone,
         batching::axis_attr("axis"), false, ops_internal::check_axis_attr_of("ArgMax")});
  r.add({"ArgMin", [](In in, const Attrs& a) { return arg_forward("argmin", in, a, false); }, {}, kSaveNone,
         batching::axis_attr("axis"), false, ops_internal::check_axis_attr_of("ArgMin")});
}

}  // namespace tapeflow
