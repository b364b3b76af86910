// Array ops: forward kernels and gradients.
#include "tape/ops/array_ops.h"

#include <algorithm>
#include <limits>
#include <string>

#include "tape/kernels/transform.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/ops/internal/op_helpers.h"
#include "tape/runtime/batching.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

namespace {

using ops_internal::describe;
using Ints = std::vector<std::int64_t>;

Attrs shape_attr(const Shape& s) { return Attrs().set("shape", s.to_vector()); }
Shape attr_shape(const Attrs& a) { return Shape(a.get_ints("shape")); }

std::string describe_all(std::span<const Tensor> ts) {
  std::string s;
  for (std::size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + describe(ts[i]);
  return s;
}

// Resolves tf.slice's size (-1 = to the end) against x's shape and checks the block lies inside x.
Ints resolve_slice(const Shape& sx, const Ints& begin, const Ints& size) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument("slice: " + why + ": begin " + ints_to_string(begin) + ", size " + ints_to_string(size) +
                                 " for input " + sx.to_string());
  };
  if (begin.size() != static_cast<std::size_t>(sx.rank()) || size.size() != begin.size())
    throw fail("begin and size need one entry per axis (rank " + std::to_string(sx.rank()) + ")");
  Ints out(size.size());
  for (int i = 0; i < sx.rank(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (begin[k] < 0 || begin[k] > sx[i]) throw fail("begin out of range on axis " + std::to_string(i));
    out[k] = size[k] == -1 ? sx[i] - begin[k] : size[k];
    if (out[k] < 0 || out[k] > sx[i] - begin[k]) throw fail("block out of bounds on axis " + std::to_string(i));
  }
  return out;
}

// ---- attribute checks (OpDef::check_attrs: a deserialised function's nodes are checked at load) ----
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::size_t kRank = Shape::kMaxRank;

std::function<void(const Attrs&)> check_shape_attr_of(const char* op) {
  return [op](const Attrs& a) { check_shape_attr(op, a, "shape"); };
}

void check_transpose_attrs(const Attrs& a) {
  const Ints& p = check_ints_attr("Transpose", a, "perm", 0, kRank, 0, Shape::kMaxRank - 1);
  std::uint32_t seen = 0;
  for (std::int64_t v : p) {
    if (v >= static_cast<std::int64_t>(p.size()) || (seen & (1u << v)))
      throw std::invalid_argument("Transpose: attribute 'perm' = " + ints_to_string(p) + ": not a permutation of 0.." +
                                  std::to_string(static_cast<std::int64_t>(p.size()) - 1));
    seen |= 1u << v;
  }
}

void check_slice_attrs(const Attrs& a) {
  const Ints& begin = check_ints_attr("Slice", a, "begin", 0, kRank, 0, kInt64Max);
  check_ints_attr("Slice", a, "size", begin.size(), begin.size(), -1, kInt64Max);
}

// The padded shape is at least [before + after, ...] (a zero-size input): it must be able to exist.
void check_pad_attrs(const Attrs& a) {
  const Ints& p = check_ints_attr("Pad", a, "paddings", 0, 2 * kRank, 0, kInt64Max);
  check_attr_type<double>("Pad", a, "constant");
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("Pad: attribute 'paddings' = " + ints_to_string(p) + ": " + why);
  };
  if (p.size() % 2 != 0) fail("needs one {before, after} pair per axis");
  Shape least;
  for (std::size_t k = 0; k < p.size(); k += 2) {
    std::int64_t d = 0;
    if (__builtin_add_overflow(p[k], p[k + 1], &d)) fail("before + after overflows int64");
    least.push_back(d);
  }
  try {
    least.num_elements();
    least.strides();
  } catch (const ShapeError& e) {
    fail(std::string("even a zero-size input pads to at least ") + e.what());
  }
}

