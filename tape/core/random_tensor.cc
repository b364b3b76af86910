// Random tensor creation on top of the seeded Generator.
#include "tape/core/random.h"
#include "tape/core/tensor.h"

namespace tapeflow {

Tensor random_normal(const Shape& shape, Generator& gen, double mean, double stddev, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch_floating(dtype, "random_normal", [&](auto tag) {
    using T = decltype(tag);
    gen.fill_normal<T>(t.mutable_data<T>(), t.num_elements(), static_cast<T>(mean), static_cast<T>(stddev));
  });
  return t;
}

Tensor random_uniform(const Shape& shape, Generator& gen, double minval, double maxval, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch_floating(dtype, "random_uniform", [&](auto tag) {
    using T = decltype(tag);
    gen.fill_uniform<T>(t.mutable_data<T>(), t.num_elements(), static_cast<T>(minval), static_cast<T>(maxval));
  });
  return t;
}

Tensor truncated_normal(const Shape& shape, Generator& gen, double mean, double stddev, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch_floating(dtype, "truncated_normal", [&](auto tag) {
    using T = decltype(tag);
    gen.fill_truncated_normal<T>(t.mutable_data<T>(), t.num_elements(), static_cast<T>(mean),
                                 static_cast<T>(stddev));
  });
  return t;
}

}  // namespace tapeflow
