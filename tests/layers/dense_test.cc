// Dense: Keras shapes/names/parameter counts, forward and backward with given weights, dtype,
// regularization loss, errors.
#include "layers/dense.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using tf::layers::Dense;
using tf::layers::DenseOptions;
using tf::testing::all_close;

TEST(Dense, SeedExampleShapesAndParamCount) {
  Dense d(DenseOptions{.units = 10});
  tf::Generator gen(1);
  tf::Tensor x = tf::random_normal({7, 5}, gen);
  tf::Tensor y = d(x);
  EXPECT_EQ(y.shape(), tf::Shape({7, 10}));
  EXPECT_EQ(d.count_params(), 60);
  EXPECT_EQ(d.kernel().shape(), tf::Shape({5, 10}));
  EXPECT_EQ(d.kernel().shape().to_tf_string(), "(5, 10)");
  EXPECT_EQ(d.bias().shape(), tf::Shape({10}));
  ASSERT_EQ(d.variables().size(), 2u);
  EXPECT_EQ(d.variables()[0].name(), d.name() + "/kernel:0");
  EXPECT_EQ(d.variables()[1].name(), d.name() + "/bias:0");
  EXPECT_EQ(d.trainable_variables().size(), 2u);
  EXPECT_TRUE(d.non_trainable_variables().empty());
  EXPECT_EQ(d.class_name(), "Dense");
  // Bias starts at zeros; glorot_uniform kernel within its limit.
  for (float b : d.bias().value().to_vector<float>()) EXPECT_EQ(b, 0.0f);
  const double limit = std::sqrt(6.0 / 15.0);
  for (float k : d.kernel().value().to_vector<float>()) EXPECT_LE(std::abs(k), limit);
}

