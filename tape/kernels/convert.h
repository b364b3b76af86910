// Float32 <-> IEEE 754 binary16 ("half", its bits in a std::uint16_t) over contiguous arrays: the
// wire format of distribute/'s fp16 gradient compression (Horovod's Compression.fp16).
//
// Shapes:   x and y cover n elements each (n >= 0) and do not overlap.
// Facts:    float_to_half rounds to nearest, ties to even (IEEE 754; F16C's
//           _MM_FROUND_TO_NEAREST_INT); magnitudes of 65520 and above become ±inf, below 2^-25
//           ±0, in between the half subnormals; ±inf stays ±inf, NaN stays a quiet NaN.
//           half_to_float is exact. One source (ukernels/convert_loops.cc) compiled per
//           instruction-set level (tape/core/cpu_isa.h): F16C instructions at kAvx2 and kAvx512,
//           Eigen::half's integer conversion at kBaseline. Bits: the same at every level (both
//           are the IEEE conversion), except the payload bits of a NaN.
// Ref:      IEEE 754-2008 §5.4.2 (formatOf conversions); Intel SDM VCVTPS2PH / VCVTPH2PS.
#pragma once

#include <cstdint>

namespace tapeflow::kernels {

// y[i] = x[i] rounded to the nearest half (ties to even), as bits.
void float_to_half(const float* x, std::uint16_t* y, std::int64_t n);
// y[i] = the half whose bits are x[i], exactly.
void half_to_float(const std::uint16_t* x, float* y, std::int64_t n);

}  // namespace tapeflow::kernels
