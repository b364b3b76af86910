// PNG grids of samples, encoded by tapeflow::io::encode_png.
#include "png_grid.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "models/io/event_file_writer.h"
#include "tape/ops/math_ops.h"

namespace gan_app {

PngImage png_grid(const tapeflow::Tensor& images, int cols, double lo, double hi, int zoom) {
  const auto& shape = images.shape();
  if (shape.rank() != 2 || cols < 1 || zoom < 1)
    throw std::invalid_argument("png_grid: need images [n, side*side], cols >= 1 and zoom >= 1, got " +
                                shape.to_string());
  const std::int64_t n = shape[0];
  const auto side = static_cast<std::int64_t>(std::lround(std::sqrt(static_cast<double>(shape[1]))));
  if (side * side != shape[1])
    throw std::invalid_argument("png_grid: image size " + std::to_string(shape[1]) + " is not a square");
  const std::int64_t rows = (n + cols - 1) / cols, pad = 2, cell = side + pad;
  const std::int64_t w = (cols * cell + pad) * zoom, h = (rows * cell + pad) * zoom;
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(w * h), 0);
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
  return {tapeflow::io::encode_png(pixels, static_cast<int>(h), static_cast<int>(w), 1), static_cast<int>(h),
          static_cast<int>(w)};
}

void write_png_grid(const std::string& path, const tapeflow::Tensor& images, int cols, double lo, double hi,
                    int zoom) {
  const PngImage image = png_grid(images, cols, lo, hi, zoom);
  std::ofstream out(path, std::ios::binary);
  out.write(image.png.data(), static_cast<std::streamsize>(image.png.size()));
  if (!out.flush()) throw std::runtime_error("write_png_grid: cannot write '" + path + "'");
}

}  // namespace gan_app
