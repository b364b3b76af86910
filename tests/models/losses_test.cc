// Losses against the numbers of Keras's docstrings (recomputed in float64 from Keras's formulas).
#include "models/losses.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::models {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor f64(const std::vector<double>& v, const Shape& s) { return constant(v, s); }
Tensor i64(const std::vector<std::int64_t>& v) { return constant(v, Shape{static_cast<std::int64_t>(v.size())}); }

const Tensor kProbs = f64({0.05, 0.95, 0, 0.1, 0.8, 0.1}, Shape{2, 3});

TEST(LossesTest, SparseCategoricalCrossentropyFromProbabilities) {
  // keras.losses.SparseCategoricalCrossentropy()([1, 2], [[.05, .95, 0], [.1, .8, .1]]) == 1.177
  SparseCategoricalCrossentropy scce;
  EXPECT_EQ(scce.name(), "sparse_categorical_crossentropy");
  EXPECT_NEAR(scce(i64({1, 2}), kProbs).item(), 1.1769392436907955, 1e-12);
  EXPECT_NEAR(scce(i64({1, 2}), kProbs, f64({0.3, 0.7}, Shape{2})).item(), 0.8135987917060478, 1e-12);
  SparseCategoricalCrossentropy sum({.reduction = Reduction::kSum});
  EXPECT_NEAR(sum(i64({1, 2}), kProbs).item(), 2.353878487381591, 1e-12);
  SparseCategoricalCrossentropy none({.reduction = Reduction::kNone});
  EXPECT_THAT(none(i64({1, 2}), kProbs).to_vector<double>(),
              ElementsAre(DoubleNear(0.05129339438754563, 1e-12), DoubleNear(2.3025850929940455, 1e-12)));
  // Labels as [batch, 1] floats are squeezed and cast, as in Keras.
  EXPECT_NEAR(scce(f64({1, 2}, Shape{2, 1}), kProbs).item(), 1.1769392436907955, 1e-12);
}

TEST(LossesTest, SparseCategoricalCrossentropyFromLogitsAndItsGradient) {
  SparseCategoricalCrossentropy scce({.from_logits = true});
  const Tensor logits = f64({1, 2, 3, 1, -1, 0}, Shape{2, 3});
  EXPECT_NEAR(scce(i64({2, 0}), logits).item(), 0.40760596444438024, 1e-12);
  GradientTape tape;
  tape.watch(logits);
  const Tensor loss = scce(i64({2, 0}), logits);
  const auto g = tape.gradient(loss, logits)->to_vector<double>();
  // d/dlogits = (softmax - onehot) / batch.
  const double e = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(g[2], (std::exp(3.0) / e - 1.0) / 2.0, 1e-12);
  EXPECT_NEAR(g[0], std::exp(1.0) / e / 2.0, 1e-12);
}

TEST(LossesTest, SparseCategoricalCrossentropyErrors) {
  SparseCategoricalCrossentropy scce({.from_logits = true});
  try {
    scce(i64({1, 2, 0}), kProbs);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("sparse_categorical_crossentropy: labels must have y_pred's shape without its last "
                                    "axis, y_true [3], y_pred [2, 3]"));
  }
  EXPECT_THROW(scce(i64({1, 2}), i64({1, 2})), std::invalid_argument);  // integer y_pred
  EXPECT_THROW(scce(Tensor(), kProbs), std::invalid_argument);
  EXPECT_THROW(scce(i64({1, 7}), kProbs), std::invalid_argument);  // label out of range (the op's check)
}