// y (already filled with the pad value) gets x at offset `before` on every axis.
template <typename T>
void pad_copy(const T* x, const Shape& sx, const Ints& before, T* y, const Shape& sy) {
  const int r = sx.rank();
  const std::int64_t n = sx.num_elements();
  if (n == 0) return;
  if (r == 0) {
    y[0] = x[0];
    return;
  }
  const auto ys = sy.strides();
  const std::int64_t inner = sx[r - 1];
  std::int64_t idx[Shape::kMaxRank] = {};
  for (std::int64_t row = 0; row < n / inner; ++row) {
    std::int64_t off = before[static_cast<std::size_t>(r - 1)];
    for (int i = 0; i < r - 1; ++i) off += (idx[i] + before[static_cast<std::size_t>(i)]) * ys[static_cast<std::size_t>(i)];
    std::copy(x + row * inner, x + (row + 1) * inner, y + off);
    for (int i = r - 2; i >= 0; --i) {
      if (++idx[i] < sx[i]) break;
      idx[i] = 0;
    }
  }
}

Shape squeezed(const Shape& s, std::uint32_t mask) {
  Shape out;
  for (int i = 0; i < s.rank(); ++i)
    if (!(mask & (1u << i))) out.push_back(s[i]);
  return out;
}

// ---- batching rules (the batched input carries K in front; see tape/runtime/batching.h) ----
// reshape: the target shape gets K in front.
TensorList reshape_batch(std::span<const Tensor> in, const BatchContext& c) {
  Ints target{c.size()};
  for (std::int64_t d : c.attrs().get_ints("shape")) target.push_back(d);
  return batching::run(c, in, Attrs().set("shape", target));
}
// transpose: the batch axis stays first, the others are permuted behind it.
TensorList transpose_batch(std::span<const Tensor> in, const BatchContext& c) {
  Ints perm{0};
  for (std::int64_t p : c.attrs().get_ints("perm")) perm.push_back(p + 1);
  return batching::run(c, in, Attrs().set("perm", perm));
}
// slice: the batch axis is taken whole.
TensorList slice_batch(std::span<const Tensor> in, const BatchContext& c) {
  Ints begin{0}, size{c.size()};
  for (std::int64_t b : c.attrs().get_ints("begin")) begin.push_back(b);
  for (std::int64_t z : c.attrs().get_ints("size")) size.push_back(z);
  return batching::run(c, in, Attrs().set("begin", begin).set("size", size));
}
// pad: no padding on the batch axis.
TensorList pad_batch(std::span<const Tensor> in, const BatchContext& c) {
  Ints paddings{0, 0};
  for (std::int64_t p : c.attrs().get_ints("paddings")) paddings.push_back(p);
  Attrs attrs = c.attrs();
  attrs.set("paddings", paddings);
  return batching::run(c, in, attrs);
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  static const OpDef& op = op_def("Reshape");
  return execute1(op, {x}, shape_attr(shape));
}

Tensor reshape(const Tensor& x, const std::vector<std::int64_t>& dims) {
  std::int64_t known = 1;
  int unknown = -1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (unknown >= 0) throw std::invalid_argument("reshape: more than one -1 in the requested shape");
      unknown = static_cast<int>(i);
    } else if (dims[i] < 0) {
      throw std::invalid_argument("reshape: negative dimension " + std::to_string(dims[i]));
    } else {
      known *= dims[i];
    }
  }
  std::vector<std::int64_t> full = dims;
  if (unknown >= 0) {
    const Shape xs = logical_shape(x);
    if (known == 0 || xs.num_elements() % known != 0)
      throw std::invalid_argument("reshape: cannot infer -1 reshaping " + xs.to_string() + " (" +
                                  std::to_string(xs.num_elements()) + " elements)");
    full[static_cast<std::size_t>(unknown)] = xs.num_elements() / known;
  }
  return reshape(x, Shape(full));
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (logical_shape(x) == shape) return x;
  static const OpDef& op = op_def("BroadcastTo");
  return execute1(op, {x}, shape_attr(shape));
}

Tensor sum_to_shape(const Tensor& x, const Shape& shape) {
  if (logical_shape(x) == shape) return x;
  static const OpDef& op = op_def("SumToShape");
  return execute1(op, {x}, shape_attr(shape));
}

