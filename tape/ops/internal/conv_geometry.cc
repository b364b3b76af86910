#include "tape/ops/internal/conv_geometry.h"

#include <limits>
#include <stdexcept>

#include "tape/ops/internal/op_helpers.h"

namespace tapeflow::ops_internal {

Attrs window_attrs(Size2D strides, const Padding2D& padding, Size2D dilations) {
  const auto& p = padding.explicit_paddings();
  return Attrs()
      .set("strides", std::vector<std::int64_t>{strides[0], strides[1]})
      .set("padding", padding.mode())
      .set("explicit_paddings", std::vector<std::int64_t>{p[0], p[1], p[2], p[3]})
      .set("dilations", std::vector<std::int64_t>{dilations[0], dilations[1]});
}

std::function<void(const Attrs&)> check_window_attrs_of(const char* op, bool pool, const char* shape_attr) {
  return [op, pool, shape_attr](const Attrs& a) {
    constexpr std::int64_t kMax = (std::int64_t{1} << 31) - 1;
    check_ints_attr(op, a, "strides", 2, 2, 1, kMax);
    check_ints_attr(op, a, "dilations", 2, 2, 1, kMax);
    check_ints_attr(op, a, "explicit_paddings", 4, 4, 0, kMax);
    if (pool) {
      check_ints_attr(op, a, "ksize", 2, 2, 1, kMax);
      check_string_attr(op, a, "padding", {"VALID", "SAME"});
    } else {
      check_string_attr(op, a, "padding", {"VALID", "SAME", "EXPLICIT"});
    }
    if (shape_attr) check_shape_attr(op, a, shape_attr, 4);
  };
}

void check_argmax_image(const char* op, const Shape& s) {
  if (static_cast<double>(s[1]) * static_cast<double>(s[2]) * static_cast<double>(s[3]) >
      std::numeric_limits<std::int32_t>::max())
    throw std::invalid_argument(std::string(op) + ": an image of " + s.to_string() +
                                " has too many elements for int32 argmax indices (at most 2^31 - 1)");
}

void check_rank4(const char* op, const char* what, const Shape& s) {
  if (s.rank() != 4)
    throw std::invalid_argument(std::string(op) + ": " + what + " must have rank 4 (NHWC / HWIO), got shape " +
                                s.to_string());
}

void check_grad_shape(const char* op, const Shape& expected, const Tensor& grad) {
  if (grad.shape() != expected)
    throw std::invalid_argument(std::string(op) + ": out_backprop must have the forward output's shape " +
                                expected.to_string() + ", got " + grad.shape().to_string());
}

kernels::Conv2DGeometry window_geometry(const char* op, const Shape& input, std::int64_t kh, std::int64_t kw,
                                        std::int64_t c_window, std::int64_t f, const Attrs& attrs) {
  check_rank4(op, "input", input);
  const auto& s = attrs.get_ints("strides");
  const auto& d = attrs.get_ints("dilations");
  const auto& e = attrs.get_ints("explicit_paddings");
  const std::string& padding = attrs.get_string("padding");
  if (s.size() != 2 || d.size() != 2 || e.size() != 4)
    throw std::invalid_argument(std::string(op) + ": strides " + ints_to_string(s) + " and dilations " +
                                ints_to_string(d) + " need 2 entries, explicit_paddings " + ints_to_string(e) + " 4");
  if (c_window > 0 && c_window != input[3])
    throw std::invalid_argument(std::string(op) + ": input channels " + std::to_string(input[3]) +
                                " differ from the filter's input channels " + std::to_string(c_window) +
                                " (input " + input.to_string() + ")");
  for (std::int64_t v : input)
    if (v < 0) throw std::invalid_argument(std::string(op) + ": negative input size " + input.to_string());
  kernels::Conv2DGeometry g;
  g.n = input[0];
  g.h = input[1];
  g.w = input[2];
  g.c = input[3];
  g.kh = kh;
  g.kw = kw;
  g.f = f;
  g.sh = s[0];
  g.sw = s[1];
  g.dh = d[0];
  g.dw = d[1];
  const kernels::WindowDim rows = kernels::window_dim(op, padding, g.h, kh, g.sh, g.dh, e[0], e[1]);
  const kernels::WindowDim cols = kernels::window_dim(op, padding, g.w, kw, g.sw, g.dw, e[2], e[3]);
  g.ho = rows.out;
  g.wo = cols.out;
  g.pad_top = rows.pad_before;
  g.pad_left = cols.pad_before;
  return g;
}

Shape output_shape(const kernels::Conv2DGeometry& g) { return Shape{g.n, g.ho, g.wo, g.f}; }

}  // namespace tapeflow::ops_internal
