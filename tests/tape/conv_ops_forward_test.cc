// Forward values, shapes, identities and errors of the convolution and pooling ops.
#include <gtest/gtest.h>

#include <string>

#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"
#include "tests/testing/test_values.h"

namespace tf = tapeflow;
using tf::testing::all_close;
using tf::testing::random_f64;

namespace {

using tf::testing::iota;

using tf::testing::expect_invalid_argument;

TEST(Conv2D, HandComputedValues) {
  // x = 1..16 as [1,4,4,1]; a 2x2 ones filter sums each window: VALID -> 3x3.
  tf::Tensor y = tf::conv2d(iota({1, 4, 4, 1}), tf::constant<double>({1, 1, 1, 1}, {2, 2, 1, 1}));
  EXPECT_EQ(y.shape(), (tf::Shape{1, 3, 3, 1}));
  EXPECT_TRUE(all_close(y, tf::constant<double>({14, 18, 22, 30, 34, 38, 46, 50, 54}, {1, 3, 3, 1})));
  // SAME, stride 2 on 4x4 with a 2x2 kernel: pad_total 0 -> disjoint windows.
  tf::Tensor s = tf::conv2d(iota({1, 4, 4, 1}), tf::constant<double>({1, 1, 1, 1}, {2, 2, 1, 1}), {2, 2}, "SAME");
  EXPECT_TRUE(all_close(s, tf::constant<double>({14, 22, 46, 54}, {1, 2, 2, 1})));
  // SAME stride 1 on 3x3 with 2x2: the extra padding row/column is at the bottom/right.
  tf::Tensor b = tf::conv2d(iota({1, 3, 3, 1}), tf::constant<double>({1, 1, 1, 1}, {2, 2, 1, 1}), {1, 1}, "SAME");
  EXPECT_TRUE(all_close(b, tf::constant<double>({12, 16, 9, 24, 28, 15, 15, 17, 9}, {1, 3, 3, 1})));
}

TEST(Conv2D, SameEqualsTheAsymmetricExplicitPadding) {
  // 5 wide, kernel 4, stride 2: TF pads 1 before and 2 after.
  tf::Tensor x = random_f64({2, 5, 5, 3}, 1), f = random_f64({4, 4, 3, 2}, 2);
  tf::Tensor same = tf::conv2d(x, f, {2, 2}, "SAME");
  tf::Tensor expl = tf::conv2d(x, f, {2, 2}, std::array<std::int64_t, 4>{1, 2, 1, 2});
  EXPECT_EQ(same.shape(), (tf::Shape{2, 3, 3, 2}));
  EXPECT_TRUE(all_close(same, expl, 0, 0));
  tf::Tensor padded = tf::pad(x, {{0, 0}, {1, 2}, {1, 2}, {0, 0}});
  EXPECT_TRUE(all_close(same, tf::conv2d(padded, f, {2, 2}, "VALID"), 1e-14, 1e-14));
}

TEST(Conv2D, Float32MatchesFloat64) {
  tf::Tensor x = random_f64({2, 9, 9, 3}, 3), f = random_f64({5, 5, 3, 4}, 4);
  tf::Tensor y64 = tf::conv2d(x, f, {2, 2}, "SAME");
  tf::Tensor y32 = tf::conv2d(tf::cast(x, tf::DType::kFloat32), tf::cast(f, tf::DType::kFloat32), {2, 2}, "SAME");
  EXPECT_EQ(y32.dtype(), tf::DType::kFloat32);
  EXPECT_TRUE(all_close(tf::cast(y32, tf::DType::kFloat64), y64, 1e-5, 1e-5));
}

// fused_conv2d must carry exactly the bits of conv2d, + bias and relu in sequence, on each kernel
// path: direct (<= 4 input channels), im2col + GEMM, and 1x1 (pointwise); float32 and float64;
// channel counts with a packet tail. Its gradients are those ops' gradients (same bits too).
TEST(FusedConv2D, BitIdenticalToConvBiasAddRelu) {
  struct Case {
    tf::Shape x, f;
    tf::Size2D s;
    const char* padding;
  };
  for (const Case& k : {Case{{2, 9, 8, 3}, {3, 3, 3, 20}, {1, 1}, "SAME"},
                        Case{{2, 9, 8, 7}, {3, 2, 7, 13}, {2, 1}, "VALID"},
                        Case{{2, 5, 5, 6}, {1, 1, 6, 11}, {1, 1}, "VALID"}})
    for (tf::DType dt : {tf::DType::kFloat32, tf::DType::kFloat64})
      for (const char* act : {"relu", "linear"}) {
        SCOPED_TRACE(::testing::Message() << k.x.to_string() << " " << k.f.to_string() << " " << act << " "
                                          << tf::dtype_name(dt));
        tf::Variable x(tf::cast(random_f64(k.x, 5), dt)), f(tf::cast(random_f64(k.f, 6), dt)),
            b(tf::cast(random_f64({k.f[3]}, 7), dt));
        tf::GradientTape t1, t2;
        const tf::Tensor fused = tf::fused_conv2d(x.read(), f.read(), b.read(), k.s, k.padding, {1, 1}, act);
        tf::Tensor plain = tf::conv2d(x.read(), f.read(), k.s, k.padding) + b.read();
        if (std::string(act) == "relu") plain = tf::relu(plain);
        ASSERT_TRUE(all_close(fused, plain, 0, 0));
        const tf::Tensor w = tf::cast(random_f64(fused.shape(), 8), dt);
        const auto g1 = t1.gradient(tf::reduce_sum(fused * w), {x, f, b});
        const auto g2 = t2.gradient(tf::reduce_sum(plain * w), {x, f, b});
        for (int i = 0; i < 3; ++i) EXPECT_TRUE(all_close(*g1[i], *g2[i], 0, 0)) << "gradient " << i;
      }
}

// fused_conv2d_max_pool2d: fused_conv2d (linear) then max_pool2d bit for bit, gradients too (both
// dtypes; the fused in-cache path and the temporary path); its argmax is TF's in-image index.
TEST(FusedConv2DMaxPool, BitIdenticalToConvBiasAddMaxPool) {
  struct Case {
    tf::Shape x, f;
    tf::Size2D k, s;
    const char* padding;
  };
  for (const Case& c : {Case{{3, 12, 11, 1}, {3, 3, 1, 20}, {2, 2}, {2, 2}, "VALID"},
                        Case{{2, 9, 9, 6}, {3, 3, 6, 13}, {3, 3}, {2, 2}, "SAME"},
                        Case{{8, 28, 28, 1}, {3, 3, 1, 32}, {2, 2}, {2, 2}, "VALID"}})
    for (tf::DType dt : {tf::DType::kFloat32, tf::DType::kFloat64})
      for (std::string act : {"", "relu"}) {
        SCOPED_TRACE(::testing::Message() << c.x.to_string() << " " << tf::dtype_name(dt) << " " << act);
        const auto activate = [&](const tf::Tensor& t) { return act == "relu" ? tf::relu(t) : t; };
        tf::Variable x(tf::cast(random_f64(c.x, 5), dt)), f(tf::cast(random_f64(c.f, 6), dt)),
            b(tf::cast(random_f64({c.f[3]}, 7), dt));
        tf::GradientTape t1, t2;
        const auto [fused, argmax] =
            tf::fused_conv2d_max_pool2d(x.read(), f.read(), b.read(), {1, 1}, "VALID", {1, 1}, c.k, c.s, c.padding, act);
        const tf::Tensor z = tf::fused_conv2d(x.read(), f.read(), b.read());
        const tf::Tensor plain = activate(tf::max_pool2d(z, c.k, c.s, c.padding));
        ASSERT_TRUE(all_close(fused, plain, 0, 0));
        EXPECT_EQ(argmax.dtype(), tf::DType::kInt32);
        // Each output is z at its argmax.
        const auto zv = tf::cast(z, tf::DType::kFloat64).to_vector<double>();
        const auto yv = tf::cast(fused, tf::DType::kFloat64).to_vector<double>();
        const auto av = argmax.to_vector<std::int32_t>();
        const std::int64_t image = z.shape()[1] * z.shape()[2] * z.shape()[3], pooled = static_cast<std::int64_t>(av.size()) / c.x[0];
        for (std::size_t i = 0; i < av.size(); ++i)
          ASSERT_EQ(yv[i], std::max(act == "relu" ? 0.0 : -1e300,
                                    zv[static_cast<std::size_t>(static_cast<std::int64_t>(i) / pooled * image + av[i])]))
              << i;
        const tf::Tensor w = tf::cast(random_f64(fused.shape(), 8), dt);
        const auto g1 = t1.gradient(tf::reduce_sum(fused * w), {x, f, b});
        const auto g2 = t2.gradient(tf::reduce_sum(plain * w), {x, f, b});
        for (int i = 0; i < 3; ++i) EXPECT_TRUE(all_close(*g1[i], *g2[i], 0, 0)) << "gradient " << i;
        // A first layer (no gradient for the input): the filter and bias gradients come from
        // FusedConv2DMaxPoolBackpropFilter, still bit for bit.
        const tf::Tensor xc = tf::cast(random_f64(c.x, 5), dt);
        tf::GradientTape t3, t4;
        const tf::Tensor y3 =
            tf::fused_conv2d_max_pool2d(xc, f.read(), b.read(), {1, 1}, "VALID", {1, 1}, c.k, c.s, c.padding, act).first;
        const tf::Tensor y4 = activate(tf::max_pool2d(tf::fused_conv2d(xc, f.read(), b.read()), c.k, c.s, c.padding));
        const auto g3 = t3.gradient(tf::reduce_sum(y3 * w), {f, b});
        const auto g4 = t4.gradient(tf::reduce_sum(y4 * w), {f, b});
        for (int i = 0; i < 2; ++i) EXPECT_TRUE(all_close(*g3[i], *g4[i], 0, 0)) << "first layer, gradient " << i;
      }
}

TEST(Conv2DTranspose, ShapesAndAdjointIdentity) {
  // 7 -> 14 and 14 -> 28 as in the DCGAN generator; <conv(a), b> == <a, conv_transpose(b)>.
  for (auto [in, out] : {std::pair<std::int64_t, std::int64_t>{7, 14}, {14, 28}}) {
    tf::Tensor f = random_f64({5, 5, 3, 4}, 5);  // [kh, kw, out channels, in channels]
    tf::Tensor b = random_f64({2, in, in, 4}, 6), a = random_f64({2, out, out, 3}, 7);
    tf::Tensor t = tf::conv2d_transpose(b, f, {2, out, out, 3}, {2, 2}, "SAME");
    EXPECT_EQ(t.shape(), (tf::Shape{2, out, out, 3}));
    tf::Tensor c = tf::conv2d(a, f, {2, 2}, "SAME");
    EXPECT_EQ(c.shape(), b.shape());
    EXPECT_NEAR(tf::reduce_sum(c * b).item<double>(), tf::reduce_sum(a * t).item<double>(), 1e-10);
  }
}

TEST(Conv2DBackprop, FilterGradientIsTheAdjoint) {
  tf::Tensor x = random_f64({2, 6, 6, 2}, 8), f = random_f64({3, 3, 2, 3}, 9);
  tf::Tensor dy = random_f64({2, 3, 3, 3}, 10);
  tf::Tensor df = tf::conv2d_backprop_filter(x, f.shape(), dy, {2, 2}, "SAME");
  EXPECT_NEAR(tf::reduce_sum(tf::conv2d(x, f, {2, 2}, "SAME") * dy).item<double>(),
              tf::reduce_sum(df * f).item<double>(), 1e-10);
}

TEST(Pooling, HandComputedValues) {
  tf::Tensor x = iota({1, 4, 4, 1});
  EXPECT_TRUE(all_close(tf::max_pool2d(x, {2, 2}, {2, 2}), tf::constant<double>({6, 8, 14, 16}, {1, 2, 2, 1})));
  EXPECT_TRUE(all_close(tf::avg_pool2d(x, {2, 2}, {2, 2}), tf::constant<double>({3.5, 5.5, 11.5, 13.5}, {1, 2, 2, 1})));
  // SAME 3x3 stride 2 on 4x4: pad_total 1, after only; the corner window averages 4 elements.
  tf::Tensor a = tf::avg_pool2d(x, {3, 3}, {2, 2}, "SAME");
  EXPECT_TRUE(all_close(a, tf::constant<double>({6, 7.5, 12, 13.5}, {1, 2, 2, 1})));
  // Pooling floors: 11 -> 5 (W8's second pool).
  EXPECT_EQ(tf::max_pool2d(random_f64({1, 11, 11, 2}, 1), {2, 2}, {2, 2}).shape(), (tf::Shape{1, 5, 5, 2}));
}

TEST(Pooling, MaxPoolTieGoesToTheFirstElement) {
  tf::Tensor x = tf::constant<double>({1, 1, 1, 1}, {1, 2, 2, 1});
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = tf::max_pool2d(x, {2, 2}, {2, 2});
  EXPECT_TRUE(all_close(*tape.gradient(y, x), tf::constant<double>({1, 0, 0, 0}, {1, 2, 2, 1})));
}

TEST(ConvOpsErrors, NameTheOpAndTheValues) {
  tf::Tensor x = random_f64({1, 5, 5, 2}, 1), f = random_f64({3, 3, 2, 4}, 2);
  expect_invalid_argument([&] { tf::conv2d(random_f64({5, 5, 2}, 1), f); }, {"conv2d", "rank 4", "[5, 5, 2]"});
  expect_invalid_argument([&] { tf::conv2d(x, random_f64({3, 3, 4}, 1)); }, {"conv2d", "filters", "[3, 3, 4]"});
  expect_invalid_argument([&] { tf::conv2d(x, random_f64({3, 3, 3, 4}, 1)); }, {"conv2d", "channels 2", "3"});
  expect_invalid_argument([&] { tf::conv2d(x, f, {1, 1}, "same"); }, {"conv2d", "padding", "same"});
  expect_invalid_argument([&] { tf::conv2d(x, f, {0, 1}); }, {"conv2d", "stride 0"});
  expect_invalid_argument([&] { tf::conv2d(x, f, {1, 1}, "VALID", {1, 0}); }, {"conv2d", "dilation 0"});
  expect_invalid_argument([&] { tf::conv2d(random_f64({1, 2, 2, 2}, 1), f); }, {"conv2d", "input size 2", "window 3"});
  expect_invalid_argument([&] { tf::conv2d(x, tf::cast(f, tf::DType::kFloat32)); }, {"conv2d", "float64", "float32"});
  expect_invalid_argument([&] { tf::conv2d(tf::cast(x, tf::DType::kInt32), tf::cast(f, tf::DType::kInt32)); },
               {"conv2d", "int32"});
  expect_invalid_argument([&] { tf::conv2d(x, f, {1, 1}, std::array<std::int64_t, 4>{-1, 0, 0, 0}); }, {"conv2d", "explicit"});
  expect_invalid_argument([&] { tf::conv2d_backprop_input({1, 5, 5, 2}, f, random_f64({1, 4, 4, 4}, 3)); },
               {"conv2d_backprop_input", "[1, 3, 3, 4]", "[1, 4, 4, 4]"});
  expect_invalid_argument([&] { tf::conv2d_backprop_input({5, 5, 2}, f, random_f64({1, 3, 3, 4}, 3)); },
               {"conv2d_backprop_input", "input_sizes", "[5, 5, 2]"});
  expect_invalid_argument([&] { tf::conv2d_backprop_filter(x, {3, 3, 2, 4}, random_f64({1, 3, 3, 5}, 3)); },
               {"conv2d_backprop_filter", "[1, 3, 3, 4]", "[1, 3, 3, 5]"});
  expect_invalid_argument([&] { tf::conv2d_backprop_filter(x, {3, 3, 4}, random_f64({1, 3, 3, 4}, 3)); },
               {"conv2d_backprop_filter", "filter_sizes"});
  expect_invalid_argument([&] { tf::conv2d_transpose(random_f64({1, 3, 3, 3}, 1), f, {1, 5, 5, 2}); },
               {"conv2d_transpose", "input channels 3", "[3, 3, 2, 4]"});
  expect_invalid_argument([&] { tf::conv2d_transpose(random_f64({1, 3, 3, 4}, 1), f, {1, 5, 5, 3}); },
               {"conv2d_transpose", "output_shape", "[1, 5, 5, 3]"});
  expect_invalid_argument([&] { tf::conv2d_transpose(random_f64({1, 3, 3, 4}, 1), f, {1, 5, 5}); },
               {"conv2d_transpose", "output_shape", "rank 4"});
  const tf::Tensor bias = random_f64({4}, 4);
  expect_invalid_argument([&] { tf::fused_conv2d(x, f, random_f64({3}, 4)); }, {"fused_conv2d", "[4]", "[3]"});
  expect_invalid_argument([&] { tf::fused_conv2d(x, f, random_f64({1, 4}, 4)); }, {"fused_conv2d", "[1, 4]"});
  expect_invalid_argument([&] { tf::fused_conv2d(x, f, tf::cast(bias, tf::DType::kFloat32)); },
                          {"fused_conv2d", "float64", "float32"});
  expect_invalid_argument([&] { tf::fused_conv2d(x, f, bias, {1, 1}, "VALID", {1, 1}, "tanh"); },
                          {"fused_conv2d", "activation", "tanh"});
  expect_invalid_argument([&] { tf::fused_conv2d(x, random_f64({3, 3, 3, 4}, 1), bias); }, {"fused_conv2d", "channels 2", "3"});
}

TEST(PoolOpsErrors, NameTheOpAndTheValues) {
  tf::Tensor x = random_f64({1, 4, 4, 2}, 1);
  expect_invalid_argument([&] { tf::max_pool2d(random_f64({4, 4, 2}, 1), {2, 2}, {2, 2}); }, {"max_pool2d", "[4, 4, 2]"});
  expect_invalid_argument([&] { tf::avg_pool2d(x, {2, 2}, {2, 2}, "EXPLICIT"); }, {"avg_pool2d", "EXPLICIT"});
  expect_invalid_argument([&] { tf::max_pool2d(x, {5, 5}, {1, 1}); }, {"max_pool2d", "input size 4", "window 5"});
  expect_invalid_argument([&] { tf::max_pool2d(x, {0, 2}, {1, 1}); }, {"max_pool2d", "window 0"});
  expect_invalid_argument([&] { tf::max_pool2d(tf::cast(x, tf::DType::kInt64), {2, 2}, {2, 2}); }, {"max_pool2d", "int64"});
  expect_invalid_argument([&] { tf::max_pool2d_grad(x, random_f64({1, 3, 3, 2}, 2), {2, 2}, {2, 2}); },
               {"max_pool2d_grad", "[1, 2, 2, 2]", "[1, 3, 3, 2]"});
  expect_invalid_argument([&] { tf::max_pool2d_grad(x, tf::cast(random_f64({1, 2, 2, 2}, 2), tf::DType::kFloat32), {2, 2}, {2, 2}); },
               {"max_pool2d_grad", "float32"});
  expect_invalid_argument([&] { tf::avg_pool2d_grad({1, 4, 4, 2}, random_f64({1, 3, 3, 2}, 2), {2, 2}, {2, 2}); },
               {"avg_pool2d_grad", "[1, 2, 2, 2]", "[1, 3, 3, 2]"});
  expect_invalid_argument([&] { tf::avg_pool2d_grad({4, 4, 2}, random_f64({1, 2, 2, 2}, 2), {2, 2}, {2, 2}); },
               {"avg_pool2d_grad", "input_shape"});
}

TEST(ArgmaxPoolOpsErrors, NameTheOpAndTheValues) {
  const tf::Tensor x = random_f64({1, 4, 4, 2}, 1), f = random_f64({1, 1, 2, 2}, 2), b = random_f64({2}, 3);
  const auto [y, argmax] = tf::fused_conv2d_max_pool2d(x, f, b, {1, 1}, "VALID", {1, 1}, {2, 2}, {2, 2});
  const char* op = "fused_conv2d_max_pool2d";
  expect_invalid_argument([&] { tf::fused_conv2d_max_pool2d(x, f, random_f64({3}, 4), {1, 1}, "VALID", {1, 1}, {2, 2}, {2, 2}); },
                          {op, "bias", "[2]", "[3]"});
  expect_invalid_argument([&] { tf::fused_conv2d_max_pool2d(x, f, b, {1, 1}, "VALID", {1, 1}, {2, 2}, {2, 2}, "FULL"); },
                          {op, "pool_padding", "FULL"});
  expect_invalid_argument(
      [&] { tf::fused_conv2d_max_pool2d(x, f, b, {1, 1}, "VALID", {1, 1}, {2, 2}, {2, 2}, "VALID", "tanh"); },
      {op, "activation", "tanh"});
  expect_invalid_argument([&] { tf::fused_conv2d_max_pool2d(x, f, b, {1, 1}, "VALID", {1, 1}, {5, 5}, {1, 1}); },
                          {op, "input size 4", "window 5"});
  expect_invalid_argument([&] { tf::fused_conv2d_max_pool2d(x, random_f64({1, 1, 3, 2}, 1), b, {1, 1}, "VALID", {1, 1}, {2, 2}, {2, 2}); },
                          {op, "channels 2", "3"});
  const char* grad = "max_pool2d_grad_with_argmax";
  const tf::Tensor g = random_f64({1, 2, 2, 2}, 4);
  const char* fb = "fused_conv2d_max_pool2d_backprop_filter";
  const auto filter_bias = [&](const tf::Tensor& input, const tf::Shape& fs, const tf::Tensor& dy, const tf::Tensor& am) {
    return tf::fused_conv2d_max_pool2d_backprop_filter(input, fs, dy, am, {1, 1}, "VALID", {1, 1}, {2, 2}, {2, 2});
  };
  EXPECT_NO_THROW(filter_bias(x, f.shape(), g, argmax));
  expect_invalid_argument([&] { filter_bias(x, f.shape(), g, tf::cast(argmax, tf::DType::kInt64)); },
                          {fb, "argmax", "int32", "int64"});
  expect_invalid_argument([&] { filter_bias(x, f.shape(), g, tf::reshape(argmax, tf::Shape{1, 1, 4, 2})); },
                          {fb, "argmax", "[1, 2, 2, 2]", "[1, 1, 4, 2]"});
  expect_invalid_argument([&] { filter_bias(x, f.shape(), random_f64({1, 3, 3, 2}, 4), argmax); },
                          {fb, "[1, 2, 2, 2]", "[1, 3, 3, 2]"});
  expect_invalid_argument([&] { filter_bias(x, f.shape(), tf::cast(g, tf::DType::kFloat32), argmax); },
                          {fb, "float64", "float32"});
  expect_invalid_argument([&] { filter_bias(x, tf::Shape{1, 2, 2}, g, argmax); }, {fb, "filter_sizes"});
  expect_invalid_argument([&] { filter_bias(x, tf::Shape{1, 1, 3, 2}, g, argmax); }, {fb, "channels 2", "3"});
  expect_invalid_argument([&] { filter_bias(x, f.shape(), g, argmax + 2); },
                          {fb, "outside its pooling window", "ksize [2, 2]"});
  const auto with_relu = [&](const tf::Tensor& out) {
    return tf::fused_conv2d_max_pool2d_backprop_filter(x, f.shape(), g, argmax, {1, 1}, "VALID", {1, 1}, {2, 2}, {2, 2},
                                                       "VALID", out);
  };
  EXPECT_NO_THROW(with_relu(y));
  expect_invalid_argument([&] { with_relu(random_f64({1, 2, 1, 2}, 5)); }, {fb, "output", "[1, 2, 2, 2]", "[1, 2, 1, 2]"});
  expect_invalid_argument([&] { with_relu(tf::cast(y, tf::DType::kFloat32)); }, {fb, "float64", "float32"});
  expect_invalid_argument(
      [&] { tf::fused_conv2d_max_pool2d_backprop_filter(x, f.shape(), g, argmax, {1, 1}, "VALID", {1, 1}, {2, 2}, {2, 2}, "FULL"); },
      {fb, "pool_padding", "FULL"});
  expect_invalid_argument([&] { tf::max_pool2d_grad_with_argmax({1, 4, 4, 2}, g, tf::cast(argmax, tf::DType::kInt64), {2, 2}, {2, 2}); },
                          {grad, "argmax", "int32", "int64"});
  expect_invalid_argument([&] { tf::max_pool2d_grad_with_argmax({1, 4, 4, 2}, g, tf::reshape(argmax, tf::Shape{1, 1, 4, 2}), {2, 2}, {2, 2}); },
                          {grad, "argmax", "[1, 2, 2, 2]", "[1, 1, 4, 2]"});
  expect_invalid_argument([&] { tf::max_pool2d_grad_with_argmax({1, 4, 4, 2}, random_f64({1, 3, 3, 2}, 4), argmax, {2, 2}, {2, 2}); },
                          {grad, "[1, 2, 2, 2]", "[1, 3, 3, 2]"});
  expect_invalid_argument([&] { tf::max_pool2d_grad_with_argmax({4, 4, 2}, g, argmax, {2, 2}, {2, 2}); }, {grad, "input_shape"});
  // An index outside its window: another pool's argmax (3x3 windows) or a crafted one.
  expect_invalid_argument([&] { tf::max_pool2d_grad_with_argmax({1, 4, 4, 2}, g, argmax + 2, {2, 2}, {2, 2}); },
                          {grad, "outside its pooling window", "ksize [2, 2]"});
  expect_invalid_argument([&] { tf::max_pool2d_grad_with_argmax({1, 4, 4, 2}, g, argmax * 0 - 1, {3, 3}, {1, 1}); },
                          {grad, "outside its pooling window", "ksize [3, 3]"});
  // An image too large for int32 indices: refused before anything is allocated.
  expect_invalid_argument(
      [&] {
        tf::max_pool2d_grad_with_argmax({1, 50000, 50000, 1}, random_f64({1, 1, 1, 1}, 4),
                                        tf::zeros(tf::Shape{1, 1, 1, 1}, tf::DType::kInt32), {50000, 50000},
                                        {50000, 50000});
      },
      {grad, "[1, 50000, 50000, 1]", "int32"});
}

}  // namespace
