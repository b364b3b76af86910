// Float64 first- and second-order gradient checks of the nn ops (registered and composed).
#include <gtest/gtest.h>

#include "tape/tapeflow.h"
#include "tests/testing/gradcheck_table.h"

namespace tf = tapeflow;
using tf::testing::random_f64;

namespace {

using In = std::vector<tf::Tensor>;

std::function<In()> inputs(std::vector<tf::Shape> shapes, double lo = -1.0, double hi = 1.0) {
  return tf::testing::random_inputs(std::move(shapes), 31, lo, hi);
}

// Fixed labels (captured, so the gradient check does not watch an integer tensor).
tf::testing::TestFn xent(tf::DType label_dtype, std::vector<double> weights) {
  return [label_dtype, weights](const In& in) {
    tf::Tensor labels = tf::constant(std::vector<double>{0, 3, 1}, {3}, label_dtype);
    return tf::sparse_softmax_cross_entropy_with_logits(labels, in[0]) * tf::constant<double>(weights, {3});
  };
}

const tf::Shape k23{2, 3};

// A fixed packed keep mask for n elements (every third and fifth element dropped).
tf::Tensor keep_bits(std::int64_t n) {
  std::vector<std::int32_t> w(static_cast<std::size_t>((n + 31) / 32), 0);
  for (std::int64_t i = 0; i < n; ++i)
    if (i % 3 != 1 && i % 5 != 2) w[static_cast<std::size_t>(i / 32)] |= static_cast<std::int32_t>(1u << (i % 32));
  return tf::constant<std::int32_t>(w, {static_cast<std::int64_t>(w.size())});
}

tf::testing::RegisterGradChecks rows({
    {"Softmax", "axis -1 [2,3]", [](const In& in) { return tf::softmax(in[0]); }, inputs({k23}, -2.0, 2.0)},
    {"Softmax", "axis 0 [3,2]", [](const In& in) { return tf::softmax(in[0], 0); }, inputs({{3, 2}}, -2.0, 2.0)},
    {"Softmax", "axis 1 of [2,3,2]", [](const In& in) { return tf::softmax(in[0], 1); }, inputs({{2, 3, 2}})},
    {"SoftmaxGrad", "y, g [2,3]", [](const In& in) { return tf::softmax_grad(in[0], in[1]); }, inputs({k23, k23})},
    {"SoftmaxGrad", "y, g [2,2,5], axis 2",
     [](const In& in) {
       return tf::softmax_grad(in[0], in[1], 2);
     },
     inputs({{2, 2, 5}, {2, 2, 5}})},
    {"LogSoftmax", "axis -1 [2,3]", [](const In& in) { return tf::log_softmax(in[0]); }, inputs({k23}, -2.0, 2.0)},
    {"LogSoftmax", "axis 0 [3,2]", [](const In& in) { return tf::log_softmax(in[0], 0); }, inputs({{3, 2}})},
    {"SparseSoftmaxCrossEntropyWithLogits", "int32 labels", xent(tf::DType::kInt32, {1, 1, 1}),
     inputs({{3, 4}}, -2.0, 2.0)},
    {"SparseSoftmaxCrossEntropyWithLogits", "int64 labels, weighted loss", xent(tf::DType::kInt64, {0.5, 2.0, -1.0}),
     inputs({{3, 4}}, -2.0, 2.0)},
    {"sigmoid_cross_entropy_with_logits", "logits and labels",
     [](const In& in) { return tf::sigmoid_cross_entropy_with_logits(in[1], in[0]); }, inputs({k23, k23}, -3.0, 3.0)},
    {"ApplyDropoutMask", "x [2,3], scale 1.25",
     [](const In& in) { return tf::apply_dropout_mask(in[0], keep_bits(6), 1.25); }, inputs({k23})},
    {"ApplyDropoutMask", "x [3,37] (a partial last word), squared after",
     [](const In& in) { return tf::square(tf::apply_dropout_mask(in[0], keep_bits(111), 2.0)); },
     inputs({{3, 37}})},
    {"EuclideanNorm", "all elements", [](const In& in) { return tf::norm(in[0]); }, inputs({k23})},
    {"EuclideanNorm", "axis 1 keepdims", [](const In& in) { return tf::norm(in[0], {1}, true); }, inputs({k23})},
    {"EuclideanNorm", "axes {0, 2} of [2,2,3]",
     [](const In& in) {
       return tf::norm(in[0], {0, -1});
     },
     inputs({{2, 2, 3}})},
    {"clip_by_norm", "norm above clip (clipped)", [](const In& in) { return tf::clip_by_norm(in[0], 0.5); },
     inputs({k23})},
    {"clip_by_norm", "norm below clip (identity)", [](const In& in) { return tf::clip_by_norm(in[0], 10.0); },
     inputs({k23})},
    {"clip_by_norm", "per-row axes {1}, both sides",
     [](const In& in) {
       return tf::clip_by_norm(in[0] * tf::constant<double>({0.1, 3.0}, {2, 1}), 1.0, {1});
     },
     inputs({k23})},
});

TEST(NnOpsGradCheck, FirstAndSecondOrder) {
  tf::testing::run_gradcheck_cases({"Softmax", "SoftmaxGrad", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits",
                                    "sigmoid_cross_entropy_with_logits", "EuclideanNorm", "clip_by_norm"});
}

// The one-pass kernel against the composed formula (rows longer than the 8 partial sums, a tail),
// and its errors.
TEST(SoftmaxGrad, MatchesTheComposedFormulaAndNamesBadInput) {
  const tf::Tensor y = tf::softmax(random_f64({3, 4, 13}, 5, -2.0, 2.0));
  const tf::Tensor g = random_f64({3, 4, 13}, 6);
  const tf::Tensor want = y * (g - tf::reduce_sum(g * y, -1, true));
  const tf::Tensor got = tf::softmax_grad(y, g);
  EXPECT_LT(tf::reduce_max(tf::abs(got - want)).item<double>(), 1e-15);
  const tf::Tensor got32 = tf::softmax_grad(tf::cast(y, tf::DType::kFloat32), tf::cast(g, tf::DType::kFloat32));
  EXPECT_LT(tf::reduce_max(tf::abs(tf::cast(got32, tf::DType::kFloat64) - want)).item<double>(), 1e-6);
  auto message = [](auto f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { tf::softmax_grad(y, random_f64({3, 4, 12}, 7)); }),
            "softmax_grad: y and g must have the same shape and dtype, got y [3, 4, 13] float64 and g [3, 4, 12] float64");
  EXPECT_EQ(message([&] { tf::softmax_grad(y, g, 1); }),
            "softmax_grad: only the last axis is supported, got axis 1 of [3, 4, 13]");
}

}  // namespace
