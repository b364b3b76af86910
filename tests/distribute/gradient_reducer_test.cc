// internal::GradientReducer under mpirun: what the Context-level tests cannot make happen on
// purpose (a rank that is slow to copy its results out).
#include "distribute/internal/gradient_reducer.h"

#include <gtest/gtest.h>

#include <Eigen/Core>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "distribute/internal/communicator.h"
#include "distribute/internal/scale.h"
#include "tape/ops/array_ops.h"
#include "tests/distribute/mpi_test_util.h"

namespace tapeflow::distribute::testing {
namespace {

// The window's two halves: rank 1 sleeps 30 ms between the second barrier and its copy-out in
// every step, so the other ranks are already writing the next step's gradients into their
// segments while it still reads this step's sums from them. Rank r's gradient in step s is
// (r + 1)(s + 1) everywhere, so every element of the sum is (s + 1)·n(n + 1)/2, exactly.
TEST(GradientReducerTest, ASlowCopyOutStillReadsItsOwnStep) {
  Context& c = context();
  if (c.size() == 1) GTEST_SKIP() << "needs two ranks";
  internal::Communicator comm(60, c.rank(), c.size());
  internal::GradientReducer reducer(comm, false, true, c.options().shared_memory_group);
  if (!reducer.uses_shared_memory()) GTEST_SKIP() << "no shared-memory window (uneven groups)";
  if (c.rank() == 1) reducer.set_copy_out_delay_for_testing(std::chrono::milliseconds(30));
  Variable v(zeros(Shape{4096}), {.name = "slow_copy_out"});
  const int n = c.size();
  for (int step = 0; step < 4; ++step) {
    reducer.begin({v}, ReduceOp::kSum, 1 << 20);
    reducer.set(0, fill(Shape{4096}, static_cast<double>((c.rank() + 1) * (step + 1)), DType::kFloat32));
    const auto out = reducer.finish();
    ASSERT_TRUE(out[0].has_value());
    const float want = static_cast<float>((step + 1) * n * (n + 1) / 2);
    const auto got = out[0]->to_vector<float>();
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want) << "element " << i << " step " << step;
  }
}

// Float32 rounded to half and back (Eigen's IEEE conversion, round to nearest even).
float to_half(float x) { return static_cast<float>(Eigen::half(x)); }

// fp16 compression over the network sum (shared memory off): every rank's float32 gradient is
// rounded to half, the copies summed in float32 in rank order, the sum rounded to half again; the
// same bits on every rank; float64 gradients stay exact; a sum beyond the half range is inf. Rank
// r's element i is 1 + i/1024 + r * 0.1234567 (not a half: the roundings show), over lengths that
// leave a padded last part at 2 and 3 ranks.
TEST(GradientReducerTest, Fp16CompressionRoundsEachCopyAndTheSumTheSameOnEveryRank) {
  Context& c = context();
  if (c.size() == 1) GTEST_SKIP() << "needs two ranks";
  internal::Communicator comm(60, c.rank(), c.size());
  internal::GradientReducer reducer(comm, true, false);
  const int n = c.size();
  auto value = [](int r, std::int64_t i) { return 1.0f + static_cast<float>(i) / 1024 + r * 0.1234567f; };
  // 600001: more than one 1 MiB piece of the 2 ranks' exchange, as half, float32 and float64.
  for (std::int64_t len : {std::int64_t{1}, std::int64_t{1037}, std::int64_t{70001}, std::int64_t{600001}}) {
    SCOPED_TRACE("length " + std::to_string(len));
    for (bool fp16 : {true, false}) {
      SCOPED_TRACE(fp16 ? "fp16" : "float32");
      reducer.set_compression(fp16);
      Variable v(zeros(Shape{len}), {.name = "v"});
      Variable v64(zeros(Shape{len}, DType::kFloat64), {.name = "v64"});
      std::vector<float> mine(static_cast<std::size_t>(len));
      std::vector<double> mine64(static_cast<std::size_t>(len));
      for (std::int64_t i = 0; i < len; ++i) {
        mine[static_cast<std::size_t>(i)] = value(c.rank(), i);
        mine64[static_cast<std::size_t>(i)] = value(c.rank(), i);
      }
      if (len > 1) mine[1] = 40000.0f;  // the sum of two or more: >= 65520, inf in half
      reducer.begin({v, v64}, ReduceOp::kSum, 1 << 20);
      reducer.set(0, constant(mine, Shape{len}));
      reducer.set(1, constant(mine64, Shape{len}));
      const auto out = reducer.finish();
      ASSERT_TRUE(out[0].has_value() && out[1].has_value());
      const auto got = out[0]->to_vector<float>();
      const auto got64 = out[1]->to_vector<double>();
      int rounded = 0;
      for (std::int64_t i = 0; i < len; ++i) {
        float want = 0, exact = 0;
        double want64 = 0;
        for (int r = 0; r < n; ++r) {
          const float x = len > 1 && i == 1 ? 40000.0f : value(r, i);
          want = r == 0 ? (fp16 ? to_half(x) : x) : want + (fp16 ? to_half(x) : x);
          exact = r == 0 ? x : exact + x;
          want64 += value(r, i);
        }
        if (fp16) want = to_half(want);
        ASSERT_EQ(got[static_cast<std::size_t>(i)], want) << "element " << i;
        ASSERT_EQ(got64[static_cast<std::size_t>(i)], want64) << "float64 element " << i << " is never compressed";
        rounded += want != exact ? 1 : 0;
      }
      if (fp16 && len > 1) {
        EXPECT_TRUE(std::isinf(got[1])) << "n x 40000 is beyond the half range";
        EXPECT_GT(rounded, len / 2) << "the half roundings must show";
      }
      if (!fp16) {
        EXPECT_EQ(rounded, 0);
      }
      EXPECT_TRUE(same_on_every_rank(hash_bytes({*out[0], *out[1]})));
    }
  }
}


// fp16 compression, several variables in one buffer, averaged: the half sums are converted and
// divided straight into each output tensor (finish's copy-out), so each variable's offset, the
// divisor and the presence flags must come out as on the float32 path. The values are exact in
// half (multiples of 1/4 up to 47.25, sums up to 94.5), so both paths give the same bits; `absent`
// has no gradient on any rank (no result), `partial` none on rank 0 (reduced as zeros there). One
// buffer of 601046 elements: at 2 ranks the exchange cuts it into 1 MiB pieces (3 as float32, 2 as
// half, the cut inside v2), each copied out on its own.
TEST(GradientReducerTest, Fp16CompressionAveragesSeveralVariablesAsFloat32Does) {
  Context& c = context();
  if (c.size() == 1) GTEST_SKIP() << "needs two ranks";
  internal::Communicator comm(60, c.rank(), c.size());
  internal::GradientReducer reducer(comm, true, false);
  const std::vector<std::int64_t> lengths{1037, 5, 600001, 3};
  const char* names[] = {"v0", "v1", "v2", "v3"};
  std::vector<Variable> vars;
  for (std::size_t k = 0; k < lengths.size(); ++k)
    vars.emplace_back(zeros(Shape{lengths[k]}), VariableOptions{.name = names[k]});
  auto gradient = [&](std::size_t k) {
    std::vector<float> g(static_cast<std::size_t>(lengths[k]));
    for (std::size_t i = 0; i < g.size(); ++i)
      g[i] = static_cast<float>((c.rank() + 1) * static_cast<int>((i + 7 * k) % 64)) / 4;
    return constant(g, Shape{lengths[k]});
  };
  std::vector<std::vector<std::optional<Tensor>>> results;
  for (bool fp16 : {false, true}) {
    reducer.set_compression(fp16);
    reducer.begin(vars, ReduceOp::kAverage, 1 << 24);
    reducer.set(0, gradient(0));
    reducer.set(1, Tensor());  // absent everywhere
    reducer.set(2, gradient(2));
    reducer.set(3, c.rank() == 0 ? Tensor() : gradient(3));  // absent on rank 0 only
    results.push_back(reducer.finish());
  }
  const auto& f32 = results[0];
  const auto& f16 = results[1];
  EXPECT_FALSE(f16[1].has_value()) << "no rank had a gradient for v1";
  for (std::size_t k : {std::size_t{0}, std::size_t{2}, std::size_t{3}}) {
    SCOPED_TRACE(names[k]);
    ASSERT_TRUE(f32[k].has_value() && f16[k].has_value());
    const auto want = f32[k]->to_vector<float>();
    const auto got = f16[k]->to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
  }
  // The float32 path itself: v0's element 1 is the average of (r + 1) / 4 over the ranks.
  const int n = c.size();
  EXPECT_EQ(f32[0]->to_vector<float>()[1], static_cast<float>(n * (n + 1) / 2) / 4 / static_cast<float>(n));
  EXPECT_TRUE(same_on_every_rank(hash_bytes({*f16[0], *f16[2], *f16[3]})));
}

// The averages' division: by a power of two it multiplies by the exact reciprocal, which must give
// the bits of the division everywhere: normals, results that become subnormal or round to zero,
// subnormals, the largest floats, infinities, signed zeros (and NaNs stay NaNs); 3 and 6 divide.
TEST(ScaleCopyTest, APowerOfTwoGivesTheBitsOfTheDivision) {
  std::vector<float> x;
  for (std::uint32_t bits = 0; bits < 0x7f800000u; bits += 0x00012345u) {  // every exponent, many mantissas
    x.push_back(std::bit_cast<float>(bits));
    x.push_back(-std::bit_cast<float>(bits));
  }
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 3.0f * std::numeric_limits<float>::denorm_min()};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  for (int divisor : {2, 3, 4, 6, 8, 64, 1 << 20}) {
    SCOPED_TRACE("divisor " + std::to_string(divisor));
    std::vector<float> got(x.size());
    internal::scale_copy<float>(x.data(), static_cast<std::int64_t>(x.size()), divisor, got.data());
    std::vector<double> xd(x.begin(), x.end()), gotd(x.size());
    internal::scale_copy<double>(xd.data(), static_cast<std::int64_t>(xd.size()), divisor, gotd.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const volatile float d = static_cast<float>(divisor);  // a true division, not folded
      const float want = x[i] / d;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i]));
        continue;
      }
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want)) << "x = " << x[i];
      const volatile double dd = divisor;
      ASSERT_EQ(std::bit_cast<std::uint64_t>(gotd[i]), std::bit_cast<std::uint64_t>(xd[i] / dd)) << "x = " << xd[i];
    }
  }
}

}  // namespace
}  // namespace tapeflow::distribute::testing
