// Fashion-MNIST as tensors ready for a classifier: float32 pixels in [0, 1] and integer labels.
#pragma once

#include <cstdint>
#include <string>

#include "data/fashion_mnist.h"
#include "tape/core/tensor.h"

namespace tapeflow::data {

// Train and test splits as tensors.
// Shapes:  x_* [count, rows * cols] float32 = pixel / 255; y_* [count] int32 or int64 in [0, 10).
struct FashionMnistTensors {
  Tensor x_train,  // Training images [count, rows * cols], float32 in [0, 1].
      y_train,     // Training labels [count], int32 or int64 in [0, 10).
      x_test,      // Test images [count, rows * cols], float32 in [0, 1].
      y_test;      // Test labels [count], int32 or int64 in [0, 10).
};

// Pixels of `split` as float32 / 255. Shapes: [count, rows * cols] (flatten) or [count, rows, cols].
Tensor images_to_tensor(const FashionMnistSplit& split, bool flatten = true);
// Labels of `split` as `dtype`. Errors: std::invalid_argument unless dtype is int32 or int64.
Tensor labels_to_tensor(const FashionMnistSplit& split, DType dtype = DType::kInt64);

// load_fashion_mnist(dir, limit) converted with images_to_tensor / labels_to_tensor.
// Errors:  those of load_fashion_mnist (a missing file names the Debian package dataset-fashion-mnist)
//          and of labels_to_tensor.
// Ref:     tf.keras.datasets.fashion_mnist.load_data, followed by x / 255 and a reshape to [-1, 784]
FashionMnistTensors load_fashion_mnist_tensors(const std::string& dir = kDefaultFashionMnistDir,
                                               std::int64_t limit = 0, DType label_dtype = DType::kInt64);

}  // namespace tapeflow::data
