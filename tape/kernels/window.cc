// window_dim: TF's output-size rule (window.h).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "tape/kernels/window.h"

namespace tapeflow::kernels {

WindowDim window_dim(const char* op, const std::string& padding, std::int64_t in, std::int64_t k, std::int64_t s,
                     std::int64_t d, std::int64_t explicit_before, std::int64_t explicit_after) {
  auto bad = [&](const std::string& what) {
    return std::invalid_argument(std::string(op) + ": " + what + " (input size " + std::to_string(in) +
                                 ", window " + std::to_string(k) + ", stride " + std::to_string(s) + ", dilation " +
                                 std::to_string(d) + ", padding " + padding + ")");
  };
  if (in < 0 || k < 1 || s < 1 || d < 1) throw bad("window, stride and dilation must be positive");
  std::int64_t eff = 0, padded = 0, spare = 0;
  if (__builtin_mul_overflow(k - 1, d, &eff) || __builtin_add_overflow(eff, 1, &eff) ||
      __builtin_add_overflow(in, s - 1, &spare) || __builtin_add_overflow(in, explicit_before, &padded) ||
      __builtin_add_overflow(padded, explicit_after, &padded))
    throw bad("sizes overflow int64");
  WindowDim r;
  if (padding == "VALID") {
    r.out = in >= eff ? (in - eff) / s + 1 : 0;
  } else if (padding == "SAME") {
    r.out = spare / s;
    const std::int64_t total = std::max<std::int64_t>(eff - (in - (r.out - 1) * s), 0);  // in - (out-1)s is in (0, s]
    r.pad_before = total / 2;
    r.pad_after = total - r.pad_before;
  } else if (padding == "EXPLICIT") {
    if (explicit_before < 0 || explicit_after < 0) throw bad("explicit paddings must be >= 0");
    r.out = padded >= eff ? (padded - eff) / s + 1 : 0;
    r.pad_before = explicit_before;
    r.pad_after = explicit_after;
  } else {
    throw std::invalid_argument(std::string(op) + ": padding must be \"VALID\", \"SAME\" or explicit, got \"" +
                                padding + "\"");
  }
  if (r.out < 1) throw bad("computed output size " + std::to_string(r.out) + " is not positive");
  return r;
}

}  // namespace tapeflow::kernels
