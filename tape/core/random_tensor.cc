// Random tensor creation on top of the seeded Generator.
#include "tape/core/random.h"
#include "tape/core/tensor.h"

namespace tapeflow {

namespace {
// Allocates a floating tensor and lets `fill(data, n, T{})` draw its elements.
template <typename Fill>
Tensor random_tensor(const Shape& shape, DType dtype, const char* op, Fill fill) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch_floating(dtype, op, [&](auto tag) { fill(t.mutable_data<decltype(tag)>(), t.num_elements(), tag); });
  return t;
}
}  // namespace

Tensor random_normal(const Shape& shape, Generator& gen, double mean, double stddev, DType dtype) {
  return random_tensor(shape, dtype, "random_normal", [&](auto* y, std::int64_t n, auto tag) {
    using T = decltype(tag);
    gen.fill_normal<T>(y, n, static_cast<T>(mean), static_cast<T>(stddev));
  });
}

Tensor random_uniform(const Shape& shape, Generator& gen, double minval, double maxval, DType dtype) {
  return random_tensor(shape, dtype, "random_uniform", [&](auto* y, std::int64_t n, auto tag) {
    using T = decltype(tag);
    gen.fill_uniform<T>(y, n, static_cast<T>(minval), static_cast<T>(maxval));
  });
}

Tensor truncated_normal(const Shape& shape, Generator& gen, double mean, double stddev, DType dtype) {
  return random_tensor(shape, dtype, "truncated_normal", [&](auto* y, std::int64_t n, auto tag) {
    using T = decltype(tag);
    gen.fill_truncated_normal<T>(y, n, static_cast<T>(mean), static_cast<T>(stddev));
  });
}

}  // namespace tapeflow
