#include "layers/pooling2d.h"

#include <stdexcept>

#include "layers/internal/nhwc.h"

#include "tape/kernels/window.h"
#include "tape/ops/conv_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::layers {

using internal::check_nhwc;

Pooling2D::Pooling2D(const char* class_name, bool max, Pooling2DOptions o)
    : Layer(class_name, o.name, std::nullopt, o.dtype), max_(max), pool_size_(o.pool_size), strides_(o.strides.value_or(o.pool_size)),
      padding_(o.padding) {
  for (auto v : {pool_size_[0], pool_size_[1], strides_[0], strides_[1]})
    if (v < 1)
      throw std::invalid_argument(describe() + ": pool_size and strides must be positive, got pool_size (" +
                                  std::to_string(pool_size_[0]) + ", " + std::to_string(pool_size_[1]) + "), strides (" +
                                  std::to_string(strides_[0]) + ", " + std::to_string(strides_[1]) + ")");
  if (padding_ != "valid" && padding_ != "same")
    throw std::invalid_argument(describe() + ": padding must be \"valid\" or \"same\", got \"" + padding_ + "\"");
}

Shape Pooling2D::compute_output_shape(const Shape& s) const {
  check_nhwc(describe(), s);
  Shape out = s;
  for (int i = 0; i < 2; ++i) {
    try {
      out[1 + i] = kernels::window_dim(class_name().c_str(), padding_ == "same" ? "SAME" : "VALID", s[1 + i],
                                       pool_size_[i], strides_[i], 1)
                       .out;
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(describe() + ": input shape " + s.to_string() + " is too small for pool_size (" +
                                  std::to_string(pool_size_[0]) + ", " + std::to_string(pool_size_[1]) + ") (" +
                                  e.what() + ")");
    }
  }
  return out;
}

Tensor Pooling2D::call(const Tensor& x, bool) {
  compute_output_shape(x.shape());  // validates with the layer's name
  const std::string p = padding_ == "same" ? "SAME" : "VALID";
  return max_ ? max_pool2d(x, pool_size_, strides_, p) : avg_pool2d(x, pool_size_, strides_, p);
}

MaxPooling2D::MaxPooling2D(Pooling2DOptions options) : Pooling2D("MaxPooling2D", true, std::move(options)) {}
AveragePooling2D::AveragePooling2D(Pooling2DOptions options)
    : Pooling2D("AveragePooling2D", false, std::move(options)) {}

GlobalPooling2D::GlobalPooling2D(const char* class_name, bool max, GlobalPooling2DOptions o)
    : Layer(class_name, o.name, std::nullopt, o.dtype), max_(max), keepdims_(o.keepdims) {}

Shape GlobalPooling2D::compute_output_shape(const Shape& s) const {
  check_nhwc(describe(), s);
  return keepdims_ ? Shape{s[0], 1, 1, s[3]} : Shape{s[0], s[3]};
}

Tensor GlobalPooling2D::call(const Tensor& x, bool) {
  check_nhwc(describe(), x.shape());
  return max_ ? reduce_max(x, {1, 2}, keepdims_) : reduce_mean(x, {1, 2}, keepdims_);
}

GlobalAveragePooling2D::GlobalAveragePooling2D(GlobalPooling2DOptions options)
    : GlobalPooling2D("GlobalAveragePooling2D", false, std::move(options)) {}
GlobalMaxPooling2D::GlobalMaxPooling2D(GlobalPooling2DOptions options)
    : GlobalPooling2D("GlobalMaxPooling2D", true, std::move(options)) {}

}  // namespace tapeflow::layers
