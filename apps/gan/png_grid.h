// A batch of square grayscale images as one PNG grid (tapeflow::io::encode_png: stb_image_write).
#pragma once

#include <cstdint>
#include <string>

#include "tape/core/tensor.h"

namespace gan_app {

// An encoded PNG and its size.
struct PngImage {
  std::string png;
  int height = 0, width = 0;
};

// Tiles images [n, side*side] with values in [lo, hi] (clipped) into a `cols`-wide grid with a 2-pixel
// black border, scaled by `zoom`, as an 8-bit grayscale PNG.
// Errors:   std::invalid_argument for a non-square image size or cols < 1.
PngImage png_grid(const tapeflow::Tensor& images, int cols, double lo, double hi, int zoom = 2);

// Writes png_grid(images, cols, lo, hi, zoom) to `path`.
// Errors:   those of png_grid; std::runtime_error if
//           the file cannot be written (message names the path).
void write_png_grid(const std::string& path, const tapeflow::Tensor& images, int cols, double lo, double hi,
                    int zoom = 2);

}  // namespace gan_app
