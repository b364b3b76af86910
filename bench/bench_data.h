// Shared by the training benchmarks: the Fashion-MNIST training set (or random data of the same
// shapes when the dataset is not installed; `real` says which) and a thread-count guard.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "data/fashion_mnist_tensors.h"
#include "tape/core/random.h"
#include "tape/kernels/parallel.h"

namespace tapeflow::bench {

struct Data {
  Tensor x, y;
  bool real = true;
};

inline const Data& train_data() {
  static const Data d = [] {
    try {
      auto t = data::load_fashion_mnist_tensors(data::kDefaultFashionMnistDir, 0, DType::kInt64);
      return Data{t.x_train, t.y_train, true};
    } catch (const std::runtime_error&) {
      Generator g(1);
      Tensor x = random_uniform(Shape{60000, 784}, g);
      std::vector<std::int64_t> y(60000);
      for (auto& v : y) v = static_cast<std::int64_t>(g.uniform_int(10));
      return Data{x, constant(y, Shape{60000}), false};
    }
  }();
  return d;
}

// Caps kernel threads for a scope.
struct ThreadCap {
  explicit ThreadCap(int n) : prev(kernels::set_num_threads(n)) {}
  ~ThreadCap() { kernels::set_num_threads(prev); }
  int prev;
};

}  // namespace tapeflow::bench