TEST(LossesTest, CategoricalCrossentropy) {
  const Tensor onehot = f64({0, 1, 0, 0, 0, 1}, Shape{2, 3});
  // Keras clips after normalising and does not renormalise: (-log 0.95 - log 0.1) / 2.
  EXPECT_NEAR(CategoricalCrossentropy()(onehot, kProbs).item(), 1.176939193690798, 1e-12);
  const Tensor logits = f64({1, 2, 3, 1, -1, 0}, Shape{2, 3});
  const Tensor targets = f64({0, 0, 1, 1, 0, 0}, Shape{2, 3});
  EXPECT_NEAR(CategoricalCrossentropy({.from_logits = true})(targets, logits).item(), 0.40760596444438024, 1e-12);
  EXPECT_EQ(CategoricalCrossentropy({.name = "cce"}).name(), "cce");
  try {
    CategoricalCrossentropy()(f64({0, 1}, Shape{1, 2}), kProbs);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("y_true [1, 2], y_pred [2, 3]"));
  }
}

TEST(LossesTest, BinaryCrossentropy) {
  // keras.losses.BinaryCrossentropy()([[0, 1], [0, 0]], [[.6, .4], [.4, .6]]) == 0.815
  const Tensor t = f64({0, 1, 0, 0}, Shape{2, 2});
  const Tensor p = f64({0.6, 0.4, 0.4, 0.6}, Shape{2, 2});
  EXPECT_NEAR(BinaryCrossentropy()(t, p).item(), 0.8149242256804743, 1e-9);
  EXPECT_THAT(BinaryCrossentropy({.reduction = Reduction::kNone})(t, p).to_vector<double>(),
              ElementsAre(DoubleNear(0.9162904818741863, 1e-9), DoubleNear(0.7135579694867622, 1e-9)));
  // keras.losses.BinaryCrossentropy(from_logits=True)([0, 1, 0, 0], [-18.6, 0.51, 2.94, -12.8]) == 0.865
  const Tensor z = f64({0, 1, 0, 0}, Shape{4});
  const Tensor x = f64({-18.6, 0.51, 2.94, -12.8}, Shape{4});
  EXPECT_NEAR(BinaryCrossentropy({.from_logits = true})(z, x).item(), 0.8654579497810972, 1e-12);
  EXPECT_THROW(BinaryCrossentropy()(f64({0, 1, 0}, Shape{3}), p), std::invalid_argument);
}

TEST(LossesTest, MeanSquaredError) {
  // keras.losses.MeanSquaredError()([[0., 1.], [0., 0.]], [[1., 1.], [1., 0.]]) == 0.5
  const Tensor t = f64({0, 1, 0, 0}, Shape{2, 2});
  const Tensor p = f64({1, 1, 1, 0}, Shape{2, 2});
  EXPECT_DOUBLE_EQ(MeanSquaredError()(t, p).item(), 0.5);
  EXPECT_DOUBLE_EQ(MeanSquaredError()(t, p, f64({0.7, 0.3}, Shape{2})).item(), 0.25);
  EXPECT_DOUBLE_EQ(MeanSquaredError({.reduction = Reduction::kSum})(t, p).item(), 1.0);
  EXPECT_THAT(MeanSquaredError({.reduction = Reduction::kNone})(t, p).to_vector<double>(), ElementsAre(0.5, 0.5));
  // float32 predictions against integer targets: the targets are cast.
  const Tensor p32 = constant(std::vector<float>{1, 3}, Shape{2});
  EXPECT_FLOAT_EQ(MeanSquaredError()(i64({0, 1}), p32).item(), 2.5f);
  EXPECT_THROW(MeanSquaredError()(t, f64({1, 2, 3}, Shape{3})), std::invalid_argument);
}

TEST(LossesTest, GetLossByName) {
  EXPECT_EQ(get_loss("mse")->name(), "mean_squared_error");
  EXPECT_EQ(get_loss("binary_crossentropy")->name(), "binary_crossentropy");
  EXPECT_NE(dynamic_cast<SparseCategoricalCrossentropy*>(get_loss("sparse_categorical_crossentropy").get()), nullptr);
  try {
    get_loss("hinge");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown loss 'hinge'"));
  }
}

}  // namespace
}  // namespace tapeflow::models
