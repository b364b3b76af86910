// Conv2D, Conv2DTranspose, pooling, UpSampling2D, ZeroPadding2D; BatchNormalization and Dropout on
// 4-D inputs. Expected values are hand-computed with TF/Keras semantics.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "layers/layers.h"
#include "tape/kernels/window.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tests/testing/gradient_check.h"
#include "tests/testing/test_values.h"

namespace tf = tapeflow;
using namespace tf::layers;
using tf::testing::all_close;
using tf::testing::random_f64;

namespace {

using tf::testing::iota;

using tf::testing::expect_invalid_argument;

const tf::DType f64 = tf::DType::kFloat64;

TEST(Conv2DLayer, WeightsNamesShapesAndValues) {
  Conv2D conv({.filters = 2, .kernel_size = {2, 2}, .dtype = f64});
  tf::Tensor x = iota({1, 3, 3, 1});
  conv.build(x.shape());
  ASSERT_EQ(conv.weights().size(), 2u);
  EXPECT_EQ(conv.kernel().shape(), (tf::Shape{2, 2, 1, 2}));  // [kh, kw, in, filters]
  EXPECT_EQ(conv.bias().shape(), (tf::Shape{2}));
  EXPECT_EQ(conv.kernel().name(), conv.name() + "/kernel:0");
  EXPECT_EQ(conv.name().rfind("conv2d", 0), 0u) << conv.name();
  EXPECT_EQ(conv.count_params(), 10);
  // Filter 0 sums the window, filter 1 takes its top-left pixel; bias (0.5, -1).
  conv.set_weights({tf::constant<double>({1, 1, 1, 0, 1, 0, 1, 0}, {2, 2, 1, 2}), tf::constant<double>({0.5, -1}, {2})});
  tf::Tensor y = conv(x);
  EXPECT_TRUE(all_close(y, tf::constant<double>({12.5, 0, 16.5, 1, 24.5, 3, 28.5, 4}, {1, 2, 2, 2})));
  // Gradients (Keras: d sum(y) / d kernel = sum of the windows' pixels per tap).
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor loss = tf::reduce_sum(conv(x));
  auto grads = tape.gradient(loss, std::vector<tf::Tensor>{x});
  EXPECT_TRUE(all_close(*grads[0], tf::constant<double>({2, 3, 1, 3, 5, 2, 1, 2, 1}, {1, 3, 3, 1})));
}

TEST(Conv2DLayer, OutputShapesMatchComputeOutputShape) {
  struct C {
    Conv2DOptions o;
    tf::Shape in, out;
  };
  const std::vector<C> cases = {
      {{.filters = 32, .kernel_size = {3, 3}}, {2, 28, 28, 1}, {2, 26, 26, 32}},
      {{.filters = 64, .kernel_size = {5, 5}, .strides = {2, 2}, .padding = "same"}, {2, 28, 28, 1}, {2, 14, 14, 64}},
      {{.filters = 3, .kernel_size = {4, 2}, .strides = {2, 3}, .padding = "same"}, {1, 7, 8, 2}, {1, 4, 3, 3}},
      {{.filters = 2, .kernel_size = {3, 3}, .dilation_rate = {2, 2}}, {1, 9, 7, 1}, {1, 5, 3, 2}},
  };
  for (const auto& c : cases) {
    Conv2D conv(c.o);
    EXPECT_EQ(conv.compute_output_shape(c.in), c.out);
    EXPECT_EQ(conv(tf::zeros(c.in)).shape(), c.out);
  }
}

// The layers' output shapes come from the kernels' one TF rule (tape/kernels/window.h): same sizes,
// and an error exactly where the rule has no positive output size.
TEST(Conv2DLayer, OutputShapesFollowTheKernelWindowRule) {
  for (const std::string padding : {"valid", "same"})
    for (std::int64_t in = 1; in <= 9; ++in)
      for (std::int64_t k = 1; k <= 4; ++k)
        for (std::int64_t s = 1; s <= 3; ++s)
          for (std::int64_t d = 1; d <= (s == 1 ? 2 : 1); ++d) {  // Keras: no strides > 1 with dilation
            const std::string tf_padding = padding == "same" ? "SAME" : "VALID";
            std::int64_t want = -1, want_pool = -1;
            try {
              want = tf::kernels::window_dim("test", tf_padding, in, k, s, d).out;
            } catch (const std::invalid_argument&) {
            }
            try {
              want_pool = tf::kernels::window_dim("test", tf_padding, in, k, s, 1).out;
            } catch (const std::invalid_argument&) {
            }
            const std::string what = padding + " in " + std::to_string(in) + " k " + std::to_string(k) + " s " +
                                     std::to_string(s) + " d " + std::to_string(d);
            Conv2D conv({.filters = 1, .kernel_size = {k, 1}, .strides = {s, 1}, .padding = padding,
                         .dilation_rate = {d, 1}});
            MaxPooling2D pool({.pool_size = {k, 1}, .strides = std::array<std::int64_t, 2>{s, 1}, .padding = padding});
            if (want < 0)
              EXPECT_THROW(conv.compute_output_shape({1, in, 3, 1}), std::invalid_argument) << what;
            else
              EXPECT_EQ(conv.compute_output_shape({1, in, 3, 1})[1], want) << what;
            if (d != 1) continue;
            if (want_pool < 0)
              EXPECT_THROW(pool.compute_output_shape({1, in, 3, 1}), std::invalid_argument) << what;
            else
              EXPECT_EQ(pool.compute_output_shape({1, in, 3, 1})[1], want_pool) << what;
          }
}

TEST(Conv2DTransposeLayer, ValuesAndShapes) {
  // 2x2 input, 2x2 ones kernel, stride 2 valid: each pixel fills a 2x2 block.
  Conv2DTranspose up({.filters = 1, .kernel_size = {2, 2}, .strides = {2, 2}, .use_bias = false, .dtype = f64});
  tf::Tensor x = iota({1, 2, 2, 1});
  up.build(x.shape());
  EXPECT_EQ(up.kernel().shape(), (tf::Shape{2, 2, 1, 1}));
  up.set_weights({tf::constant<double>({1, 1, 1, 1}, {2, 2, 1, 1})});
  EXPECT_TRUE(all_close(up(x), tf::constant<double>({1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, {1, 4, 4, 1})));
  // 3x3 ones kernel, stride 2, same: 2 -> 4; TF pads the conv 0 before / 1 after, so output rows
  // 0-1 see input row 0, row 2 both, row 3 input row 1.
  Conv2DTranspose same({.filters = 1, .kernel_size = {3, 3}, .strides = {2, 2}, .padding = "same", .use_bias = false,
                        .dtype = f64});
  same.build(x.shape());
  same.set_weights({tf::ones({3, 3, 1, 1}, f64)});
  EXPECT_TRUE(all_close(same(x), tf::constant<double>({1, 1, 3, 2, 1, 1, 3, 2, 4, 4, 10, 6, 3, 3, 7, 4}, {1, 4, 4, 1})));
  // The DCGAN generator's shapes and the kernel layout [kh, kw, filters, in].
  Conv2DTranspose a({.filters = 64, .kernel_size = {5, 5}, .strides = {2, 2}, .padding = "same"});
  EXPECT_EQ(a(tf::zeros({2, 7, 7, 128})).shape(), (tf::Shape{2, 14, 14, 64}));
  EXPECT_EQ(a.kernel().shape(), (tf::Shape{5, 5, 64, 128}));
  Conv2DTranspose b({.filters = 1, .kernel_size = {5, 5}, .strides = {2, 2}, .padding = "same"});
  EXPECT_EQ(b(tf::zeros({2, 14, 14, 64})).shape(), (tf::Shape{2, 28, 28, 1}));
  // valid: in·s + max(k - s, 0).
  Conv2DTranspose v({.filters = 2, .kernel_size = {3, 1}, .strides = {2, 2}});
  EXPECT_EQ(v.compute_output_shape({1, 4, 4, 3}), (tf::Shape{1, 9, 8, 2}));
  EXPECT_EQ(v(tf::zeros({1, 4, 4, 3})).shape(), (tf::Shape{1, 9, 8, 2}));
}

TEST(ConvLayers, Float64GradientsFirstAndSecondOrder) {
  Conv2D conv({.filters = 2, .kernel_size = {3, 3}, .strides = {2, 2}, .padding = "same", .activation = "tanh",
               .seed = 1, .dtype = f64});
  Conv2DTranspose up({.filters = 1, .kernel_size = {3, 3}, .strides = {2, 2}, .padding = "same", .seed = 2, .dtype = f64});
  EXPECT_TRUE(tf::testing::gradcheck_both([&](const std::vector<tf::Tensor>& in) { return up(conv(in[0])); },
                                          {random_f64({2, 4, 4, 1}, 3)}));
}

TEST(ConvLayers, ErrorsNameTheLayerAndShapes) {
  expect_invalid_argument([] { Conv2D({.filters = 0, .kernel_size = {3, 3}}); }, {"Conv2D", "filters", "0"});
  expect_invalid_argument([] { Conv2D({.filters = 1, .kernel_size = {0, 3}}); }, {"Conv2D", "kernel_size", "(0, 3)"});
  expect_invalid_argument([] { Conv2D({.filters = 1, .kernel_size = {3, 3}, .padding = "full"}); }, {"Conv2D", "padding", "full"});
  expect_invalid_argument([] { Conv2D({.filters = 1, .kernel_size = {3, 3}, .strides = {2, 2}, .dilation_rate = {2, 2}}); },
               {"Conv2D", "strides", "dilation_rate"});
  expect_invalid_argument([] { Conv2DTranspose({.filters = 1, .kernel_size = {3, 3}, .activation = "nope"}); }, {"nope"});
  Conv2D conv({.filters = 4, .kernel_size = {3, 3}, .name = "c1"});
  expect_invalid_argument([&] { conv(tf::zeros({28, 28, 1})); }, {"Conv2D 'c1'", "rank 4", "[28, 28, 1]"});
  conv(tf::zeros({1, 8, 8, 3}));
  expect_invalid_argument([&] { conv(tf::zeros({1, 8, 8, 2})); }, {"Conv2D 'c1'", "3 channels", "[1, 8, 8, 2]", "[3, 3, 3, 4]"});
  expect_invalid_argument([&] { conv(tf::zeros({1, 2, 8, 3})); }, {"Conv2D 'c1'", "[1, 2, 8, 3]"});
  Conv2DTranspose t({.filters = 4, .kernel_size = {3, 3}, .name = "t1"});
  t(tf::zeros({1, 4, 4, 5}));
  expect_invalid_argument([&] { t(tf::zeros({1, 4, 4, 2})); }, {"Conv2DTranspose 't1'", "5 channels", "[1, 4, 4, 2]", "[3, 3, 4, 5]"});
  expect_invalid_argument([] { MaxPooling2D({.pool_size = {0, 2}}); }, {"MaxPooling2D", "pool_size"});
  expect_invalid_argument([] { AveragePooling2D({.padding = "causal"}); }, {"AveragePooling2D", "causal"});
  MaxPooling2D pool({.name = "p"});
  expect_invalid_argument([&] { pool(tf::zeros({4, 4, 1})); }, {"MaxPooling2D 'p'", "rank 4", "[4, 4, 1]"});
  expect_invalid_argument([&] { pool(tf::zeros({1, 1, 4, 1})); }, {"MaxPooling2D 'p'", "[1, 1, 4, 1]"});
  expect_invalid_argument([] { GlobalAveragePooling2D()(tf::zeros({4, 4})); }, {"GlobalAveragePooling2D", "[4, 4]"});
  expect_invalid_argument([] { UpSampling2D({.size = {0, 2}}); }, {"UpSampling2D", "size"});
  expect_invalid_argument([] { UpSampling2D({.interpolation = "bilinear"}); }, {"UpSampling2D", "bilinear"});
  expect_invalid_argument([] { UpSampling2D()(tf::zeros({2, 2, 2})); }, {"UpSampling2D", "[2, 2, 2]"});
  expect_invalid_argument([] { ZeroPadding2D({.padding = {{{-1, 0}, {0, 0}}}}); }, {"ZeroPadding2D", "-1"});
  expect_invalid_argument([] { ZeroPadding2D()(tf::zeros({2, 2, 2})); }, {"ZeroPadding2D", "[2, 2, 2]"});
}

TEST(PoolingLayers, ValuesAndShapes) {
  tf::Tensor x = iota({1, 4, 4, 1});
  MaxPooling2D max_pool({.dtype = f64});
  EXPECT_EQ(max_pool.name().rfind("max_pooling2d", 0), 0u) << max_pool.name();
  EXPECT_EQ(max_pool.strides(), (std::array<std::int64_t, 2>{2, 2}));  // strides default to pool_size
  EXPECT_TRUE(all_close(max_pool(x), tf::constant<double>({6, 8, 14, 16}, {1, 2, 2, 1})));
  AveragePooling2D avg({.pool_size = {3, 3}, .strides = {{2, 2}}, .padding = "same", .dtype = f64});
  EXPECT_TRUE(all_close(avg(x), tf::constant<double>({6, 7.5, 12, 13.5}, {1, 2, 2, 1})));
  EXPECT_EQ(avg.compute_output_shape({3, 5, 7, 2}), (tf::Shape{3, 3, 4, 2}));
  EXPECT_EQ(MaxPooling2D().compute_output_shape({3, 11, 11, 64}), (tf::Shape{3, 5, 5, 64}));
  tf::Tensor y = iota({2, 2, 2, 2});
  EXPECT_TRUE(all_close(GlobalAveragePooling2D({.dtype = f64})(y), tf::constant<double>({4, 5, 12, 13}, {2, 2})));
  EXPECT_TRUE(all_close(GlobalMaxPooling2D({.dtype = f64})(y), tf::constant<double>({7, 8, 15, 16}, {2, 2})));
  EXPECT_EQ(GlobalMaxPooling2D({.keepdims = true})(y).shape(), (tf::Shape{2, 1, 1, 2}));
  EXPECT_EQ(GlobalAveragePooling2D({.keepdims = true}).compute_output_shape({2, 5, 5, 3}), (tf::Shape{2, 1, 1, 3}));
}

TEST(ReshapingLayers, UpSamplingAndZeroPadding) {
  tf::Tensor x = iota({1, 2, 2, 1});
  UpSampling2D up({.size = {2, 3}, .dtype = f64});
  EXPECT_EQ(up.name().rfind("up_sampling2d", 0), 0u) << up.name();
  tf::Tensor y = up(x);
  EXPECT_EQ(y.shape(), (tf::Shape{1, 4, 6, 1}));
  EXPECT_TRUE(all_close(y, tf::constant<double>({1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4},
                                                {1, 4, 6, 1})));
  EXPECT_TRUE(tf::testing::gradcheck_both([&](const std::vector<tf::Tensor>& in) { return tf::square(up(in[0])); },
                                          {random_f64({2, 2, 3, 2}, 1)}));
  ZeroPadding2D pad({.padding = {{{1, 0}, {0, 2}}}, .dtype = f64});
  EXPECT_EQ(pad.name().rfind("zero_padding2d", 0), 0u) << pad.name();
  EXPECT_TRUE(all_close(pad(x), tf::constant<double>({0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0}, {1, 3, 4, 1})));
  EXPECT_EQ(pad.compute_output_shape({2, 5, 5, 3}), (tf::Shape{2, 6, 7, 3}));
}

TEST(NormalizationOn4D, BatchNormalizesPerChannelAndDropoutKeepsTheShape) {
  BatchNormalization bn({.dtype = f64});
  tf::Tensor x = random_f64({4, 3, 3, 2}, 5, 0.0, 10.0);
  tf::Tensor y = bn(x, true);
  EXPECT_EQ(bn.weights()[0].shape(), (tf::Shape{2}));  // gamma per channel
  tf::Tensor mean = tf::reduce_mean(y, {0, 1, 2});
  tf::Tensor var = tf::reduce_mean(tf::square(y), {0, 1, 2});
  EXPECT_TRUE(all_close(mean, tf::zeros({2}, f64), 0, 1e-10));
  // Keras: var / (var + 1e-3) with the biased batch variance of x.
  tf::Tensor xm = x - tf::reduce_mean(x, {0, 1, 2}, true);
  tf::Tensor xv = tf::reduce_mean(tf::square(xm), {0, 1, 2});
  EXPECT_TRUE(all_close(var, xv / (xv + 1e-3), 1e-9, 1e-9));
  Dropout d({.rate = 0.5, .seed = 1, .dtype = f64});
  tf::Tensor z = d(tf::ones({2, 4, 4, 3}, f64), true);
  EXPECT_EQ(z.shape(), (tf::Shape{2, 4, 4, 3}));
  const double kept = tf::reduce_sum(z).item<double>() / 2.0;
  EXPECT_GT(kept, 10);
  EXPECT_LT(kept, 86);
}

}  // namespace