Tensor transpose(const Tensor& x, const std::vector<int>& perm) {
  static const OpDef& op = op_def("Transpose");
  return execute1(op, {x}, Attrs().set("perm", Ints(perm.begin(), perm.end())));
}

Tensor transpose(const Tensor& x) {
  const int rank = logical_rank(x);
  std::vector<int> perm(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) perm[static_cast<std::size_t>(i)] = rank - 1 - i;
  return transpose(x, perm);
}

Tensor permute(const Tensor& x, const std::vector<int>& perm) { return transpose(x, perm); }

Tensor expand_dims(const Tensor& x, int axis) {
  const Shape xs = logical_shape(x);
  const int a = normalize_axis(axis, xs.rank() + 1, "expand_dims");
  Ints dims = xs.to_vector();
  dims.insert(dims.begin() + a, 1);
  return reshape(x, Shape(dims));
}

Tensor squeeze(const Tensor& x) {
  const Shape xs = logical_shape(x);
  std::uint32_t mask = 0;
  for (int i = 0; i < xs.rank(); ++i)
    if (xs[i] == 1) mask |= 1u << i;
  return reshape(x, squeezed(xs, mask));
}

Tensor squeeze(const Tensor& x, const std::vector<int>& axes) {
  const Shape xs = logical_shape(x);
  std::uint32_t mask = 0;
  for (int axis : axes) {
    const int a = normalize_axis(axis, xs.rank(), "squeeze");
    if (xs.rank() == 0 || xs[a] != 1)
      throw std::invalid_argument("squeeze: cannot squeeze axis " + std::to_string(axis) + " of shape " +
                                  xs.to_string() + ": its size is not 1");
    mask |= 1u << a;
  }
  return reshape(x, squeezed(xs, mask));
}

Tensor concat(const std::vector<Tensor>& values, int axis) {
  static const OpDef& op = op_def("ConcatV2");
  return execute(op, std::span<const Tensor>(values), Attrs().set("axis", std::int64_t{axis}))[0];
}

Tensor stack(const std::vector<Tensor>& values, int axis) {
  if (values.empty()) throw std::invalid_argument("stack: needs at least one input, got none");
  const Shape s0 = logical_shape(values[0]);
  for (const Tensor& v : values)
    if (logical_shape(v) != s0 || v.dtype() != values[0].dtype())
      throw std::invalid_argument("stack: inputs differ in shape or dtype: " + describe_all(values));
  const int a = normalize_axis(axis, s0.rank() + 1, "stack");
  std::vector<Tensor> expanded;
  expanded.reserve(values.size());
  for (const Tensor& v : values) expanded.push_back(expand_dims(v, a));
  return expanded.size() == 1 ? expanded[0] : concat(expanded, a);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis) {
  const Shape xs = logical_shape(x);
  if (xs.rank() == 0) throw std::invalid_argument("split: cannot split a scalar");
  const int a = normalize_axis(axis, xs.rank(), "split");
  const std::int64_t dim = xs[a];
  Ints resolved = sizes;
  std::int64_t total = 0;
  int unknown = -1;
  bool bad = sizes.empty();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && unknown < 0) unknown = static_cast<int>(i);
    else if (sizes[i] < 0) bad = true;
    else total += sizes[i];
  }
  if (unknown >= 0 && total <= dim) resolved[static_cast<std::size_t>(unknown)] = dim - total;
  else if (total != dim) bad = true;
  if (bad)
    throw std::invalid_argument("split: sizes " + ints_to_string(sizes) + " do not add up to " + std::to_string(dim) +
                                " on axis " + std::to_string(axis) + " of " + xs.to_string());
  static const OpDef& op = op_def("SplitV");
  const Tensor in[] = {x};
  const TensorList out = execute(op, in, Attrs().set("sizes", resolved).set("axis", std::int64_t{a}));
  return std::vector<Tensor>(out.begin(), out.end());
}

