#include "tape/autodiff/internal/jacobian_util.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace tapeflow::internal {

Tensor one_hot_rows(const Shape& shape, DType dtype, std::int64_t first, std::int64_t count) {
  Shape s{count};
  for (std::int64_t d : shape) s.push_back(d);
  Tensor t = Tensor::empty(s, dtype);
  const std::int64_t n = shape.num_elements();
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.mutable_data<T>();
    std::fill(p, p + count * n, T(0));
    for (std::int64_t k = 0; k < count; ++k) p[k * n + first + k] = T(1);
  });
  return t;
}

Tensor batch_one_hot_rows(const Shape& target_shape, DType dtype, std::int64_t first, std::int64_t count) {
  Shape s{count};
  for (std::int64_t d : target_shape) s.push_back(d);
  Tensor t = Tensor::empty(s, dtype);
  const std::int64_t b = target_shape[0], ny = target_shape.num_elements() / b;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.mutable_data<T>();
    std::fill(p, p + count * b * ny, T(0));
    for (std::int64_t k = 0; k < count; ++k)
      for (std::int64_t i = 0; i < b; ++i) p[(k * b + i) * ny + first + k] = T(1);
  });
  return t;
}

void copy_into(const Tensor& dst, std::int64_t offset, const Tensor& src) {
  Tensor s = src.dtype() == dst.dtype() ? src : convert(src, dst.dtype());
  if (offset + s.num_elements() > dst.num_elements())
    throw std::logic_error("jacobian: row copy out of range");
  const std::size_t size = dtype_size(dst.dtype());
  if (s.nbytes())
    std::memcpy(static_cast<char*>(dst.mutable_raw_data()) + static_cast<std::size_t>(offset) * size, s.raw_data(),
                s.nbytes());
}

void swap_leading_into(const Tensor& dst, std::int64_t total_k, std::int64_t first, const Tensor& src) {
  Tensor s = src.dtype() == dst.dtype() ? src : convert(src, dst.dtype());
  const std::int64_t k = s.shape()[0], b = s.rank() > 1 ? s.shape()[1] : 1;
  const std::int64_t rest = (k * b) ? s.num_elements() / (k * b) : 0;
  const std::size_t size = dtype_size(dst.dtype());
  const char* in = static_cast<const char*>(s.raw_data());
  char* out = static_cast<char*>(dst.mutable_raw_data());
  for (std::int64_t j = 0; j < k; ++j)
    for (std::int64_t i = 0; i < b; ++i)
      std::memcpy(out + static_cast<std::size_t>((i * total_k + first + j) * rest) * size,
                  in + static_cast<std::size_t>((j * b + i) * rest) * size, static_cast<std::size_t>(rest) * size);
}

}  // namespace tapeflow::internal
