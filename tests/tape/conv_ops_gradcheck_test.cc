// Float64 first- and second-order gradient checks of the convolution and pooling ops, over the
// cases that break naive implementations (stride 2, even kernels with SAME's asymmetric padding,
// dilation 2, 1x1 kernels, batch > 1, channels != 1, transpose 7 -> 14 and 14 -> 28, pooling
// windows that overlap and that do not; inputs are random, so max-pooling windows have no ties).
#include <gtest/gtest.h>

#include "tape/tapeflow.h"
#include "tests/testing/gradcheck_table.h"

namespace tf = tapeflow;
using tf::testing::random_f64;

namespace {

using In = std::vector<tf::Tensor>;

std::function<In()> inputs(std::vector<tf::Shape> shapes) {
  return tf::testing::random_inputs(std::move(shapes), 71);
}

tf::testing::TestFn conv(tf::Size2D s, tf::Padding2D p, tf::Size2D d = {1, 1}) {
  return [s, p, d](const In& in) { return tf::conv2d(in[0], in[1], s, p, d); };
}

tf::testing::TestFn fused(tf::Size2D s, tf::Padding2D p, std::string activation) {
  return [s, p, activation](const In& in) { return tf::fused_conv2d(in[0], in[1], in[2], s, p, {1, 1}, activation); };
}

// conv2d_transpose of in[0] [N,h,w,Cin] with filters in[1] [k,k,Cout,Cin] to `out`.
tf::testing::TestFn transpose(tf::Shape out, tf::Size2D s, tf::Padding2D p) {
  return [out, s, p](const In& in) { return tf::conv2d_transpose(in[0], in[1], out, s, p); };
}

tf::testing::TestFn backprop_filter(tf::Shape fs, tf::Size2D s, tf::Padding2D p, tf::Size2D d = {1, 1}) {
  return [fs, s, p, d](const In& in) { return tf::conv2d_backprop_filter(in[0], fs, in[1], s, p, d); };
}

tf::testing::TestFn max_pool(tf::Size2D k, tf::Size2D s, std::string p) {
  return [k, s, p](const In& in) { return tf::max_pool2d(in[0], k, s, p); };
}
tf::testing::TestFn avg_pool(tf::Size2D k, tf::Size2D s, std::string p) {
  return [k, s, p](const In& in) { return tf::avg_pool2d(in[0], k, s, p); };
}

tf::testing::TestFn conv_max_pool(tf::Size2D s, tf::Padding2D p, tf::Size2D k, tf::Size2D ps, std::string pp,
                                  std::string activation = "") {
  return [s, p, k, ps, pp, activation](const In& in) {
    return tf::fused_conv2d_max_pool2d(in[0], in[1], in[2], s, p, {1, 1}, k, ps, pp, activation).first;
  };
}

// The argmax of a fixed [1, 5, 5, 2] tensor's 3x3 stride-2 SAME max pool (through the fused op with
// a 1x1 identity filter), for the argmax gradient ops' rows.
tf::Tensor fixed_argmax() {
  const tf::Tensor z = random_f64({1, 5, 5, 2}, 99);
  const tf::Tensor eye = tf::constant(std::vector<double>{1, 0, 0, 1}, tf::Shape{1, 1, 2, 2});
  return tf::fused_conv2d_max_pool2d(z, eye, tf::zeros(tf::Shape{2}, tf::DType::kFloat64), {1, 1}, "VALID", {1, 1},
                                     {3, 3}, {2, 2}, "SAME")
      .second;
}

// FusedConv2DMaxPoolBackpropFilter's two outputs as one vector (filter gradient, then bias's), the
// argmax from the fused op on fixed inputs of the same geometry.
tf::testing::TestFn filter_bias_with_argmax(tf::Shape xs, tf::Shape fs, tf::Size2D s, tf::Padding2D p, tf::Size2D k,
                                            tf::Size2D ps, std::string pp, bool relu = false) {
  return [=](const In& in) {
    const auto [y, argmax] = tf::fused_conv2d_max_pool2d(random_f64(xs, 98), random_f64(fs, 97),
                                                         random_f64({fs[3]}, 96), s, p, {1, 1}, k, ps, pp, "relu");
    const auto [df, db] = tf::fused_conv2d_max_pool2d_backprop_filter(in[0], fs, in[1], argmax, s, p, {1, 1}, k, ps,
                                                                      pp, relu ? y : tf::Tensor());
    return tf::concat({tf::reshape(df, std::vector<std::int64_t>{-1}), db}, 0);
  };
}

tf::testing::RegisterGradChecks rows({
    {"FusedConv2DMaxPoolBackpropFilter", "3x3 VALID, 2 channels, 2x2 stride-2 pool (rows made in cache, odd 5 -> 2)",
     filter_bias_with_argmax({2, 7, 7, 2}, {3, 3, 2, 3}, {1, 1}, "VALID", {2, 2}, {2, 2}, "VALID"),
     inputs({{2, 7, 7, 2}, {2, 2, 2, 3}})},
    {"FusedConv2DMaxPoolBackpropFilter", "relu, 3x3 VALID, 3 channels, 2x2 stride-2 pool (rows made in cache)",
     filter_bias_with_argmax({2, 6, 7, 3}, {3, 3, 3, 4}, {1, 1}, "VALID", {2, 2}, {2, 2}, "VALID", true),
     inputs({{2, 6, 7, 3}, {2, 2, 2, 4}})},
    {"FusedConv2DMaxPoolBackpropFilter", "relu, 5 channels, 3x3 stride-2 SAME pool (temporary)",
     filter_bias_with_argmax({1, 9, 8, 5}, {3, 3, 5, 2}, {2, 2}, "SAME", {3, 3}, {2, 2}, "SAME", true),
     inputs({{1, 9, 8, 5}, {1, 3, 2, 2}})},
    {"FusedConv2DMaxPoolBackpropFilter", "SAME stride-2 conv, 5 channels, 3x3 stride-2 SAME pool (temporary)",
     filter_bias_with_argmax({1, 9, 8, 5}, {3, 3, 5, 2}, {2, 2}, "SAME", {3, 3}, {2, 2}, "SAME"),
     inputs({{1, 9, 8, 5}, {1, 3, 2, 2}})},
    {"FusedConv2DMaxPool", "relu, a first layer: the input a constant (filter and bias gradients from the argmax)",
     [](const In& in) {
       return tf::fused_conv2d_max_pool2d(random_f64({2, 7, 7, 1}, 95), in[0], in[1], {1, 1}, "VALID", {1, 1}, {2, 2},
                                          {2, 2}, "VALID", "relu")
           .first;
     },
     inputs({{3, 3, 1, 3}, {3}})},
    {"FusedConv2DMaxPool", "3x3 VALID conv, 2 channels, 2x2 stride-2 pool (fused, odd 5 -> 2)",
     conv_max_pool({1, 1}, "VALID", {2, 2}, {2, 2}, "VALID"), inputs({{2, 7, 7, 2}, {3, 3, 2, 3}, {3}})},
    {"FusedConv2DMaxPool", "SAME stride-2 conv, 5 channels (GEMM), 3x3 stride-2 SAME pool (overlapping)",
     conv_max_pool({2, 2}, "SAME", {3, 3}, {2, 2}, "SAME"), inputs({{1, 9, 8, 5}, {3, 3, 5, 2}, {2}})},
    {"FusedConv2DMaxPool", "relu, 3x3 VALID conv, 2x2 stride-2 pool (fused)",
     conv_max_pool({1, 1}, "VALID", {2, 2}, {2, 2}, "VALID", "relu"), inputs({{2, 6, 6, 2}, {3, 3, 2, 3}, {3}})},
    {"FusedConv2DMaxPool", "relu, 5 channels (GEMM), 3x3 stride-2 SAME pool",
     conv_max_pool({1, 1}, "SAME", {3, 3}, {2, 2}, "SAME", "relu"), inputs({{1, 6, 5, 5}, {3, 3, 5, 2}, {2}})},
    {"MaxPoolGradWithArgmax", "of a 3x3 stride-2 SAME pool (overlapping)",
     [](const In& in) { return tf::max_pool2d_grad_with_argmax({1, 5, 5, 2}, in[0], fixed_argmax(), {3, 3}, {2, 2}, "SAME"); },
     inputs({{1, 3, 3, 2}})},
    {"MaxPoolGradGradWithArgmax", "through the gradient of MaxPoolGradWithArgmax",
     [](const In& in) {
       tf::GradientTape tape;
       tape.watch(in[0]);
       tf::Tensor y = tf::reduce_sum(
           tf::max_pool2d_grad_with_argmax({1, 5, 5, 2}, in[0], fixed_argmax(), {3, 3}, {2, 2}, "SAME") * in[1]);
       return *tape.gradient(y, in[0]);
     },
     inputs({{1, 3, 3, 2}, {1, 5, 5, 2}})},
    {"Conv2D", "VALID 3x3, batch 2, 2 -> 3 channels", conv({1, 1}, "VALID"), inputs({{2, 5, 5, 2}, {3, 3, 2, 3}})},
    {"Conv2D", "SAME stride 2, even 4x4 kernel (pads 1/1 and 1/2)", conv({2, 2}, "SAME"),
     inputs({{1, 6, 5, 2}, {4, 4, 2, 2}})},
    {"Conv2D", "SAME dilation 2, 3x2 kernel", conv({1, 1}, "SAME", {2, 2}), inputs({{1, 7, 6, 1}, {3, 2, 1, 2}})},
    {"Conv2D", "1x1 kernel, batch 2", conv({1, 1}, "VALID"), inputs({{2, 3, 3, 3}, {1, 1, 3, 2}})},
    {"Conv2D", "explicit {1,0,2,1}, strides {2,1}", conv({2, 1}, std::array<std::int64_t, 4>{1, 0, 2, 1}),
     inputs({{1, 5, 6, 2}, {3, 3, 2, 2}})},
    // 5 input channels: the im2col + GEMM kernels (the cases above have <= 4 and run the direct ones)
    {"Conv2D", "SAME stride 2, 5 -> 2 channels (im2col path)", conv({2, 2}, "SAME"),
     inputs({{1, 5, 4, 5}, {3, 3, 5, 2}})},
    {"FusedConv2D", "relu, SAME stride 2, 2 -> 3 channels (direct kernel)", fused({2, 2}, "SAME", "relu"),
     inputs({{2, 5, 5, 2}, {3, 3, 2, 3}, {3}})},
    {"FusedConv2D", "linear, VALID, 5 -> 2 channels (im2col path)", fused({1, 1}, "VALID", "linear"),
     inputs({{1, 5, 4, 5}, {3, 2, 5, 2}, {2}})},
    {"Conv2DBackpropInput", "transpose 7 -> 14 (5x5, stride 2, SAME)", transpose({1, 14, 14, 1}, {2, 2}, "SAME"),
     inputs({{1, 7, 7, 2}, {5, 5, 1, 2}})},
    {"Conv2DBackpropInput", "transpose 14 -> 28 (3x3, stride 2, SAME)", transpose({1, 28, 28, 1}, {2, 2}, "SAME"),
     inputs({{1, 14, 14, 1}, {3, 3, 1, 1}})},
    {"Conv2DBackpropInput", "stride 1 SAME, batch 2, 2 -> 3 channels", transpose({2, 4, 4, 3}, {1, 1}, "SAME"),
     inputs({{2, 4, 4, 2}, {3, 3, 3, 2}})},
    {"Conv2DBackpropInput", "VALID stride 2 with a leftover row (5 -> 2 -> 5)", transpose({1, 5, 5, 2}, {2, 2}, "VALID"),
     inputs({{1, 2, 2, 2}, {2, 2, 2, 2}})},
    {"Conv2DBackpropFilter", "VALID 3x3, batch 2", backprop_filter({3, 3, 2, 3}, {1, 1}, "VALID"),
     inputs({{2, 5, 5, 2}, {2, 3, 3, 3}})},
    {"Conv2DBackpropFilter", "SAME stride 2, even 2x2 kernel", backprop_filter({2, 2, 2, 2}, {2, 2}, "SAME"),
     inputs({{1, 5, 5, 2}, {1, 3, 3, 2}})},
    {"Conv2DBackpropFilter", "dilation 2", backprop_filter({2, 2, 1, 2}, {1, 1}, "VALID", {2, 2}),
     inputs({{1, 5, 5, 1}, {1, 3, 3, 2}})},
    {"Conv2DBackpropFilter", "SAME 3x3, 5 channels (im2col path)", backprop_filter({3, 3, 5, 2}, {1, 1}, "SAME"),
     inputs({{1, 4, 4, 5}, {1, 4, 4, 2}})},
    {"MaxPool", "2x2 stride 2 VALID (disjoint windows), batch 2", max_pool({2, 2}, {2, 2}, "VALID"),
     inputs({{2, 4, 4, 2}})},
    {"MaxPool", "3x3 stride 2 SAME (overlapping, asymmetric padding)", max_pool({3, 3}, {2, 2}, "SAME"),
     inputs({{1, 6, 5, 2}})},
    {"MaxPool", "3x2 stride 1 VALID (overlapping)", max_pool({3, 2}, {1, 1}, "VALID"), inputs({{1, 4, 4, 1}})},
    {"MaxPoolGrad", "of 3x3 stride 2 SAME (overlapping)",
     [](const In& in) { return tf::max_pool2d_grad(in[0], in[1], {3, 3}, {2, 2}, "SAME"); },
     inputs({{1, 5, 5, 2}, {1, 3, 3, 2}})},
    {"MaxPoolGradGrad", "through the gradient of MaxPoolGrad",
     [](const In& in) {
       // d/dg of <MaxPoolGrad(x, g), w> is MaxPoolGradGrad(x, w); its gradient in turn is MaxPoolGrad.
       tf::GradientTape tape;
       tape.watch(in[1]);
       tf::Tensor y = tf::reduce_sum(tf::max_pool2d_grad(in[0], in[1], {2, 2}, {1, 1}, "VALID") * in[2]);
       return *tape.gradient(y, in[1]);
     },
     inputs({{1, 4, 4, 2}, {1, 3, 3, 2}, {1, 4, 4, 2}})},
    {"AvgPool", "2x2 stride 2 VALID", avg_pool({2, 2}, {2, 2}, "VALID"), inputs({{2, 4, 4, 2}})},
    {"AvgPool", "3x3 stride 2 SAME (divides by the unpadded count)", avg_pool({3, 3}, {2, 2}, "SAME"),
     inputs({{1, 6, 5, 2}})},
    {"AvgPoolGrad", "of 3x3 stride 1 SAME",
     [](const In& in) { return tf::avg_pool2d_grad({1, 4, 4, 2}, in[0], {3, 3}, {1, 1}, "SAME"); },
     inputs({{1, 4, 4, 2}})},
    {"conv2d+max_pool2d+relu", "a small convnet block, 2nd order through everything",
     [](const In& in) {
       tf::Tensor h = tf::relu(tf::conv2d(in[0], in[1], {1, 1}, "SAME"));
       return tf::avg_pool2d(tf::max_pool2d(h, {2, 2}, {2, 2}), {2, 2}, {1, 1}, "SAME");
     },
     inputs({{2, 4, 4, 1}, {3, 3, 1, 2}})},
});

TEST(ConvOpsGradCheck, FirstAndSecondOrder) {
  tf::testing::run_gradcheck_cases({"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "conv2d+max_pool2d+relu"});
}

TEST(PoolOpsGradCheck, FirstAndSecondOrder) {
  tf::testing::run_gradcheck_cases({"MaxPool", "MaxPoolGrad", "MaxPoolGradGrad", "AvgPool", "AvgPoolGrad",
                                    "FusedConv2DMaxPool", "MaxPoolGradWithArgmax", "MaxPoolGradGradWithArgmax",
                                    "FusedConv2DMaxPoolBackpropFilter"});
}

}  // namespace