std::vector<Tensor> split(const Tensor& x, int num_splits, int axis) {
  const Shape xs = logical_shape(x);
  if (xs.rank() == 0) throw std::invalid_argument("split: cannot split a scalar");
  const int a = normalize_axis(axis, xs.rank(), "split");
  if (num_splits <= 0 || xs[a] % num_splits != 0)
    throw std::invalid_argument("split: cannot split axis " + std::to_string(axis) + " of " + xs.to_string() +
                                " into " + std::to_string(num_splits) + " equal parts");
  return split(x, Ints(static_cast<std::size_t>(num_splits), xs[a] / num_splits), a);
}

std::vector<Tensor> unstack(const Tensor& x, int axis) {
  const Shape xs = logical_shape(x);
  if (xs.rank() == 0) throw std::invalid_argument("unstack: cannot unstack a scalar");
  const int a = normalize_axis(axis, xs.rank(), "unstack");
  if (xs[a] == 0) return {};
  std::vector<Tensor> parts = split(x, Ints(static_cast<std::size_t>(xs[a]), 1), a);
  for (Tensor& p : parts) p = squeeze(p, {a});
  return parts;
}

Tensor slice(const Tensor& x, const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& size) {
  static const OpDef& op = op_def("Slice");
  return execute1(op, {x}, Attrs().set("begin", begin).set("size", size));
}

Tensor pad(const Tensor& x, const std::vector<std::pair<std::int64_t, std::int64_t>>& paddings, double constant_value) {
  static const OpDef& op = op_def("Pad");
  Ints flat;
  for (const auto& [before, after] : paddings) {
    flat.push_back(before);
    flat.push_back(after);
  }
  return execute1(op, {x}, Attrs().set("paddings", flat).set("constant", constant_value));
}

Tensor tile(const Tensor& x, const std::vector<std::int64_t>& multiples) {
  const int rank = logical_rank(x);
  if (multiples.size() != static_cast<std::size_t>(rank))
    throw std::invalid_argument("tile: multiples " + ints_to_string(multiples) + " need one entry per axis of " +
                                logical_shape(x).to_string());
  for (std::int64_t m : multiples)
    if (m < 0) throw std::invalid_argument("tile: negative multiple in " + ints_to_string(multiples));
  // One axis at a time: [pre, d, post] -> [pre, 1, d*post] -> broadcast [pre, m, d*post].
  Tensor y = x;
  for (int i = 0; i < rank; ++i) {
    const std::int64_t m = multiples[static_cast<std::size_t>(i)];
    if (m == 1) continue;
    const Shape s = logical_shape(y);
    std::int64_t pre = 1, post = 1;
    for (int j = 0; j < i; ++j) pre *= s[j];
    for (int j = i; j < s.rank(); ++j) post *= s[j];
    Tensor b = broadcast_to(reshape(y, Shape{pre, 1, post}), Shape{pre, m, post});
    Ints dims = s.to_vector();
    dims[static_cast<std::size_t>(i)] *= m;
    y = reshape(b, Shape(dims));
  }
  return y;
}

// ---- forward functions and gradients, one pair per op (gradients are written with ops) ----
namespace {

using In = std::span<const Tensor>;
using G = std::span<const Tensor>;
using C = const GradContext&;

// y = x viewed with the "shape" attr (same elements, no copy).
TensorList reshape_forward(In in, const Attrs& a) {
  ops_internal::check_arity("reshape", in, 1);
  return TensorList{in[0].with_shape(attr_shape(a))};
}
// dx = reshape(g, shape(x)).
TensorList reshape_gradient(C c, G g) { return TensorList{reshape(g[0], c.input_shape(0))}; }

// y = x repeated along its broadcast axes to the "shape" attr (numpy broadcasting).
TensorList broadcast_to_forward(In in, const Attrs& a) {
  ops_internal::check_arity("broadcast_to", in, 1);
  const Tensor& x = in[0];
  Shape target = attr_shape(a);
  if (broadcast_shapes(x.shape(), target, "broadcast_to") != target)
    throw std::invalid_argument("broadcast_to: cannot broadcast " + x.shape().to_string() + " to " +
                                target.to_string());
  Tensor y = Tensor::empty(target, x.dtype());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::broadcast_to(x.data<T>(), x.shape(), y.mutable_data<T>(), target);
  });
  return TensorList{y};
}
// dx = g summed over the broadcast axes back to shape(x).
TensorList broadcast_to_gradient(C c, G g) { return TensorList{sum_to_shape(g[0], c.input_shape(0))}; }

