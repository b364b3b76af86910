#include "layers/flatten.h"

#include <stdexcept>

#include "tape/ops/array_ops.h"

namespace tapeflow::layers {

Flatten::Flatten(FlattenOptions options) : Layer("Flatten", options.name) {}

Shape Flatten::compute_output_shape(const Shape& s) const {
  if (s.rank() < 1) throw std::invalid_argument(describe() + ": expected inputs with a batch axis, got a scalar");
  std::int64_t rest = 1;
  for (int i = 1; i < s.rank(); ++i) rest *= s[i];
  return Shape{s[0], rest};
}

Tensor Flatten::call(const Tensor& x, bool) {
  Shape out = compute_output_shape(x.shape());
  return out == x.shape() ? x : reshape(x, out);
}

}  // namespace tapeflow::layers
