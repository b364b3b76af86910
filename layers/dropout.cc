#include "layers/dropout.h"

#include <stdexcept>

#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

Dropout::Dropout(DropoutOptions options)
    : Layer("Dropout", options.name, options.seed, options.dtype), options_(std::move(options)) {
  if (!(options_.rate >= 0 && options_.rate < 1))
    throw std::invalid_argument(describe() + ": rate must be in [0, 1), got " + std::to_string(options_.rate));
}

Tensor Dropout::call(const Tensor& x, bool training) {
  if (!training || options_.rate == 0) return x;
  Tensor mask = Tensor::empty(x.shape(), x.dtype());
  const double rate = options_.rate;
  dispatch_floating(x.dtype(), "Dropout", [&](auto tag) {
    using T = decltype(tag);
    T* m = mask.mutable_data<T>();
    const T keep = static_cast<T>(1.0 / (1.0 - rate)), r = static_cast<T>(rate);
    const std::int64_t n = x.num_elements();
    generator().fill_uniform<T>(m, n, T(0), T(1));  // bulk draw (inlined generator), then threshold
    for (std::int64_t i = 0; i < n; ++i) m[i] = m[i] >= r ? keep : T(0);
  });
  return x * mask;
}

}  // namespace tapeflow::layers
