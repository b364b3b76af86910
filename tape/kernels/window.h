// window_dim: the one output-size rule of every windowed op (convolutions, pooling) and of the
// layers that compute their output shapes (layers/conv2d.cc, layers/pooling2d.cc): TensorFlow's.
// Shapes:   one spatial dimension at a time: input size `in`, window `k`, stride `s`, dilation `d`.
// Dtypes:   sizes only (int64).
// Ref:      tensorflow/core/framework/kernel_shape_util.cc
#pragma once

#include <cstdint>
#include <string>

namespace tapeflow::kernels {

// Output size and padding before of one spatial dimension, TF's rule
// (tensorflow/core/framework/kernel_shape_util.cc GetWindowedOutputSizeVerbose):
//   VALID: out = ceil((in - eff + 1) / s), pad 0;  eff = (k - 1) d + 1
//   SAME:  out = ceil(in / s), pad_total = max((out - 1) s + eff - in, 0), before = total / 2
//          (the extra pixel goes after: bottom/right);
//   EXPLICIT: out = (in + before + after - eff) / s + 1.
// Errors:   std::invalid_argument naming `op` and the values when out would be < 1 or an argument
//           is not positive.
struct WindowDim {
  std::int64_t out = 0;         // output size of the dimension
  std::int64_t pad_before = 0;  // zeros padded before the input (top/left)
  std::int64_t pad_after = 0;   // zeros padded after the input (bottom/right)
};
// The output size and padding of one spatial dimension for `padding` "VALID", "SAME" or "EXPLICIT"
// (explicit_before/explicit_after used only there), by the rule above; `op` names the caller in errors.
WindowDim window_dim(const char* op, const std::string& padding, std::int64_t in, std::int64_t k, std::int64_t s,
                     std::int64_t d, std::int64_t explicit_before = 0, std::int64_t explicit_after = 0);

}  // namespace tapeflow::kernels
