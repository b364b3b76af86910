// A benchmark / test hook: forces the algorithm that conv/conv.cc (and conv/pool_fused.cc) would
// otherwise choose from the shape, so each algorithm can be timed or checked on any shape it takes
// (bench/isa_bench.cc). Not for production code: kAuto, the default, is the shape rule of conv.cc.
// Facts:    One process-wide setting, read by every later kernels::conv2d, conv2d_backprop_input,
//           conv2d_backprop_filter, conv2d_max_pool2d and conv2d_backprop_filter_bias_with_argmax
//           call at every instruction-set level (set it between kernel calls, not during them).
//           What each call takes (others throw):
//             conv2d:                  kDirect, kIgemm
//             conv2d_backprop_input:   kIgemm, kIm2col
//             conv2d_backprop_filter:  kWinograd, kFilterGemm (both need the AVX2 copy), kDirect, kIm2col
//             conv2d_max_pool2d:       kPoolFused (direct rows pooled in cache), kWinograd (F(2x2, 3x3)),
//                                      kDirect / kIgemm (the convolution alone, then the pool)
//             conv2d_backprop_filter_bias_with_argmax: kPoolFused (dz rows made in cache), or any
//                                      conv2d_backprop_filter algorithm on a materialised dz
//           A Winograd product that meets an inf or NaN falls back to the shape rule's next choice.
// Errors:   std::invalid_argument naming the kernel and the algorithm when the forced algorithm does
//           not exist for that kernel, at this level, or for that shape.
#pragma once

#include <string_view>

namespace tapeflow::kernels::internal {

// The convolution algorithms, one file each in tape/kernels/conv/; kAuto: conv.cc's shape rule.
// kPointwise (a 1x1 stride-1 convolution as one GEMM on x itself) is chosen by the rule only: no
// kernel takes it forced.
enum class ConvAlgorithm { kAuto, kDirect, kIgemm, kIm2col, kFilterGemm, kWinograd, kPoolFused, kPointwise };

// Forces `algorithm` for the convolution calls from now on; returns the previous setting.
ConvAlgorithm force_conv_algorithm(ConvAlgorithm algorithm);
// The setting now (kAuto unless forced).
ConvAlgorithm forced_conv_algorithm();
// "auto", "direct", "igemm", "im2col", "filter_gemm", "winograd", "pool_fused", "pointwise".
std::string_view conv_algorithm_name(ConvAlgorithm algorithm);
// Throws std::invalid_argument: `kernel` cannot run the forced algorithm (`why`: for that shape, ...).
[[noreturn]] void throw_forced_conv_algorithm(std::string_view kernel, std::string_view why);

}  // namespace tapeflow::kernels::internal
