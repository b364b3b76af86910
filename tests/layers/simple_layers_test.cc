// Dropout, Flatten, Reshape, Activation, LeakyReLU, activations by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "layers/layers.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using namespace tf::layers;
using tf::testing::all_close;

TEST(Dropout, StatisticsInTrainingIdentityInInference) {
  Dropout d({.rate = 0.3, .seed = 3});
  tf::Tensor x = tf::ones({200000});
  EXPECT_TRUE(d(x).is_same(x) || all_close(d(x), x));
  tf::Tensor y = d(x, true);
  auto v = y.to_vector<float>();
  std::int64_t zeros = 0;
  double sum = 0;
  for (float e : v) {
    if (e == 0) ++zeros;
    else EXPECT_FLOAT_EQ(e, float(1 / 0.7));
    sum += e;
  }
  EXPECT_NEAR(double(zeros) / v.size(), 0.3, 0.005);
  EXPECT_NEAR(sum / v.size(), 1.0, 0.01);
  EXPECT_NE(d(x, true).to_vector<float>(), v);  // a new mask each call
  Dropout same({.rate = 0.3, .seed = 3});
  EXPECT_EQ(same(x, true).to_vector<float>(), v);  // same seed, same first mask
}

// The packed mask gives the bits of x times the mask of scale / 0 values from the same draws (the
// layer before the packed mask), NaN and infinities included (dropped: NaN, as x · 0).
TEST(Dropout, TheBitsOfXTimesTheKeepMask) {
  for (tf::DType dtype : {tf::DType::kFloat32, tf::DType::kFloat64})
    for (std::int64_t n : {std::int64_t{37}, std::int64_t{3} * 16384 + 77}) {
      Dropout d({.rate = 0.3, .seed = 5, .dtype = dtype});
      tf::Generator g = *d.training_generator();  // the draws of the first call
      std::vector<double> xs(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) xs[i] = std::sin(0.37 * double(i)) * 3;
      xs[1] = NAN, xs[2] = INFINITY, xs[4] = -INFINITY;
      tf::Tensor x = tf::cast(tf::constant<double>(xs, {n}), dtype);
      tf::Tensor y = d(x, true);
      tf::dispatch_floating(dtype, "test", [&](auto tag) {
        using T = decltype(tag);
        std::vector<T> mask(static_cast<std::size_t>(n));
        g.fill_keep_mask<T>(mask.data(), n, T(0.3), static_cast<T>(1.0 / 0.7));
        const T* xv = x.data<T>();
        const T* yv = y.data<T>();
        for (std::int64_t i = 0; i < n; ++i) {
          const T want = xv[i] * mask[static_cast<std::size_t>(i)];
          ASSERT_EQ(0, std::memcmp(&want, yv + i, sizeof(T))) << "n=" << n << " i=" << i << " " << yv[i] << " vs " << want;
        }
      });
      EXPECT_EQ(g.state(), d.training_generator()->state());
    }
}

TEST(Dropout, GradientIsTheMask) {
  Dropout d({.rate = 0.5, .seed = 1, .dtype = tf::DType::kFloat64});
  tf::Tensor x = tf::testing::random_f64({50}, 2);
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = d(x, true);
  auto g = tape.gradient(tf::reduce_sum(y), x);
  ASSERT_TRUE(g);
  auto gv = g->to_vector<double>(), yv = y.to_vector<double>(), xv = x.to_vector<double>();
  for (int i = 0; i < 50; ++i) EXPECT_NEAR(yv[i], xv[i] * gv[i], 1e-12);
  EXPECT_THROW(Dropout(1.0), std::invalid_argument);
  EXPECT_THROW(Dropout(-0.1), std::invalid_argument);
  EXPECT_TRUE(all_close(Dropout(0.0)(x, true), x));
}

TEST(Flatten, ShapesAndGradient) {
  Flatten f;
  EXPECT_EQ(f(tf::ones({2, 3, 4})).shape(), tf::Shape({2, 12}));
  EXPECT_EQ(f(tf::ones({5})).shape(), tf::Shape({5, 1}));
  EXPECT_EQ(f.compute_output_shape({7, 28, 28}), tf::Shape({7, 784}));
  EXPECT_EQ(f.count_params(), 0);
  EXPECT_THROW(f(tf::Tensor(1.0)), std::invalid_argument);
  EXPECT_EQ(f.name().rfind("flatten", 0), 0u);
}

TEST(Reshape, TargetShapeWithInference) {
  Reshape r({.target_shape = {3, -1}});
  EXPECT_EQ(r(tf::ones({2, 12})).shape(), tf::Shape({2, 3, 4}));
  EXPECT_EQ(Reshape({.target_shape = {6}})(tf::ones({4, 2, 3})).shape(), tf::Shape({4, 6}));
  try {
    Reshape({.target_shape = {5}})(tf::ones({2, 12}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("[2, 12]"));
  }
  EXPECT_THROW(Reshape({.target_shape = {-1, -1}}), std::invalid_argument);
  EXPECT_THROW(Reshape({.target_shape = {-2}}), std::invalid_argument);
}

TEST(Activation, ByNameAndLeakyReLU) {
  tf::Tensor x = {-2.0, 0.0, 3.0};
  EXPECT_TRUE(all_close(Activation("relu")(x), tf::Tensor{0.0, 0.0, 3.0}));
  EXPECT_TRUE(all_close(Activation("linear")(x), x));
  EXPECT_TRUE(all_close(Activation("sigmoid")(tf::Tensor{0.0}), tf::Tensor{0.5}));
  EXPECT_TRUE(all_close(Activation("softplus")(tf::Tensor{0.0}), tf::Tensor{std::log(2.0)}));
  EXPECT_TRUE(all_close(Activation("elu")(tf::Tensor{-1.0}), tf::Tensor{std::exp(-1.0) - 1}, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(Activation("leaky_relu")(tf::Tensor{-1.0}), tf::Tensor{-0.2}));
  EXPECT_TRUE(all_close(Activation("tanh")(tf::Tensor{0.5}), tf::Tensor{std::tanh(0.5)}));
  tf::Tensor s = Activation("softmax")(tf::Tensor{{1.0, 2.0, 3.0}, {1000.0, 1000.0, 1000.0}});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_TRUE(all_close(s, tf::Tensor{{std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z},
                                      {1 / 3.0, 1 / 3.0, 1 / 3.0}},
                        1e-6, 1e-7));
  EXPECT_THROW(Activation("gelu_fast"), std::invalid_argument);
  LeakyReLU l;
  EXPECT_EQ(l.alpha(), 0.3);
  EXPECT_TRUE(all_close(l(x), tf::Tensor{-0.6, 0.0, 3.0}));
  EXPECT_EQ(l.name().rfind("leaky_re_lu", 0), 0u);
  EXPECT_THROW(LeakyReLU({.alpha = -1}), std::invalid_argument);
}

TEST(Activations, SoftmaxGradcheck) {
  tf::Tensor x = tf::testing::random_f64({3, 4}, 9);
  EXPECT_TRUE(tf::testing::gradcheck_both(
      [](const std::vector<tf::Tensor>& in) { return activations::softmax(in[0]); }, {x}));
  EXPECT_EQ(activations::get(""), nullptr);
}
