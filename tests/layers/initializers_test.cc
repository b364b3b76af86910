// Initializers: Keras formulas (limits, stddevs, fans), statistics, determinism and errors.
#include "layers/initializers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace tf = tapeflow;
namespace init = tf::layers::initializers;

namespace {
struct Stats {
  double mean = 0, var = 0, min = 1e300, max = -1e300;
};
Stats stats(const tf::Tensor& t) {
  auto v = t.to_vector<double>();
  Stats s;
  for (double x : v) {
    s.mean += x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean /= double(v.size());
  for (double x : v) s.var += (x - s.mean) * (x - s.mean);
  s.var /= double(v.size());
  return s;
}
}  // namespace

TEST(Initializers, Fans) {
  EXPECT_EQ(init::compute_fans({}).fan_in, 1);
  EXPECT_EQ(init::compute_fans({7}).fan_out, 7);
  EXPECT_EQ(init::compute_fans({3, 5}).fan_in, 3);
  EXPECT_EQ(init::compute_fans({3, 5}).fan_out, 5);
  auto f = init::compute_fans({3, 3, 4, 8});  // conv kernel: receptive field 9
  EXPECT_EQ(f.fan_in, 36);
  EXPECT_EQ(f.fan_out, 72);
}

TEST(Initializers, GlorotUniformLimitAndVariance) {
  tf::Generator gen(7);
  tf::Tensor w = tf::layers::Initializer("glorot_uniform")({200, 300}, tf::DType::kFloat32, gen);
  const double limit = std::sqrt(6.0 / 500.0);
  Stats s = stats(w);
  EXPECT_LE(s.max, limit);
  EXPECT_GE(s.min, -limit);
  EXPECT_GT(s.max, 0.99 * limit);
  EXPECT_NEAR(s.mean, 0.0, 0.002);
  EXPECT_NEAR(s.var, limit * limit / 3.0, 0.02 * limit * limit / 3.0);
}

TEST(Initializers, TruncatedNormalsHaveTheTargetVariance) {
  // With Keras's correction the truncated draws have variance scale/n.
  tf::Generator gen(8);
  Stats g = stats(init::glorot_normal()({200, 300}, tf::DType::kFloat64, gen));
  EXPECT_NEAR(g.var, 2.0 / 500.0, 0.03 * 2.0 / 500.0);
  const double bound = 2.0 * std::sqrt(2.0 / 500.0) / init::kTruncatedStddevCorrection;
  EXPECT_LE(g.max, bound);
  EXPECT_GE(g.min, -bound);
  Stats h = stats(init::he_normal()({400, 150}, tf::DType::kFloat32, gen));
  EXPECT_NEAR(h.var, 2.0 / 400.0, 0.03 * 2.0 / 400.0);
  EXPECT_NEAR(h.mean, 0.0, 0.002);
}

TEST(Initializers, HeUniformAndRandom) {
  tf::Generator gen(9);
  Stats h = stats(init::he_uniform()({100, 500}, tf::DType::kFloat32, gen));
  EXPECT_LE(h.max, std::sqrt(6.0 / 100.0));
  EXPECT_NEAR(h.var, 2.0 / 100.0, 0.03 * 2.0 / 100.0);
  Stats n = stats(init::random_normal()({100, 500}, tf::DType::kFloat32, gen));
  EXPECT_NEAR(n.var, 0.05 * 0.05, 0.03 * 0.0025);
  Stats u = stats(init::random_uniform()({100, 500}, tf::DType::kFloat32, gen));
  EXPECT_GE(u.min, -0.05);
  EXPECT_LT(u.max, 0.05);
  EXPECT_NEAR(u.mean, 0.0, 0.001);
}

TEST(Initializers, ConstantsAndDeterminism) {
  tf::Generator gen(1);
  EXPECT_EQ(init::zeros()({2, 2}, tf::DType::kFloat32, gen).to_vector<float>(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(init::ones()({3}, tf::DType::kFloat64, gen).to_vector<double>(), std::vector<double>(3, 1.0));
  EXPECT_EQ(init::constant(2.5)({2}, tf::DType::kFloat32, gen).to_vector<float>(), std::vector<float>(2, 2.5f));
  tf::Generator a(5), b(5);
  EXPECT_EQ(init::glorot_uniform()({4, 4}, tf::DType::kFloat32, a).to_vector<float>(),
            init::glorot_uniform()({4, 4}, tf::DType::kFloat32, b).to_vector<float>());
  EXPECT_EQ(tf::layers::Initializer("he_normal").name(), "he_normal");
}

TEST(Initializers, Errors) {
  try {
    init::get("xavier");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("xavier"));
  }
  tf::Generator gen(1);
  EXPECT_THROW(init::glorot_uniform()({2, 2}, tf::DType::kInt32, gen), std::invalid_argument);
  EXPECT_THROW(init::random_normal()({2}, tf::DType::kInt64, gen), std::invalid_argument);
  EXPECT_THROW(tf::layers::Initializer("empty", nullptr), std::invalid_argument);
}