TEST(Dense, ForwardBackwardWithGivenWeights) {
  Dense d(DenseOptions{.units = 2, .activation = "relu"});
  tf::Tensor x = {{1.0, 2.0, 3.0}, {-1.0, 0.5, 2.0}};
  d(x);
  d.kernel().assign(tf::Tensor{{0.1, -0.2}, {0.3, 0.4}, {-0.5, 0.6}});
  d.bias().assign(tf::Tensor{0.01, -0.02});
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = d(x);
  // Row 0: [0.1+0.6-1.5+0.01, -0.2+0.8+1.8-0.02] = [-0.79, 2.38] -> relu [0, 2.38]
  // Row 1: [-0.1+0.15-1.0+0.01, 0.2+0.2+1.2-0.02] = [-0.94, 1.58] -> relu [0, 1.58]
  EXPECT_TRUE(all_close(y, tf::Tensor{{0.0, 2.38}, {0.0, 1.58}}, 1e-5, 1e-6));
  tf::Tensor loss = tf::reduce_sum(y);
  auto g = tape.gradient(loss, std::vector<tf::Source>{d.kernel(), d.bias(), x});
  ASSERT_TRUE(g[0] && g[1] && g[2]);
  // Only unit 1 is active: dK[:,1] = sum of x rows, dK[:,0] = 0; db = [0, 2]; dx = K[:,1] per row.
  EXPECT_TRUE(all_close(*g[0], tf::Tensor{{0.0, 0.0}, {0.0, 2.5}, {0.0, 5.0}}, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(*g[1], tf::Tensor{0.0, 2.0}, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(*g[2], tf::Tensor{{-0.2, 0.4, 0.6}, {-0.2, 0.4, 0.6}}, 1e-6, 1e-6));
}

TEST(Dense, Rank3InputsApplyToLastAxis) {
  Dense d(DenseOptions{.units = 4, .use_bias = false, .kernel_initializer = "ones"});
  tf::Tensor x = tf::ones({2, 3, 5});
  tf::Tensor y = d(x);
  EXPECT_EQ(y.shape(), tf::Shape({2, 3, 4}));
  for (float v : y.to_vector<float>()) EXPECT_EQ(v, 5.0f);
  EXPECT_EQ(d.count_params(), 20);
  EXPECT_THROW(d.bias(), std::logic_error);
}

TEST(Dense, Float64GradcheckAndCastInputs) {
  Dense d(DenseOptions{.units = 3, .activation = "tanh", .dtype = tf::DType::kFloat64});
  tf::Tensor x = tf::testing::random_f64({4, 2}, 3);
  EXPECT_EQ(d(x).dtype(), tf::DType::kFloat64);
  EXPECT_EQ(d(tf::convert(x, tf::DType::kFloat32)).dtype(), tf::DType::kFloat64);
  EXPECT_TRUE(tf::testing::gradcheck_both([&](const std::vector<tf::Tensor>& in) { return d(in[0]); }, {x}));
}

TEST(Dense, KernelRegularizerL2InLosses) {
  Dense d(DenseOptions{.units = 2, .kernel_initializer = "ones", .kernel_regularizer_l2 = 0.01});
  d(tf::ones({1, 3}));
  auto losses = d.losses();
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_NEAR(losses[0].item(), 0.01 * 6, 1e-7);
  tf::GradientTape tape;
  tf::Tensor l = d.losses()[0];
  auto g = tape.gradient(l, d.kernel());
  ASSERT_TRUE(g);
  EXPECT_TRUE(all_close(*g, tf::fill({3, 2}, 0.02), 1e-6, 1e-7));  // 2 * 0.01 * kernel
  Dense plain(DenseOptions{.units = 2});
  plain(tf::ones({1, 3}));
  EXPECT_TRUE(plain.losses().empty());
}

TEST(Dense, Errors) {
  EXPECT_THROW(Dense(DenseOptions{.units = 0}), std::invalid_argument);
  EXPECT_THROW(Dense(DenseOptions{.units = 2, .kernel_regularizer_l2 = -1}), std::invalid_argument);
  try {
    Dense(DenseOptions{.units = 2, .activation = "swishy"});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("swishy"));
  }
  EXPECT_THROW(Dense(DenseOptions{.units = 2, .kernel_initializer = "glorot"}), std::invalid_argument);
  Dense d(2);
  EXPECT_THROW(d.kernel(), std::logic_error);
  EXPECT_THROW(d.count_params(), std::logic_error);
  EXPECT_THROW(d(tf::ones({3})), std::invalid_argument);
  d(tf::ones({1, 3}));
  try {
    d(tf::ones({1, 4}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr(d.name()));
    EXPECT_THAT(e.what(), testing::HasSubstr("[1, 4]"));
  }
  EXPECT_THROW(Dense(DenseOptions{.units = 2, .dtype = tf::DType::kInt32}), std::invalid_argument);
}

TEST(Dense, SameSeedSameWeightsDefaultSeedsDiffer) {
  Dense a(DenseOptions{.units = 3, .seed = 42}), b(DenseOptions{.units = 3, .seed = 42});
  Dense c(DenseOptions{.units = 3}), e(DenseOptions{.units = 3});
  for (Dense* d : {&a, &b, &c, &e}) (*d)(tf::ones({1, 4}));
  EXPECT_EQ(a.kernel().value().to_vector<float>(), b.kernel().value().to_vector<float>());
  EXPECT_NE(c.kernel().value().to_vector<float>(), e.kernel().value().to_vector<float>());
}

TEST(Dense, MixedSecondOrderThroughTheInputGradient) {
  // d/dkernel of ||d(sum y)/dx||² (input-gradient penalty) against central differences, float64.
  Dense d(DenseOptions{.units = 3, .activation = "tanh", .seed = 5, .dtype = tf::DType::kFloat64});
  tf::Tensor x = tf::testing::random_f64({4, 2}, 6);
  d(x);
  auto penalty = [&] {
    tf::GradientTape inner;
    inner.watch(x);
    tf::Tensor y = tf::reduce_sum(d(x));
    return tf::reduce_sum(tf::square(*inner.gradient(y, x)));
  };
  std::optional<tf::Tensor> g;
  {
    tf::GradientTape outer;
    tf::Tensor p = penalty();
    g = outer.gradient(p, d.kernel());
  }
  ASSERT_TRUE(g);
  auto analytic = g->to_vector<double>();
  auto w0 = d.kernel().value().to_vector<double>();
  for (std::size_t i = 0; i < w0.size(); ++i) {
    auto at = [&](double delta) {
      auto w = w0;
      w[i] += delta;
      d.kernel().assign(tf::constant(w, d.kernel().shape()));
      return penalty().item();
    };
    const double numeric = (at(1e-6) - at(-1e-6)) / 2e-6;
    EXPECT_NEAR(analytic[i], numeric, 1e-6 + 1e-5 * std::abs(numeric)) << i;
  }
}
