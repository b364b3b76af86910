#include "tape/core/random.h"

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace tapeflow {
namespace {

struct Moments {
  double mean, sd;
};
template <class T>
Moments moments(const std::vector<T>& x) {
  double s = 0, s2 = 0;
  for (T v : x) s += v, s2 += double(v) * v;
  const double mean = s / x.size();
  return {mean, std::sqrt(s2 / x.size() - mean * mean)};
}

TEST(Generator, SameSeedSameStreamDifferentSeedDifferent) {
  Generator a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    differs |= x != c.next_u64();
  }
  EXPECT_TRUE(differs);
}

TEST(Generator, KnownFirstOutputForSeedZero) {
  // splitmix64(0) seeds xoshiro256**; pins the algorithm so checkpoints stay loadable.
  Generator g(0);
  const std::uint64_t first = g.next_u64();
  Generator h(0);
  EXPECT_EQ(first, h.next_u64());
  EXPECT_EQ(first, 0x99EC5F36CB75F2B4ull);
}

TEST(Generator, StateRoundTripContinuesBitIdentically) {
  Generator g(7);
  std::vector<float> tmp(3);
  g.fill_normal(tmp.data(), 3, 0.0f, 1.0f);  // odd count leaves a cached normal
  const auto st = g.state();
  ASSERT_EQ(st.size(), Generator::kStateWords);
  std::vector<double> want(10), got(10);
  g.fill_normal(want.data(), 10, 0.0, 1.0);
  Generator h(999);
  h.set_state(st);
  h.fill_normal(got.data(), 10, 0.0, 1.0);
  EXPECT_EQ(want, got);
  EXPECT_EQ(g.state(), h.state());
}

TEST(Generator, SetStateRejectsBadInput) {
  Generator g(1);
  EXPECT_THROW(g.set_state({1, 2, 3}), std::invalid_argument);
  EXPECT_THROW(g.set_state({0, 0, 0, 0, 0, 0}), std::invalid_argument);
  EXPECT_THROW(g.set_state({1, 2, 3, 4, 2, 0}), std::invalid_argument);
}

TEST(Generator, UniformRangeMeanAndStd) {
  Generator g(3);
  const int n = 200000;
  std::vector<float> u(n);
  g.fill_uniform(u.data(), n, -2.0f, 6.0f);
  for (float v : u) {
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 6.0f);
  }
  const Moments m = moments(u);
  EXPECT_NEAR(m.mean, 2.0, 0.03);
  EXPECT_NEAR(m.sd * m.sd, 64.0 / 12.0, 0.06);
}

TEST(Generator, NormalMeanAndStd) {
  Generator g(4);
  const int n = 200000;
  std::vector<double> x(n);
  g.fill_normal(x.data(), n, 1.5, 2.0);
  const Moments m = moments(x);
  EXPECT_NEAR(m.mean, 1.5, 0.02);
  EXPECT_NEAR(m.sd, 2.0, 0.02);
}

// fill_normal transforms its pairs in parallel; the values and the state it leaves must be those
// of next_normal() called once per element (odd and even lengths, with a cached normal pending).
// Long fills draw in parallel chunks, each started by a jump: the values and the state after must
// be those of next_u64 in order, on one thread or two, at chunk boundaries and past them.
template <class T>
void expect_uniform_and_mask_are_the_stream(int threads) {
  for (std::int64_t n : {std::int64_t{100}, std::int64_t{1} << 14, (std::int64_t{3} << 14) + 5}) {
    Generator a(7), b(7), c(7);
    std::vector<T> got(static_cast<std::size_t>(n)), mask(static_cast<std::size_t>(n));
    tbb::task_arena(threads).execute([&] {
      a.fill_uniform(got.data(), n, T(-2), T(6));
      c.fill_keep_mask(mask.data(), n, T(0.5), T(2));
    });
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint64_t bits = b.next_u64();
      const T u = sizeof(T) == 4 ? static_cast<T>(bits >> 40) * T(0x1.0p-24) : static_cast<T>(bits >> 11) * T(0x1.0p-53);
      ASSERT_EQ(got[static_cast<std::size_t>(i)], T(-2) + T(8) * u) << "n=" << n << " i=" << i << " threads=" << threads;
      ASSERT_EQ(mask[static_cast<std::size_t>(i)], u >= T(0.5) ? T(2) : T(0)) << "n=" << n << " i=" << i;
    }
    EXPECT_EQ(a.state(), b.state()) << "n=" << n << " threads=" << threads;
    EXPECT_EQ(c.state(), b.state()) << "n=" << n << " threads=" << threads;
  }
}
TEST(Generator, LongFillsAreTheNextU64StreamOnAnyThreadCount) {
  for (int threads : {1, 2}) {
    expect_uniform_and_mask_are_the_stream<float>(threads);
    expect_uniform_and_mask_are_the_stream<double>(threads);
  }
}

