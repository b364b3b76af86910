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
