// kernels::float_to_half / half_to_float (tape/kernels/convert.h) at every instruction-set level
// this CPU has: every half value round-trips exactly, float values round to nearest with ties to
// even (checked against a float64 reference), overflow gives inf, and every level gives the same
// bits (the header's claim; NaN payloads aside).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tape/kernels/convert.h"
#include "tests/testing/isa_cap.h"

namespace tapeflow::kernels {
namespace {

std::vector<CpuIsa> levels() {
  std::vector<CpuIsa> v{CpuIsa::kBaseline};
  if (host_cpu_isa() >= CpuIsa::kAvx2) v.push_back(CpuIsa::kAvx2);
  if (host_cpu_isa() >= CpuIsa::kAvx512) v.push_back(CpuIsa::kAvx512);
  return v;
}

// The value of half bits h, decoded by hand in double (sign, 5-bit exponent, 10-bit fraction).
double half_value(std::uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 31, fraction = h & 1023;
  double v = exponent == 0 ? std::ldexp(fraction, -24)
             : exponent == 31 ? (fraction ? std::numeric_limits<double>::quiet_NaN() : INFINITY)
                              : std::ldexp(1024 + fraction, exponent - 25);
  return sign ? -v : v;
}

TEST(ConvertHalf, EveryHalfRoundTripsExactlyAtEveryLevel) {
  std::vector<std::uint16_t> all(65536);
  for (int i = 0; i < 65536; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::uint16_t>(i);
  for (CpuIsa isa : levels()) {
    SCOPED_TRACE(cpu_isa_name(isa));
    testing::IsaCap cap(isa);
    std::vector<float> f(all.size());
    half_to_float(all.data(), f.data(), static_cast<std::int64_t>(all.size()));
    std::vector<std::uint16_t> back(all.size());
    float_to_half(f.data(), back.data(), static_cast<std::int64_t>(f.size()));
    for (std::size_t i = 0; i < all.size(); ++i) {
      const double want = half_value(all[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(f[i])) << i;
        ASSERT_EQ(back[i] & 0x7c00, 0x7c00) << i;
        ASSERT_NE(back[i] & 0x3ff, 0) << i;  // still a NaN
        continue;
      }
      ASSERT_EQ(static_cast<double>(f[i]), want) << "half bits " << i;
      ASSERT_EQ(back[i], all[i]) << "half bits " << i;
    }
  }
}

// The nearest half by brute force over the finite halves of the same sign (ties: the even one),
// or inf from 65520 on (the midpoint between the largest half, 65504, and 2^16).
std::uint16_t nearest_half(float x) {
  const double v = std::fabs(static_cast<double>(x));
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (v >= 65520.0) return sign | 0x7c00;
  std::uint16_t best = 0;
  double best_err = INFINITY;
  for (std::uint16_t h = 0; h < 0x7c00; ++h) {
    const double err = std::fabs(half_value(h) - v);
    if (err < best_err || (err == best_err && (h & 1) == 0)) best = h, best_err = err;
  }
  return sign | best;
}

TEST(ConvertHalf, FloatsRoundToNearestTiesToEvenTheSameAtEveryLevel) {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65519.99f, 65520.0f, -1e9f, 1e-9f, 5.9604645e-08f,
                          2.9802322e-08f, 2.9802326e-08f, INFINITY, -INFINITY, 1.0009765625f, 1.00048828125f,
                          1.00146484375f, 6.1035156e-05f, 3.0517578e-05f};  // ties, subnormals, overflow
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  std::uniform_int_distribution<int> e(-26, 17);
  for (int i = 0; i < 200; ++i) x.push_back(std::ldexp(u(gen), e(gen)));
  std::vector<std::uint16_t> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = nearest_half(x[i]);
  for (CpuIsa isa : levels()) {
    SCOPED_TRACE(cpu_isa_name(isa));
    testing::IsaCap cap(isa);
    for (std::size_t n : {x.size(), std::size_t{7}, std::size_t{9}}) {  // vector body and tails
      std::vector<std::uint16_t> y(n, 0xffff);
      float_to_half(x.data(), y.data(), static_cast<std::int64_t>(n));
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], want[i]) << "x = " << x[i];
    }
  }
}

}  // namespace
}  // namespace tapeflow::kernels
