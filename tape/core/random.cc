#include "tape/core/random.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace tapeflow {
namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

constexpr double kTwoPi = 6.283185307179586476925286766559;

// Box-Muller on two consecutive 64-bit draws: {r cos, r sin}, u1 in (0, 1] so log(u1) is finite.
struct NormalPair {
  double first, second;
};
inline NormalPair box_muller(std::uint64_t a, std::uint64_t b) {
  const double u1 = static_cast<double>((a >> 11) + 1) * 0x1.0p-53;
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  const double r = std::sqrt(-2.0 * std::log(u1));
  return {r * std::cos(kTwoPi * u2), r * std::sin(kTwoPi * u2)};
}

using State = std::array<std::uint64_t, 4>;

// xoshiro256**: a draw is a function of the state; the step is linear over GF(2) (xors, shifts,
// rotations of the state bits).
inline std::uint64_t xoshiro_output(const State& s) { return rotl(s[1] * 5, 7) * 9; }
inline void xoshiro_step(State& s) {
  const std::uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
}

// Draws per chunk of a long fill: each chunk starts from the state kChunkDraws steps after the
// previous chunk's, found by a jump (a 256 x 256 matrix over GF(2) applied to the state), so the
// chunks run in parallel and give the same draws as one thread drawing in order.
constexpr std::int64_t kChunkDraws = std::int64_t{1} << 14;

// Column j: the state kChunkDraws steps after the state with only bit j set (about 4M steps, once
// per process).
const std::array<State, 256>& chunk_jump_columns() {
  static const std::array<State, 256> columns = [] {
    std::array<State, 256> c{};
    for (int j = 0; j < 256; ++j) {
      c[j][j / 64] = std::uint64_t{1} << (j % 64);
      for (std::int64_t k = 0; k < kChunkDraws; ++k) xoshiro_step(c[j]);
    }
    return c;
  }();
  return columns;
}

State jump_one_chunk(const State& s) {
  const std::array<State, 256>& c = chunk_jump_columns();
  State r{};
  for (int j = 0; j < 256; ++j)
    if ((s[j / 64] >> (j % 64)) & 1)
      for (int w = 0; w < 4; ++w) r[w] ^= c[j][w];
  return r;
}

// f(i, bits) for draws i = 0 .. n-1 of the stream at s, in parallel chunks for long streams (the
// same values as drawing in order); s ends n draws on.
template <class F>
void draw_stream(State& s, std::int64_t n, F f) {
  const std::int64_t chunks = (n + kChunkDraws - 1) / kChunkDraws;
  if (chunks < 2) {
    for (std::int64_t i = 0; i < n; ++i) {
      f(i, xoshiro_output(s));
      xoshiro_step(s);
    }
    return;
  }
  std::vector<State> start(static_cast<std::size_t>(chunks));
  start[0] = s;
  for (std::size_t c = 1; c < start.size(); ++c) start[c] = jump_one_chunk(start[c - 1]);
  // Core sits below kernels/parallel.h: oneTBB directly, capped by the same tbb::global_control.
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, chunks, 1), [&](const tbb::blocked_range<std::int64_t>& r) {
    for (std::int64_t c = r.begin(); c < r.end(); ++c) {
      State st = start[static_cast<std::size_t>(c)];
      const std::int64_t end = std::min(n, (c + 1) * kChunkDraws);
      for (std::int64_t i = c * kChunkDraws; i < end; ++i) {
        f(i, xoshiro_output(st));
        xoshiro_step(st);
      }
      if (c == chunks - 1) s = st;
    }
  });
}

// The uniform [0, 1) value of a draw: its top 24 (float) or 53 (double) bits.
template <class T>
T unit_uniform(std::uint64_t bits) {
  if constexpr (sizeof(T) == 4) return static_cast<T>(bits >> 40) * T(0x1.0p-24);
  else return static_cast<T>(bits >> 11) * T(0x1.0p-53);
}

}  // namespace

Generator::Generator(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (auto& w : s_) w = splitmix64(x);
}

std::uint64_t Generator::next_u64() {
  const std::uint64_t result = xoshiro_output(s_);
  xoshiro_step(s_);
  return result;
}

double Generator::next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::next_normal() {
  if (has_cached_) {
    has_cached_ = false;
    return cached_;
  }
  const std::uint64_t a = next_u64();
  const NormalPair z = box_muller(a, next_u64());
  cached_ = z.second;
  has_cached_ = true;
  return z.first;
}

template <class T>
void Generator::fill_uniform(T* y, std::int64_t n, T lo, T hi) {
  const T width = hi - lo;
  draw_stream(s_, n, [&](std::int64_t i, std::uint64_t bits) {
    T v = lo + width * unit_uniform<T>(bits);
    if (v >= hi && hi > lo) v = std::nextafter(hi, lo);  // rounding can reach hi
    y[i] = v;
  });
}

namespace {
// fill_uniform(y, n, 0, 1)'s value is unit_uniform itself (0 + 1 * u, and u < 1). u = k 2^-b with
// k the draw's top b bits (24 for float, 53 for double), so u >= rate exactly when
// k >= ceil(rate 2^b): rate 2^b and its ceiling are exact in T, and comparing integers skips the
// conversion on every draw (same mask bit for bit).
template <class T>
constexpr int kKeepBits = sizeof(T) == 4 ? 24 : 53;
template <class T>
std::uint64_t keep_threshold(T rate) {
  constexpr int kBits = kKeepBits<T>;
  const T scaled = std::ceil(rate * static_cast<T>(std::uint64_t{1} << kBits));
  return !(scaled > 0) ? 0 : scaled >= static_cast<T>(std::uint64_t{1} << kBits) ? std::uint64_t{1} << kBits
                                                                                 : static_cast<std::uint64_t>(scaled);
}
}  // namespace