// The keep mask compares the draw's top bits with ceil(rate 2^b): the same mask as u >= rate for
// rates that are not multiples of 2^-b, tiny ones, 0 and just below 1.
template <class T>
void expect_keep_mask_is_u_at_least_rate() {
  const std::int64_t n = 5000;
  // Rates on and just above the stream's own draws 3 and 4 (k 2^-b, and a hair more: keep, drop).
  std::vector<T> first(5);
  Generator(11).fill_uniform(first.data(), 5, T(0), T(1));
  for (T rate : {T(0), T(1e-30), T(0.1), T(0.3), std::nextafter(T(0.5), T(0)), T(0.5), T(0.7), T(0.999999), first[3],
                 std::nextafter(first[3], T(1)), first[4], std::nextafter(first[4], T(1))}) {
    Generator b(11), c(11);
    std::vector<T> mask(static_cast<std::size_t>(n));
    c.fill_keep_mask(mask.data(), n, rate, T(3));
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint64_t bits = b.next_u64();
      const T u = sizeof(T) == 4 ? static_cast<T>(bits >> 40) * T(0x1.0p-24) : static_cast<T>(bits >> 11) * T(0x1.0p-53);
      ASSERT_EQ(mask[static_cast<std::size_t>(i)], u >= rate ? T(3) : T(0)) << "rate=" << rate << " i=" << i;
    }
  }
}
TEST(Generator, KeepMaskIsUniformAtLeastRate) {
  expect_keep_mask_is_u_at_least_rate<float>();
  expect_keep_mask_is_u_at_least_rate<double>();
}

// fill_keep_bits is fill_keep_mask packed: bit i set exactly where the mask is scale, the bits
// past n zero, the same state after; one thread or two, lengths below, at and past a chunk.
template <class T>
void expect_keep_bits_are_the_mask(int threads) {
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{100}, std::int64_t{1} << 14, (std::int64_t{3} << 14) + 5}) {
    for (T rate : {T(0), T(0.1), T(0.5), T(0.999999)}) {
      Generator a(9), c(9);
      std::vector<T> mask(static_cast<std::size_t>(n));
      std::vector<std::uint32_t> words(static_cast<std::size_t>((n + 31) / 32), 0xFFFFFFFFu);
      tbb::task_arena(threads).execute([&] {
        a.fill_keep_mask(mask.data(), n, rate, T(2));
        c.fill_keep_bits(words.data(), n, rate);
      });
      for (std::int64_t i = 0; i < (n + 31) / 32 * 32; ++i) {
        const bool bit = (words[static_cast<std::size_t>(i / 32)] >> (i % 32)) & 1u;
        ASSERT_EQ(bit, i < n && mask[static_cast<std::size_t>(i)] == T(2)) << "n=" << n << " i=" << i << " rate=" << rate;
      }
      EXPECT_EQ(a.state(), c.state()) << "n=" << n << " threads=" << threads;
    }
  }
}
TEST(Generator, KeepBitsAreTheKeepMaskPacked) {
  for (int threads : {1, 2}) {
    expect_keep_bits_are_the_mask<float>(threads);
    expect_keep_bits_are_the_mask<double>(threads);
  }
}

TEST(Generator, FillNormalIsTheNextNormalStreamBitForBit) {
  for (int n : {1, 2, 7, 5000, 50001}) {
    for (bool pending : {false, true}) {
      Generator a(11), b(11);
      if (pending) a.next_normal(), b.next_normal();  // leaves the sine half cached
      std::vector<float> got(static_cast<std::size_t>(n));
      a.fill_normal(got.data(), n, 0.5f, 3.0f);
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(got[static_cast<std::size_t>(i)], 0.5f + 3.0f * static_cast<float>(b.next_normal()))
            << "n=" << n << " pending=" << pending << " i=" << i;
      EXPECT_EQ(a.state(), b.state()) << "n=" << n << " pending=" << pending;
      EXPECT_EQ(a.next_normal(), b.next_normal());
    }
  }
}

TEST(Generator, TruncatedNormalStaysWithinTwoStddev) {
  Generator g(5);
  const int n = 100000;
  std::vector<float> x(n);
  g.fill_truncated_normal(x.data(), n, 0.0f, 0.5f);
  for (float v : x) ASSERT_LE(std::abs(v), 1.0f);
  // Std of a standard normal truncated at +-2 is about 0.8796.
  const Moments m = moments(x);
  EXPECT_NEAR(m.mean, 0.0, 0.01);
  EXPECT_NEAR(m.sd, 0.5 * 0.8796, 0.01);
}

TEST(Generator, UniformIntIsInRangeAndCoversAllValues) {
  Generator g(6);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) {
    const auto v = g.uniform_int(7);
    ASSERT_LT(v, 7u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
  EXPECT_EQ(g.uniform_int(1), 0u);
  EXPECT_THROW(g.uniform_int(0), std::invalid_argument);
}

TEST(Generator, SplitIsDeterministicAndIndependent) {
  Generator a(8), b(8);
  Generator ca = a.split(), cb = b.split();
  EXPECT_EQ(ca.next_u64(), cb.next_u64());
  EXPECT_EQ(a.next_u64(), b.next_u64());
  Generator p(9);
  Generator child = p.split();
  EXPECT_NE(child.next_u64(), p.next_u64());
}

}  // namespace
}  // namespace tapeflow
