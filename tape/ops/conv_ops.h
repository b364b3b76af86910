// Convolution and pooling ops (tf.nn.*), NHWC activations and HWIO filters as Keras stores them.
//
// DTypes:   float32, float64; input and filters must match.
// Gradient: every gradient is written with these ops (TF's nn_grad.py pattern), so all of them
//           differentiate to any order: conv2d -> (conv2d_backprop_input, conv2d_backprop_filter);
//           conv2d_backprop_input -> (conv2d_backprop_filter, conv2d); conv2d_backprop_filter ->
//           (conv2d_backprop_input, conv2d); max_pool2d -> max_pool2d_grad -> MaxPoolGradGrad ->
//           max_pool2d_grad; avg_pool2d <-> avg_pool2d_grad (linear); fused_conv2d_max_pool2d ->
//           max_pool2d_grad_with_argmax <-> MaxPoolGradGradWithArgmax (linear) and conv2d's.
// Errors:   std::invalid_argument naming the op and the shapes/values received: rank != 4,
//           channels of input and filters differ, a non-float or mismatched dtype, strides /
//           dilations / window sizes < 1, an unknown padding, an output size < 1, an output gradient whose shape is not the forward output's.
// Facts:    Kernels in tape/kernels/conv.h (indirect GEMMs, the packed GEMM, direct kernels for
//           few channels; deterministic and bit-identical for any thread count). Float 3x3
//           stride-1 VALID filter gradients whose dy has an even read extent, and such
//           convolutions under a 2x2 max pool (fused_conv2d_max_pool2d), run Winograd: within
//           rounding of the direct product, not bit-identical to it (TF's backends pick
//           Winograd the same way).
// Ref:      tf.nn.conv2d, tf.nn.conv2d_transpose, tf.raw_ops.Conv2DBackpropInput,
//           tf.raw_ops.Conv2DBackpropFilter, tf.nn.max_pool2d, tf.nn.avg_pool2d,
//           tensorflow/python/ops/nn_grad.py
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "tape/core/tensor.h"

namespace tapeflow {

// Height and width of a stride, dilation or window.
using Size2D = std::array<std::int64_t, 2>;

// Padding of a 2-D convolution: "VALID" (none), "SAME" (TensorFlow's rule: output ceil(in /
// stride), pad_total = max((out - 1) s + (k - 1) d + 1 - in, 0), the extra pixel at the
// bottom/right) or explicit {top, bottom, left, right}.
class Padding2D {
 public:
  // A named mode, "VALID" or "SAME" (upper case, as TF; ops refuse any other name, and pools refuse
  // "EXPLICIT"), so `padding = "SAME"` reads as in Keras.
  Padding2D(const char* mode) : mode_(mode) {}
  // A named mode given as a string (as the const char* constructor).
  Padding2D(std::string mode) : mode_(std::move(mode)) {}
  // Explicit padding: {top, bottom, left, right} zero rows/columns (each >= 0); mode "EXPLICIT".
  // Convolutions only. Ref: tf.nn.conv2d(padding=[[0, 0], [top, bottom], [left, right], [0, 0]])
  Padding2D(std::array<std::int64_t, 4> top_bottom_left_right) : mode_("EXPLICIT"), pads_(top_bottom_left_right) {}
  // "VALID", "SAME" or "EXPLICIT" (or whatever name was given: the op checks it).
  const std::string& mode() const { return mode_; }
  // {top, bottom, left, right} for "EXPLICIT"; all 0 for a named mode.
  const std::array<std::int64_t, 4>& explicit_paddings() const { return pads_; }

