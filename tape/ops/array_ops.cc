// Array ops: forward kernels and gradients.
#include "tape/ops/array_ops.h"

#include "tape/ops/internal/op_helpers.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/op_registry.h"

namespace tapeflow {

namespace {
Attrs shape_attr(const Shape& s) { return Attrs().set("shape", s.to_vector()); }
Shape attr_shape(const Attrs& a) { return Shape(a.get_ints("shape")); }
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
    if (known == 0 || x.num_elements() % known != 0)
      throw std::invalid_argument("reshape: cannot infer -1 reshaping " + x.shape().to_string() + " (" +
                                  std::to_string(x.num_elements()) + " elements)");
    full[static_cast<std::size_t>(unknown)] = x.num_elements() / known;
  }
  return reshape(x, Shape(full));
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  static const OpDef& op = op_def("BroadcastTo");
  return execute1(op, {x}, shape_attr(shape));
}

Tensor sum_to_shape(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  static const OpDef& op = op_def("SumToShape");
  return execute1(op, {x}, shape_attr(shape));
}

void register_array_ops(OpRegistry& r) {
  using In = std::span<const Tensor>;
  using G = std::span<const Tensor>;
  using C = const GradContext&;
  r.add({"Reshape",
         [](In in, const Attrs& a) {
           ops_internal::check_arity("reshape", in, 1);
           return TensorList{in[0].with_shape(attr_shape(a))};
         },
         [](C c, G g) { return TensorList{reshape(g[0], c.input_shape(0))}; }, kSaveNone});
  r.add({"BroadcastTo",
         [](In in, const Attrs& a) {
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
         },
         [](C c, G g) { return TensorList{sum_to_shape(g[0], c.input_shape(0))}; }, kSaveNone});
  r.add({"SumToShape",
         [](In in, const Attrs& a) {
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
         },
         [](C c, G g) { return TensorList{broadcast_to(g[0], c.input_shape(0))}; }, kSaveNone});
}

}  // namespace tapeflow
