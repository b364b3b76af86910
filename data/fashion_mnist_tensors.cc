#include "data/fashion_mnist_tensors.h"

#include <limits>
#include <stdexcept>

namespace tapeflow::data {

Tensor images_to_tensor(const FashionMnistSplit& split, bool flatten) {
  // rows * cols of an IDX header (each < 2^32) overflows int64 before Shape can refuse it.
  if (split.count < 0 || split.rows < 0 || split.cols < 0 ||
      (split.cols > 0 && split.rows > std::numeric_limits<std::int64_t>::max() / split.cols))
    throw std::invalid_argument("images_to_tensor: split of " + std::to_string(split.count) + " images of " +
                                std::to_string(split.rows) + " x " + std::to_string(split.cols) +
                                " pixels: the sizes must be >= 0 and rows * cols must fit in int64");
  const Shape shape = flatten ? Shape{split.count, split.rows * split.cols} : Shape{split.count, split.rows, split.cols};
  if (static_cast<std::int64_t>(split.images.size()) != shape.num_elements())
    throw std::invalid_argument("images_to_tensor: split holds " + std::to_string(split.images.size()) +
                                " pixels, expected " + shape.to_string());
  Tensor t = Tensor::empty(shape, DType::kFloat32);
  float* out = t.mutable_data<float>();
  for (std::size_t i = 0; i < split.images.size(); ++i) out[i] = static_cast<float>(split.images[i]) / 255.0f;
  return t;
}

Tensor labels_to_tensor(const FashionMnistSplit& split, DType dtype) {
  if (dtype != DType::kInt32 && dtype != DType::kInt64)
    throw std::invalid_argument(std::string("labels_to_tensor: labels must be int32 or int64, got ") +
                                dtype_name(dtype));
  Tensor t = Tensor::empty(Shape{static_cast<std::int64_t>(split.labels.size())}, dtype);
  if (dtype == DType::kInt32) {
    auto* out = t.mutable_data<std::int32_t>();
    for (std::size_t i = 0; i < split.labels.size(); ++i) out[i] = split.labels[i];
  } else {
    auto* out = t.mutable_data<std::int64_t>();
    for (std::size_t i = 0; i < split.labels.size(); ++i) out[i] = split.labels[i];
  }
  return t;
}

FashionMnistTensors load_fashion_mnist_tensors(const std::string& dir, std::int64_t limit, DType label_dtype) {
  if (label_dtype != DType::kInt32 && label_dtype != DType::kInt64)  // fail before reading 50 MB
    throw std::invalid_argument(std::string("load_fashion_mnist_tensors: labels must be int32 or int64, got ") +
                                dtype_name(label_dtype));
  FashionMnist raw = load_fashion_mnist(dir, limit);
  FashionMnistTensors t;
  t.x_train = images_to_tensor(raw.train);
  t.y_train = labels_to_tensor(raw.train, label_dtype);
  std::vector<std::uint8_t>().swap(raw.train.images);  // release 47 MB before the test split (peak RSS)
  t.x_test = images_to_tensor(raw.test);
  t.y_test = labels_to_tensor(raw.test, label_dtype);
  return t;
}

}  // namespace tapeflow::data