 private:
  std::string mode_;
  std::array<std::int64_t, 4> pads_{};
};

// 2-D convolution (cross-correlation, as TF): y[n, i, j, f] = Σ_{a,b,c} x[n, i s_h + a d_h - pt,
// j s_w + b d_w - pl, c] · filters[a, b, c, f] (zeros outside x).
// Shapes:   input [N, H, W, C], filters [kh, kw, C, F] -> [N, Ho, Wo, F].
// Gradient: input: conv2d_backprop_input(input.shape, filters, g); filters:
//           conv2d_backprop_filter(input, filters.shape, g).
// Ref:      tf.nn.conv2d
Tensor conv2d(const Tensor& input, const Tensor& filters, Size2D strides = {1, 1}, const Padding2D& padding = "VALID",
              Size2D dilations = {1, 1});

// activation(conv2d(input, filters) + bias) in one pass: the bias and the activation are applied
// to each output tile as the convolution finishes it, instead of two more passes over the output
// (TensorFlow's _FusedConv2D, which grappler's remapper substitutes for Conv2D -> BiasAdd (-> Relu)
// on CPU). Values are bit-identical to conv2d, + bias and relu in sequence. The Conv2D layer uses it
// when it has a bias and no activation or relu.
// Shapes:   input [N, H, W, C], filters [kh, kw, C, F], bias [F] -> [N, Ho, Wo, F]; one float dtype.
// Gradient: g' = relu_grad(g, y) (relu) or g; input and filters as conv2d's with g';
//           bias: reduce_sum(g', {0, 1, 2}) (TF's BiasAddGrad).
// Errors:   std::invalid_argument naming fused_conv2d: activation not "", "linear" or "relu"; bias
//           not [F] (both shapes given); dtypes that differ; as conv2d otherwise.
// Ref:      tensorflow/core/kernels/conv_ops_fused_impl.h, tf.nn.conv2d + tf.nn.bias_add + tf.nn.relu
Tensor fused_conv2d(const Tensor& input, const Tensor& filters, const Tensor& bias, Size2D strides = {1, 1},
                    const Padding2D& padding = "VALID", Size2D dilations = {1, 1}, const std::string& activation = "");

// activation(max_pool2d(conv2d(input, filters) + bias)) and the pool's argmax in one op
// (FusedConv2DMaxPool): for 2x2 stride-2 pools over convolutions of at most
// kernels::kDirectMaxChannels input channels, the convolution's output is pooled two rows at a
// time while in cache and never stored; otherwise it goes to a temporary (only the rows and columns
// some window reads are computed). Values are bit-identical to fused_conv2d (linear), max_pool2d
// and relu in turn, except for float 3x3 stride-1 VALID convolutions of >= 16 input and output
// channels under a 2x2 stride-2 pool (W8's conv2): those run Winograd F(2x2, 3x3), each 2x2 output
// block being one pool window (2.25x fewer FMAs), within rounding of the direct product (relative
// ~1e-6), an argmax differing only between values that close, and exactly the direct product's
// results when x or the filter holds an inf or NaN (kernels::conv2d_max_pool2d). The models run Conv2D(relu) -> MaxPooling2D as this op with relu (max pooling
// and relu commute; their fusion pass, models/internal/fusion.h). TensorFlow
// has no such op: it is what grappler's remapper does for Conv2D + BiasAdd, carried one op further,
// with the argmax kept as tf.nn.max_pool_with_argmax keeps it.
// Shapes:   input [N, H, W, C], filters [kh, kw, C, F], bias [F] -> {[N, Hp, Wp, F] (the pool of the
//           [N, Ho, Wo, F] convolution), argmax int32 [N, Hp, Wp, F]}: per output, the flat index
//           (h * Wo + w) * F + f within its image of the window's first maximum (window order), as
//           tf.nn.max_pool_with_argmax(include_batch_in_index=False).
// Gradient: g' = max_pool2d_grad_with_argmax(relu_grad(g, y) (relu) or g) (the gradient at the
//           convolution's output), then input and filters as conv2d's with g', bias
//           reduce_sum(g', {0, 1, 2}); when the input needs none, filters and bias come from
//           fused_conv2d_max_pool2d_backprop_filter instead (the same values); argmax none.
// Errors:   std::invalid_argument naming fused_conv2d_max_pool2d: as fused_conv2d (activation not
//           "", "linear" or "relu" included); a pool window, stride or padding as max_pool2d's; an
//           image of 2^31 elements or more.
// Ref:      tf.nn.conv2d, tf.nn.bias_add, tf.nn.max_pool_with_argmax, tf.nn.relu
std::pair<Tensor, Tensor> fused_conv2d_max_pool2d(const Tensor& input, const Tensor& filters, const Tensor& bias,
                                                  Size2D strides, const Padding2D& padding, Size2D dilations,
                                                  Size2D ksize, Size2D pool_strides,
                                                  const std::string& pool_padding = "VALID",
                                                  const std::string& activation = "");

// The filter and bias gradients of fused_conv2d_max_pool2d from its pooled output's gradient and
// argmax, in one op (FusedConv2DMaxPoolBackpropFilter): what its gradient runs when the input needs
// none (a model's first layer). For 2x2 stride-2 pools over convolutions of at most
// kernels::kDirectMaxChannels input channels, the gradient at the convolution's output is made a
// row pair at a time in cache and never stored (W8's conv1: 11 MB); otherwise it goes to a
// temporary. Values are bit-identical to max_pool2d_grad_with_argmax, then conv2d_backprop_filter
// and reduce_sum(·, {0, 1, 2}). TensorFlow has no such op (its grappler fuses forward ops only).
// With relu_output (fused_conv2d_max_pool2d's output with activation relu), out_backprop is the
// gradient at the relu's output and goes through relu_grad(out_backprop, relu_output) first.
// Shapes:   input [N, H, W, C], out_backprop, argmax (int32) and relu_output [N, Hp, Wp, F] (the
//           pooled shape) -> {filter_sizes [kh, kw, C, F], [F]}.
// Gradient: with g' = relu_grad(out_backprop, relu_output) (or out_backprop) and
//           dz = max_pool2d_grad_with_argmax(g'): input conv2d_backprop_input(input.shape, g_filter,
//           dz); out_backprop max_pool2d_grad_grad_with_argmax(fused_conv2d(input, g_filter,
//           g_bias)), through relu_grad with relu_output; argmax and relu_output none.
// Errors:   std::invalid_argument naming fused_conv2d_max_pool2d_backprop_filter: dtypes that
//           differ or are not float; argmax, out_backprop or relu_output not the pooled shape;
//           argmax not int32; an argmax index outside its window; as fused_conv2d_max_pool2d
//           otherwise.
// Ref:      tf.raw_ops.Conv2DBackpropFilter, tf.raw_ops.MaxPoolGradWithArgmax, tf.raw_ops.BiasAddGrad
std::pair<Tensor, Tensor> fused_conv2d_max_pool2d_backprop_filter(const Tensor& input, const Shape& filter_sizes,
                                                                  const Tensor& out_backprop, const Tensor& argmax,
                                                                  Size2D strides, const Padding2D& padding,
                                                                  Size2D dilations, Size2D ksize, Size2D pool_strides,
                                                                  const std::string& pool_padding = "VALID",
                                                                  const Tensor& relu_output = Tensor());

// The gradient of conv2d w.r.t. its input, as an op of its own (TF's Conv2DBackpropInput).
// Shapes:   filters [kh, kw, C, F], out_backprop [N, Ho, Wo, F] -> input_sizes [N, H, W, C];
//           (Ho, Wo) must be what conv2d gives for (H, W).
// Gradient: filters: conv2d_backprop_filter(g, filters.shape, out_backprop); out_backprop:
//           conv2d(g, filters).
Tensor conv2d_backprop_input(const Shape& input_sizes, const Tensor& filters, const Tensor& out_backprop,
                             Size2D strides = {1, 1}, const Padding2D& padding = "VALID", Size2D dilations = {1, 1});

// The gradient of conv2d w.r.t. its filters (TF's Conv2DBackpropFilter).
// Shapes:   input [N, H, W, C], out_backprop [N, Ho, Wo, F] -> filter_sizes [kh, kw, C, F].
// Gradient: input: conv2d_backprop_input(input.shape, g, out_backprop); out_backprop: conv2d(input, g).
Tensor conv2d_backprop_filter(const Tensor& input, const Shape& filter_sizes, const Tensor& out_backprop,
                              Size2D strides = {1, 1}, const Padding2D& padding = "VALID", Size2D dilations = {1, 1});

// Transposed convolution ("deconvolution"): conv2d_backprop_input with the roles read the other
// way round, so that conv2d(output, filters, strides, padding) has input's shape.
// Shapes:   input [N, h, w, C_in], filters [kh, kw, F_out, C_in], output_shape [N, H, W, F_out]
//           (with stride 2 and SAME: 7 -> 14, 14 -> 28).
// Ref:      tf.nn.conv2d_transpose
Tensor conv2d_transpose(const Tensor& input, const Tensor& filters, const Shape& output_shape,
                        Size2D strides = {1, 1}, const Padding2D& padding = "VALID", Size2D dilations = {1, 1});

// Max over each ksize window (padded positions never win: TF's -inf padding).
// Shapes:   input [N, H, W, C] -> [N, Ho, Wo, C]; padding "VALID" or "SAME".
// Gradient: max_pool2d_grad(input, g): g routed to the first maximum of each window (row-major
//           window order; ties broken as TF's CPU kernel).
// Ref:      tf.nn.max_pool2d
Tensor max_pool2d(const Tensor& input, Size2D ksize, Size2D strides, const std::string& padding = "VALID");

// The gradient of max_pool2d (TF's MaxPoolGrad, minus the orig_output input, which the argmax
// does not need: it is recomputed from input).
// Shapes:   input [N, H, W, C], grad [N, Ho, Wo, C] -> [N, H, W, C].
// Gradient: input: none (piecewise constant); grad: MaxPoolGradGrad(input, g) = g at each
//           window's argmax, whose own gradient is max_pool2d_grad again.
Tensor max_pool2d_grad(const Tensor& input, const Tensor& grad, Size2D ksize, Size2D strides,
                       const std::string& padding = "VALID");

// The gradient of max pooling from its argmax (TF's MaxPoolGradWithArgmax, indices per image):
// dx[n, argmax] += grad, the same values in the same order as max_pool2d_grad.
// Shapes:   grad and argmax (int32) [N, Ho, Wo, C] -> input_shape [N, H, W, C].
// Gradient: grad: MaxPoolGradGradWithArgmax(g, argmax) = g[n, argmax] (whose gradient is this op
//           again); argmax none.
// Errors:   std::invalid_argument naming the op: argmax not int32 or not the pooled shape; an index
//           that is not in its own window with its own channel (argmax must come from max pooling
//           with the same attributes).
// Ref:      tf.raw_ops.MaxPoolGradWithArgmax
Tensor max_pool2d_grad_with_argmax(const Shape& input_shape, const Tensor& grad, const Tensor& argmax, Size2D ksize,
                                   Size2D strides, const std::string& padding = "VALID");

// Mean over each window; with SAME padding it divides by the number of unpadded elements (as TF).
// Shapes:   input [N, H, W, C] -> [N, Ho, Wo, C].
// Gradient: avg_pool2d_grad(input.shape, g).
// Ref:      tf.nn.avg_pool2d
Tensor avg_pool2d(const Tensor& input, Size2D ksize, Size2D strides, const std::string& padding = "VALID");

// The gradient of avg_pool2d (TF's AvgPoolGrad): each window's g spread evenly over its unpadded
// elements. Shapes: grad [N, Ho, Wo, C] -> input_shape [N, H, W, C]. Gradient: avg_pool2d(g).
Tensor avg_pool2d_grad(const Shape& input_shape, const Tensor& grad, Size2D ksize, Size2D strides,
                       const std::string& padding = "VALID");

}  // namespace tapeflow