template <class T>
void Generator::fill_keep_mask(T* y, std::int64_t n, T rate, T scale) {
  constexpr int kBits = kKeepBits<T>;
  const std::uint64_t threshold = keep_threshold(rate);
  // Picked from a table, not branched on: the branch goes either way at random (5x slower).
  const T value[2] = {T(0), scale};
  draw_stream(s_, n, [&](std::int64_t i, std::uint64_t bits) { y[i] = value[(bits >> (64 - kBits)) >= threshold]; });
}

template <class T>
void Generator::fill_keep_bits(std::uint32_t* words, std::int64_t n, T rate) {
  constexpr int kBits = kKeepBits<T>;
  const std::uint64_t threshold = keep_threshold(rate);
  std::fill(words, words + (n + 31) / 32, 0u);
  // A parallel chunk is a multiple of 32 draws: every word is written by one thread.
  static_assert(kChunkDraws % 32 == 0);
  draw_stream(s_, n, [&](std::int64_t i, std::uint64_t bits) {
    words[i >> 5] |= static_cast<std::uint32_t>((bits >> (64 - kBits)) >= threshold) << (i & 31);
  });
}

template <class T>
void Generator::fill_normal(T* y, std::int64_t n, T mean, T stddev) {
  if (n <= 0) return;
  std::int64_t i = 0;
  if (has_cached_) y[i++] = mean + stddev * static_cast<T>(next_normal());
  // The same draws as next_normal() pair by pair: the uniforms come off the stream in order (cheap),
  // the Box-Muller transform (log, sqrt, sin, cos: ~90% of the time) runs in parallel on them.
  const std::int64_t pairs = (n - i) / 2;
  std::vector<std::uint64_t> bits(static_cast<std::size_t>(2 * pairs));
  draw_stream(s_, 2 * pairs, [&](std::int64_t j, std::uint64_t b) { bits[static_cast<std::size_t>(j)] = b; });
  T* out = y + i;
  // Each pair depends on its own two draws only, so any partition gives the same values (core sits
  // below kernels/parallel.h; oneTBB directly, capped by the same tbb::global_control).
  auto transform = [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t p = b; p < e; ++p) {
      const NormalPair z = box_muller(bits[2 * p], bits[2 * p + 1]);
      out[2 * p] = mean + stddev * static_cast<T>(z.first);
      out[2 * p + 1] = mean + stddev * static_cast<T>(z.second);
    }
  };
  constexpr std::int64_t kGrain = 1024;
  if (pairs <= kGrain)
    transform(0, pairs);
  else
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, pairs, kGrain),
                      [&](const tbb::blocked_range<std::int64_t>& r) { transform(r.begin(), r.end()); });
  // next_normal() leaves the last pair's second value in the (then unflagged) cache: so does this,
  // keeping state() identical too.
  if (pairs > 0) cached_ = box_muller(bits[2 * pairs - 2], bits[2 * pairs - 1]).second;
  if (i + 2 * pairs < n) y[n - 1] = mean + stddev * static_cast<T>(next_normal());
}

template <class T>
void Generator::fill_truncated_normal(T* y, std::int64_t n, T mean, T stddev) {
  for (std::int64_t i = 0; i < n; ++i) {
    double z;
    do z = next_normal();
    while (std::abs(z) > 2.0);
    y[i] = mean + stddev * static_cast<T>(z);
  }
}

std::uint64_t Generator::uniform_int(std::uint64_t n) {
  if (n == 0) throw std::invalid_argument("Generator::uniform_int: n must be positive, got 0");
  // Lemire's nearly divisionless method.
  unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
  std::uint64_t low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(next_u64()) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

std::vector<std::uint64_t> Generator::state() const {
  return {s_[0], s_[1], s_[2], s_[3], has_cached_ ? 1u : 0u, std::bit_cast<std::uint64_t>(cached_)};
}

void Generator::set_state(const std::vector<std::uint64_t>& s) {
  if (s.size() != kStateWords)
    throw std::invalid_argument("Generator::set_state: expected " + std::to_string(kStateWords) + " words, got " +
                                std::to_string(s.size()));
  if ((s[0] | s[1] | s[2] | s[3]) == 0)
    throw std::invalid_argument("Generator::set_state: the xoshiro state must not be all zero");
  if (s[4] > 1)
    throw std::invalid_argument("Generator::set_state: cached flag must be 0 or 1, got " + std::to_string(s[4]));
  for (int i = 0; i < 4; ++i) s_[i] = s[i];
  has_cached_ = s[4] == 1;
  cached_ = std::bit_cast<double>(s[5]);
}

Generator Generator::split() { return Generator(next_u64() ^ 0x5DEECE66DA3B1F27ull); }

template void Generator::fill_uniform<float>(float*, std::int64_t, float, float);
template void Generator::fill_uniform<double>(double*, std::int64_t, double, double);
template void Generator::fill_keep_mask<float>(float*, std::int64_t, float, float);
template void Generator::fill_keep_mask<double>(double*, std::int64_t, double, double);
template void Generator::fill_keep_bits<float>(std::uint32_t*, std::int64_t, float);
template void Generator::fill_keep_bits<double>(std::uint32_t*, std::int64_t, double);
template void Generator::fill_normal<float>(float*, std::int64_t, float, float);
template void Generator::fill_normal<double>(double*, std::int64_t, double, double);
template void Generator::fill_truncated_normal<float>(float*, std::int64_t, float, float);
template void Generator::fill_truncated_normal<double>(double*, std::int64_t, double, double);

}  // namespace tapeflow
