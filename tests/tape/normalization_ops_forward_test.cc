// Transformer ops: forward values against Python's math module, float32 stability, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using tf::testing::all_close;

namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

tf::Tensor f64(std::vector<double> v, tf::Shape s) { return tf::constant<double>(v, s); }

TEST(LayerNorm, ForwardValues) {
  // Python: m = mean(x); v = mean((x - m)²); (x - m) / sqrt(v + 1e-3) for x = [1, 2, 4, -1]
  const tf::Tensor y = tf::layer_norm(f64({1, 2, 4, -1, 3, 3, 3, 3}, {2, 4}));
  EXPECT_TRUE(all_close(y,
                        f64({-0.277307438710976, 0.277307438710976, 1.38653719355488, -1.38653719355488, 0, 0, 0, 0},
                            {2, 4}),
                        1e-14, 1e-14));
}

TEST(LayerNorm, Float32StableForALargeMean) {
  // Two passes: a mean of 1e4 with unit spread still normalizes to ±1 (one-pass E[x²] - E[x]² in
  // float32 would lose every digit).
  const tf::Tensor y = tf::layer_norm(tf::constant<float>({10001.f, 9999.f, 10001.f, 9999.f}, {1, 4}), 0.0);
  EXPECT_TRUE(all_close(y, tf::constant<float>({1.f, -1.f, 1.f, -1.f}, {1, 4}), 1e-6, 1e-6));
}

TEST(LayerNorm, Errors) {
  EXPECT_THAT([] { tf::layer_norm(tf::scalar(1.0)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm: x must have rank >= 1")));
  EXPECT_THAT([] { tf::layer_norm(tf::zeros({2, 3}), -1.0); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm: epsilon must be finite and >= 0")));
  EXPECT_THAT([] { tf::layer_norm(tf::zeros({2}, tf::DType::kInt32)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm")));
  EXPECT_THAT([] { tf::layer_norm_grad(tf::zeros({2, 3}), tf::zeros({3, 2})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm_grad: inputs must have the same shape")));
}

TEST(LayerNormAffine, EqualsLayerNormTimesGammaPlusBeta) {
  // The fused op against the three-op form it replaces, float64 and float32, widths around the 16 lanes.
  for (std::int64_t n : {1, 5, 16, 37, 64}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const tf::Tensor x = tf::testing::random_f64({3, 7, n}, 3, -4.0, 6.0);
    const tf::Tensor gamma = tf::testing::random_f64({n}, 4, -2.0, 2.0), beta = tf::testing::random_f64({n}, 5);
    EXPECT_TRUE(all_close(tf::layer_norm_affine(x, gamma, beta, 1e-2), tf::layer_norm(x, 1e-2) * gamma + beta,
                          1e-14, 1e-14));
    const tf::Tensor xf = tf::cast(x, tf::DType::kFloat32), gf = tf::cast(gamma, tf::DType::kFloat32),
                     bf = tf::cast(beta, tf::DType::kFloat32);
    EXPECT_TRUE(all_close(tf::layer_norm_affine(xf, gf, bf), tf::layer_norm(xf) * gf + bf, 1e-6, 1e-6));
  }
}

TEST(LayerNormAffineGrad, EqualsTheComposedGradients) {
  // dx = layer_norm_grad(x, dy gamma), dgamma = Σ dy y, dbeta = Σ dy over the rows; float32 too.
  const tf::Tensor x = tf::testing::random_f64({4, 3, 20}, 6, -3.0, 3.0), dy = tf::testing::random_f64({4, 3, 20}, 7);
  const tf::Tensor gamma = tf::testing::random_f64({20}, 8, 0.5, 1.5);
  for (tf::DType dt : {tf::DType::kFloat64, tf::DType::kFloat32}) {
    const tf::Tensor xd = tf::cast(x, dt), dyd = tf::cast(dy, dt), gd = tf::cast(gamma, dt);
    const double tol = dt == tf::DType::kFloat64 ? 1e-13 : 1e-5;
    const tf::LayerNormAffineGrads d = tf::layer_norm_affine_grad(xd, gd, dyd, 0.1);
    EXPECT_TRUE(all_close(d.dx, tf::layer_norm_grad(xd, dyd * gd, 0.1), tol, tol));
    EXPECT_TRUE(all_close(d.dgamma, tf::reduce_sum(dyd * tf::layer_norm(xd, 0.1), {0, 1}), tol, tol));
    EXPECT_TRUE(all_close(d.dbeta, tf::reduce_sum(dyd, {0, 1}), tol, tol));
  }
}

TEST(LayerNormAffine, Errors) {
  const tf::Tensor x = tf::zeros({2, 3}), p = tf::ones({3});
  EXPECT_THAT([&] { tf::layer_norm_affine(x, tf::ones({2}), p); },
              ThrowsMessage<std::invalid_argument>(
                  HasSubstr("layer_norm_affine: gamma must have shape [3] (x's last dim), got [2] float32")));
  EXPECT_THAT([&] { tf::layer_norm_affine(x, p, tf::ones({1, 3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm_affine: beta must have shape [3]")));
  EXPECT_THAT([&] { tf::layer_norm_affine(tf::scalar(1.f), tf::ones({1}), tf::ones({1})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm_affine: x must have rank >= 1")));
  EXPECT_THAT([&] { tf::layer_norm_affine(x, tf::ones({3}, tf::DType::kFloat64), p); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm_affine: dtypes differ: [2, 3] float32 and [3] float64")));
  EXPECT_THAT([&] { tf::layer_norm_affine(x, p, p, -1e-3); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm_affine: epsilon must be finite and >= 0")));
  EXPECT_THAT([&] { tf::layer_norm_affine(tf::zeros({3}, tf::DType::kInt32), tf::zeros({3}, tf::DType::kInt32),
                                          tf::zeros({3}, tf::DType::kInt32)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm_affine")));
  EXPECT_THAT([&] { tf::layer_norm_affine_grad(x, tf::ones({2}), x); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm_affine_grad: gamma must have shape [3]")));
  EXPECT_THAT([&] { tf::layer_norm_affine_grad(x, p, tf::zeros({3, 2})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm_affine_grad: inputs must have the same shape")));
  EXPECT_THAT([&] { tf::layer_norm_affine_grad(x, p, x, std::nan("")); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("layer_norm_affine_grad: epsilon must be finite")));
}

TEST(Gelu, ForwardValues) {
  // Python: 0.5 * x * (1 + math.erf(x / math.sqrt(2)))
  EXPECT_TRUE(all_close(tf::gelu(f64({-2, -0.5, 0, 1.5}, {4})),
                        f64({-0.04550026389635842, -0.15426876936299344, 0.0, 1.399789198096713}, {4}), 1e-15,
                        1e-15));
  // The tanh form stays within 1e-3 of the exact one.
  const tf::Tensor x = f64({-3, -1, -0.25, 0.5, 2}, {5});
  EXPECT_TRUE(all_close(tf::gelu(x, true), tf::gelu(x), 1e-3, 1e-3));
  EXPECT_FALSE(all_close(tf::gelu(x, true), tf::gelu(x), 1e-6, 1e-6));
}

TEST(Gelu, Errors) {
  EXPECT_THAT([] { tf::gelu(tf::zeros({2}, tf::DType::kInt32)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("gelu")));
  EXPECT_THAT([] { tf::gelu(tf::zeros({2}, tf::DType::kInt32), true); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("gelu: expected float32 or float64")));
  EXPECT_THAT([] { tf::gelu_grad(tf::zeros({2}), tf::zeros({3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("gelu_grad: inputs must have the same shape")));
}

}  // namespace