// y = x summed over the axes along which the "shape" attr broadcasts to shape(x).
TensorList sum_to_shape_forward(In in, const Attrs& a) {
  ops_internal::check_arity("sum_to_shape", in, 1);
  const Tensor& x = in[0];
  Shape target = attr_shape(a);
  if (broadcast_shapes(target, x.shape(), "sum_to_shape") != x.shape())
    throw std::invalid_argument("sum_to_shape: " + target.to_string() + " does not broadcast to " +
                                x.shape().to_string());
  Tensor y = Tensor::empty(target, x.dtype());
  ops_internal::dispatch_kind<ops_internal::Kinds::kNumeric>("sum_to_shape", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::sum_to_shape(x.data<T>(), x.shape(), y.mutable_data<T>(), target);
  });
  return TensorList{y};
}
// dx = broadcast_to(g, shape(x)).
TensorList sum_to_shape_gradient(C c, G g) { return TensorList{broadcast_to(g[0], c.input_shape(0))}; }

// y[i_perm[0], ..., i_perm[r-1]] = x[i_0, ..., i_{r-1}]: shape(y)[k] = shape(x)[perm[k]].
TensorList transpose_forward(In in, const Attrs& a) {
  ops_internal::check_arity("transpose", in, 1);
  const Tensor& x = in[0];
  const Ints& p = a.get_ints("perm");
  std::vector<int> perm(p.begin(), p.end());
  std::uint32_t seen = 0;
  bool identity = true;
  for (std::size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= x.rank() || (seen & (1u << perm[i])))
      seen = ~0u;
    else
      seen |= 1u << perm[i];
    identity = identity && perm[i] == static_cast<int>(i);
  }
  if (p.size() != static_cast<std::size_t>(x.rank()) || seen == ~0u)
    throw std::invalid_argument("transpose: perm " + ints_to_string(p) + " is not a permutation of the axes of " +
                                describe(x));
  if (identity) return TensorList{x.alias()};
  Shape sy;
  for (int d : perm) sy.push_back(x.shape()[d]);
  Tensor y = Tensor::empty(sy, x.dtype());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::transpose(x.data<T>(), x.shape(), perm.data(), y.mutable_data<T>());
  });
  return TensorList{y};
}
// dx = transpose(g, inverse(perm)).
TensorList transpose_gradient(C c, G g) {
  const Ints& p = c.attrs().get_ints("perm");
  std::vector<int> inverse(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) inverse[static_cast<std::size_t>(p[i])] = static_cast<int>(i);
  return TensorList{transpose(g[0], inverse)};
}

