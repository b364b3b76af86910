// Writes a batch of square grayscale images as one PNG grid (stb_image_write).
#pragma once

#include <cstdint>
#include <string>

#include "tape/core/tensor.h"

namespace gan_app {

// Tiles images [n, side*side] with values in [lo, hi] (clipped) into a `cols`-wide grid with a 2-pixel
// black border, scaled by `zoom`, and writes it as an 8-bit grayscale PNG.
// Errors:   std::invalid_argument for a non-square image size or cols < 1; std::runtime_error if
//           the file cannot be written (message names the path).
void write_png_grid(const std::string& path, const tapeflow::Tensor& images, int cols, double lo, double hi,
                    int zoom = 2);

}  // namespace gan_app
