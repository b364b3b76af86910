// PNG grid writer; the only translation unit with the stb_image_write implementation (static).
#include "png_grid.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "tape/ops/math_ops.h"

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

namespace gan_app {

void write_png_grid(const std::string& path, const tapeflow::Tensor& images, int cols, double lo, double hi,
                    int zoom) {
  const auto& shape = images.shape();
  if (shape.rank() != 2 || cols < 1 || zoom < 1)
    throw std::invalid_argument("write_png_grid: need images [n, side*side], cols >= 1 and zoom >= 1, got " +
                                shape.to_string());
  const std::int64_t n = shape[0];
  const auto side = static_cast<std::int64_t>(std::lround(std::sqrt(static_cast<double>(shape[1]))));
  if (side * side != shape[1])
    throw std::invalid_argument("write_png_grid: image size " + std::to_string(shape[1]) + " is not a square");
  const std::int64_t rows = (n + cols - 1) / cols, pad = 2, cell = side + pad;
  const std::int64_t w = (cols * cell + pad) * zoom, h = (rows * cell + pad) * zoom;
  std::vector<unsigned char> pixels(static_cast<std::size_t>(w * h), 0);
  const std::vector<double> v = tapeflow::cast(images, tapeflow::DType::kFloat64).to_vector<double>();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t x0 = pad + (i % cols) * cell, y0 = pad + (i / cols) * cell;
    for (std::int64_t r = 0; r < side; ++r)
      for (std::int64_t c = 0; c < side; ++c) {
        const double t = std::clamp((v[static_cast<std::size_t>(i * side * side + r * side + c)] - lo) / (hi - lo), 0.0, 1.0);
        const auto value = static_cast<unsigned char>(std::lround(255.0 * t));
        for (int zy = 0; zy < zoom; ++zy)
          for (int zx = 0; zx < zoom; ++zx)
            pixels[static_cast<std::size_t>(((y0 + r) * zoom + zy) * w + (x0 + c) * zoom + zx)] = value;
      }
  }
  if (!stbi_write_png(path.c_str(), static_cast<int>(w), static_cast<int>(h), 1, pixels.data(), static_cast<int>(w)))
    throw std::runtime_error("write_png_grid: cannot write '" + path + "'");
}

}  // namespace gan_app