// y = [x_0, x_1, ...] joined along "axis" (all other dimensions equal).
TensorList concat_forward(In in, const Attrs& a) {
  if (in.empty()) throw std::invalid_argument("concat: needs at least one input, got none");
  const Tensor& x0 = in[0];
  const int axis = ops_internal::axis_attr("concat", a);
  if (x0.rank() == 0) throw std::invalid_argument("concat: cannot concatenate scalars: " + describe_all(in));
  if (axis < -x0.rank() || axis >= x0.rank())
    throw std::invalid_argument("concat: axis " + std::to_string(axis) + " out of range for inputs " +
                                describe_all(in));
  const int ax = axis < 0 ? axis + x0.rank() : axis;
  Shape sy = x0.shape();
  for (std::size_t k = 1; k < in.size(); ++k) {
    const Tensor& x = in[k];
    bool ok = x.dtype() == x0.dtype() && x.rank() == x0.rank();
    for (int i = 0; ok && i < x.rank(); ++i) ok = i == ax || x.shape()[i] == x0.shape()[i];
    if (!ok)
      throw std::invalid_argument("concat: inputs must match in dtype, rank and every dimension but axis " +
                                  std::to_string(axis) + ", got " + describe_all(in));
    sy[ax] += x.shape()[ax];
  }
  if (in.size() == 1) return TensorList{x0.alias()};
  Tensor y = Tensor::empty(sy, x0.dtype());
  dispatch_dtype(x0.dtype(), [&](auto tag) {
    using T = decltype(tag);
    std::vector<const T*> ptrs;
    std::vector<Shape> shapes;
    for (const Tensor& x : in) {
      ptrs.push_back(x.data<T>());
      shapes.push_back(x.shape());
    }
    kernels::concat(ptrs.data(), shapes.data(), static_cast<int>(in.size()), ax, y.mutable_data<T>());
  });
  return TensorList{y};
}
// dx_i = the slice of g at x_i's offset along the axis.
TensorList concat_gradient(C c, G g) {
  const int rank = c.input_shape(0).rank();
  const int axis = static_cast<int>(c.attrs().get_int("axis"));
  const auto ax = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
  TensorList out;
  Ints begin(static_cast<std::size_t>(rank), 0);
  for (int i = 0; i < c.num_inputs(); ++i) {
    Ints size = c.input_shape(i).to_vector();
    out.push_back(slice(g[0], begin, size));
    begin[ax] += size[ax];
  }
  return out;
}

// y = x[begin : begin + size] on every axis (size -1: to the end).
TensorList slice_forward(In in, const Attrs& a) {
  ops_internal::check_arity("slice", in, 1);
  const Tensor& x = in[0];
  const Ints& begin = a.get_ints("begin");
  Shape sy(resolve_slice(x.shape(), begin, a.get_ints("size")));
  if (sy == x.shape()) return TensorList{x.alias()};
  Tensor y = Tensor::empty(sy, x.dtype());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::slice(x.data<T>(), x.shape(), begin.data(), sy, y.mutable_data<T>());
  });
  return TensorList{y};
}
// dx = g padded with zeros back to shape(x).
TensorList slice_gradient(C c, G g) {
  const Shape& sx = c.input_shape(0);
  const Ints& begin = c.attrs().get_ints("begin");
  const Ints size = resolve_slice(sx, begin, c.attrs().get_ints("size"));
  std::vector<std::pair<std::int64_t, std::int64_t>> paddings;
  for (int i = 0; i < sx.rank(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    paddings.emplace_back(begin[k], sx[i] - begin[k] - size[k]);
  }
  return TensorList{pad(g[0], paddings)};
}

// y_i = the i-th consecutive block of x along "axis", of "sizes"[i] (TF's SplitV). One op with one
// output per block, so the backward is one concat (a Slice per block would pad each block's gradient
// to the whole of x and sum them: quadratic in the number of blocks, as an RNN's unstacked steps).
TensorList split_forward(In in, const Attrs& a) {
  ops_internal::check_arity("split", in, 1);
  const Tensor& x = in[0];
  const int axis = ops_internal::axis_attr("split", a);
  if (x.rank() == 0 || axis < 0 || axis >= x.rank())
    throw std::invalid_argument("split: axis " + std::to_string(axis) + " out of range for " + describe(x));
  const Ints& sizes = a.get_ints("sizes");
  std::int64_t total = 0;
  for (std::int64_t n : sizes) total += n;
  if (sizes.empty() || total != x.shape()[axis])
    throw std::invalid_argument("split: sizes " + ints_to_string(sizes) + " do not add up to axis " +
                                std::to_string(axis) + " of " + describe(x));
  TensorList out;
  Ints begin(static_cast<std::size_t>(x.rank()), 0);
  for (std::int64_t n : sizes) {
    Shape sy = x.shape();
    sy[axis] = n;
    Tensor y = Tensor::empty(sy, x.dtype());
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::slice(x.data<T>(), x.shape(), begin.data(), sy, y.mutable_data<T>());
    });
    out.push_back(y);
    begin[static_cast<std::size_t>(axis)] += n;
  }
  return out;
}
// dx = concat of the blocks' gradients along the axis (the tape gives zeros for unused blocks).
TensorList split_gradient(C c, G g) {
  return TensorList{concat(std::vector<Tensor>(g.begin(), g.end()), static_cast<int>(c.attrs().get_int("axis")))};
}
void check_split_attrs(const Attrs& a) {
  check_int_attr("SplitV", a, "axis", 0, Shape::kMaxRank - 1);
  check_ints_attr("SplitV", a, "sizes", 1, std::numeric_limits<std::size_t>::max(), 0, kInt64Max);
}

