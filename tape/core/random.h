// A seeded pseudo-random generator: xoshiro256** seeded through splitmix64 (no global RNG).
// Facts:    Same seed => same stream on every platform. Normals use Box-Muller and cache the
//           second value in the state. state() is 6 words (4 xoshiro words, a has-cached flag and
//           the cached normal's bits); set_state(state()) continues bit for bit.
//           split() derives an independent child stream (seeded from this stream's next word).
// DTypes:   fill_*: float, double.
// Errors:   set_state: std::invalid_argument on a wrong size or an all-zero xoshiro state.
//           uniform_int: std::invalid_argument for n == 0.
// Ref:      tf.random.Generator, keras.initializers.TruncatedNormal
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tapeflow {

// A seeded pseudo-random stream (xoshiro256**); see above. Ref: tf.random.Generator
class Generator {
 public:
  // Number of words in state(): 4 xoshiro words, the has-cached-normal flag, the cached normal's bits.
  static constexpr std::size_t kStateWords = 6;

  // The stream of `seed` (its 4 state words drawn from splitmix64(seed)): equal seeds, equal streams.
  explicit Generator(std::uint64_t seed);

  // The next 64 random bits.
  std::uint64_t next_u64();
  // y[i] uniform in [lo, hi): draw i's top 24 (float) or 53 (double) bits scaled into [0, 1), then
  // lo + (hi - lo) * u. Long fills draw in parallel chunks of the same stream (the values and the
  // state after are those of drawing in order, for any thread count).
  template <class T>
  void fill_uniform(T* y, std::int64_t n, T lo, T hi);
  // y[i] = u_i >= rate ? scale : 0, u_i the [0, 1) values fill_uniform(y, n, 0, 1) would give
  // (Dropout's keep mask, in one pass over the same stream).
  template <class T>
  void fill_keep_mask(T* y, std::int64_t n, T rate, T scale);
  // The same draws as fill_keep_mask<T>(y, n, rate, scale), packed: bit i % 32 of words[i / 32]
  // is 1 where y[i] would be scale (u_i >= rate), 0 where it would be 0; the bits past n in the
  // last word are 0. words holds (n + 31) / 32 values; the state after is fill_keep_mask's.
  template <class T>
  void fill_keep_bits(std::uint32_t* words, std::int64_t n, T rate);
  // y[i] ~ Normal(mean, stddev).
  template <class T>
  void fill_normal(T* y, std::int64_t n, T mean, T stddev);
  // y[i] ~ Normal(mean, stddev) re-drawn while beyond 2 stddev (Keras TruncatedNormal).
  template <class T>
  void fill_truncated_normal(T* y, std::int64_t n, T mean, T stddev);
  // Unbiased integer in [0, n).
  std::uint64_t uniform_int(std::uint64_t n);
  // A standard normal draw (double precision).
  double next_normal();
  // A uniform double in [0, 1) with 53 random bits.
  double next_double();

  // The kStateWords words that set_state takes to continue this stream bit for bit (checkpoints).
  std::vector<std::uint64_t> state() const;
  // Restores a state() (the stream continues from there).
  // Errors: std::invalid_argument for a size other than kStateWords, an all-zero xoshiro state or a
  // cached flag other than 0 or 1.
  void set_state(const std::vector<std::uint64_t>& s);
  // A child Generator seeded from this stream's next word (advances this stream by one draw).
  Generator split();

 private:
  std::array<std::uint64_t, 4> s_{};
  bool has_cached_ = false;
  double cached_ = 0.0;
};

}  // namespace tapeflow
