#include "layers/reshaping2d.h"

#include <stdexcept>

#include "layers/internal/nhwc.h"

#include "tape/ops/array_ops.h"

namespace tapeflow::layers {

using internal::check_nhwc;

UpSampling2D::UpSampling2D(UpSampling2DOptions options) : Layer("UpSampling2D", options.name, std::nullopt, options.dtype), options_(options) {
  if (options_.size[0] < 1 || options_.size[1] < 1)
    throw std::invalid_argument(describe() + ": size must be positive, got (" + std::to_string(options_.size[0]) +
                                ", " + std::to_string(options_.size[1]) + ")");
  if (options_.interpolation != "nearest")
    throw std::invalid_argument(describe() + ": only interpolation \"nearest\" is supported, got \"" +
                                options_.interpolation + "\"");
}

Shape UpSampling2D::compute_output_shape(const Shape& s) const {
  check_nhwc(describe(), s);
  return Shape{s[0], s[1] * options_.size[0], s[2] * options_.size[1], s[3]};
}

// [N, H, 1, W, 1, C] broadcast to [N, H, sh, W, sw, C], then merged: each pixel repeated.
Tensor UpSampling2D::call(const Tensor& x, bool) {
  const Shape out = compute_output_shape(x.shape());
  const Shape& s = x.shape();
  const auto [sh, sw] = options_.size;
  Tensor y = reshape(x, Shape{s[0], s[1], 1, s[2], 1, s[3]});
  y = broadcast_to(y, Shape{s[0], s[1], sh, s[2], sw, s[3]});
  return reshape(y, out);
}

ZeroPadding2D::ZeroPadding2D(ZeroPadding2DOptions options) : Layer("ZeroPadding2D", options.name, std::nullopt, options.dtype), options_(options) {
  for (const auto& p : options_.padding)
    for (auto v : p)
      if (v < 0) throw std::invalid_argument(describe() + ": padding must be >= 0, got " + std::to_string(v));
}

Shape ZeroPadding2D::compute_output_shape(const Shape& s) const {
  check_nhwc(describe(), s);
  const auto& p = options_.padding;
  return Shape{s[0], s[1] + p[0][0] + p[0][1], s[2] + p[1][0] + p[1][1], s[3]};
}

Tensor ZeroPadding2D::call(const Tensor& x, bool) {
  check_nhwc(describe(), x.shape());
  const auto& p = options_.padding;
  return pad(x, {{0, 0}, {p[0][0], p[0][1]}, {p[1][0], p[1][1]}, {0, 0}});
}

}  // namespace tapeflow::layers