// y = x surrounded by {before, after} "paddings" per axis, filled with "constant".
TensorList pad_forward(In in, const Attrs& a) {
  ops_internal::check_arity("pad", in, 1);
  const Tensor& x = in[0];
  const Ints& p = a.get_ints("paddings");
  if (p.size() != 2 * static_cast<std::size_t>(x.rank()) ||
      std::any_of(p.begin(), p.end(), [](std::int64_t v) { return v < 0; }))
    throw std::invalid_argument("pad: paddings " + ints_to_string(p) +
                                " must be one non-negative {before, after} pair per axis of " + describe(x));
  Shape sy = x.shape();
  Ints before;
  for (int i = 0; i < x.rank(); ++i) {
    const auto k = 2 * static_cast<std::size_t>(i);
    std::int64_t both = 0;
    if (__builtin_add_overflow(p[k], p[k + 1], &both) || __builtin_add_overflow(sy[i], both, &sy[i]))
      throw ShapeError("paddings " + ints_to_string(p) + " overflow int64 on axis " + std::to_string(i) + " of " + describe(x));
    before.push_back(p[k]);
  }
  Tensor y = Tensor::empty(sy, x.dtype());
  const double value = a.get_float("constant");
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out = y.mutable_data<T>();
    std::fill(out, out + sy.num_elements(), static_cast<T>(value));
    pad_copy(x.data<T>(), x.shape(), before, out, sy);
  });
  return TensorList{y};
}
// dx = the slice of g where x was placed.
TensorList pad_gradient(C c, G g) {
  const Ints& p = c.attrs().get_ints("paddings");
  Ints begin;
  for (std::size_t k = 0; k < p.size(); k += 2) begin.push_back(p[k]);
  return TensorList{slice(g[0], begin, c.input_shape(0).to_vector())};
}

}  // namespace

void register_array_ops(OpRegistry& r) {
  r.add({"Reshape", reshape_forward, reshape_gradient, kSaveNone, reshape_batch, false, check_shape_attr_of("Reshape")});
  r.add({"BroadcastTo", broadcast_to_forward, broadcast_to_gradient, kSaveNone, batching::shape_attr("shape"), false,
         check_shape_attr_of("BroadcastTo")});
  r.add({"SumToShape", sum_to_shape_forward, sum_to_shape_gradient, kSaveNone, batching::shape_attr("shape"), false,
         check_shape_attr_of("SumToShape")});
  r.add({"Transpose", transpose_forward, transpose_gradient, kSaveNone, transpose_batch, false, check_transpose_attrs});
  r.add({"ConcatV2", concat_forward, concat_gradient, kSaveNone, batching::axis_attr("axis"), false,
         [](const Attrs& a) { check_int_attr("ConcatV2", a, "axis", -Shape::kMaxRank, Shape::kMaxRank - 1); }});
  r.add({"Slice", slice_forward, slice_gradient, kSaveNone, slice_batch, false, check_slice_attrs});
  r.add({"SplitV", split_forward, split_gradient, kSaveNone, batching::axis_attr("axis"), false, check_split_attrs});
  r.add({"Pad", pad_forward, pad_gradient, kSaveNone, pad_batch, false, check_pad_attrs});
}

}  // namespace tapeflow
