// Losses against the numbers of Keras's docstrings (recomputed in float64 from Keras's formulas).
#include "models/losses.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/array_ops.h"
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

// Keras reduces the last axis at every rank: keras.losses.MeanSquaredError(reduction="sum")(
// [0., 1.], [1., 1.]) == 0.5 (one value), not 1.0; reduction=None gives a scalar, not [2].
TEST(LossesTest, OneDimensionalInputsGiveOneValueAsKeras) {
  const Tensor t = f64({0, 1}, Shape{2});
  const Tensor p = f64({1, 1}, Shape{2});
  EXPECT_DOUBLE_EQ(MeanSquaredError({.reduction = Reduction::kSum})(t, p).item(), 0.5);
  const Tensor none = MeanSquaredError({.reduction = Reduction::kNone})(t, p);
  EXPECT_EQ(none.shape(), Shape{});
  EXPECT_DOUBLE_EQ(none.item(), 0.5);
  EXPECT_DOUBLE_EQ(MeanSquaredError()(t, p).item(), 0.5);
  // keras.losses.BinaryCrossentropy(from_logits=True, reduction="sum")([0, 1, 0, 0],
  // [-18.6, 0.51, 2.94, -12.8]) == 0.865 (the mean over the last axis), not 4 x 0.865.
  const Tensor z = f64({0, 1, 0, 0}, Shape{4});
  const Tensor x = f64({-18.6, 0.51, 2.94, -12.8}, Shape{4});
  EXPECT_NEAR(BinaryCrossentropy({.from_logits = true, .reduction = Reduction::kSum})(z, x).item(),
              0.8654579497810972, 1e-12);
  EXPECT_EQ(BinaryCrossentropy({.from_logits = true, .reduction = Reduction::kNone})(z, x).shape(), Shape{});
  // Probabilities: keras.losses.binary_crossentropy([0., 1.], [.4, .6]) == 0.5108 (one value).
  const Tensor bce = BinaryCrossentropy({.reduction = Reduction::kNone})(f64({0, 1}, Shape{2}), f64({0.4, 0.6}, Shape{2}));
  EXPECT_EQ(bce.shape(), Shape{});
  EXPECT_NEAR(bce.item(), 0.510825457099338, 1e-12);  // -log(0.6 + 1e-7), Keras clips and adds eps
  // Sparse categorical cross-entropy of one label and one [classes] row is one value:
  // keras.losses.sparse_categorical_crossentropy(1, [.05, .95, 0]) == -log(0.95 / (1 + 1e-7)) (0 clipped to 1e-7).
  const Tensor one = SparseCategoricalCrossentropy({.reduction = Reduction::kNone})(
      constant(std::vector<std::int64_t>{1}, Shape{}), f64({0.05, 0.95, 0}, Shape{3}));
  EXPECT_EQ(one.shape(), Shape{});
  EXPECT_NEAR(one.item(), -std::log(0.95 / (1.0 + 1e-7)), 1e-12);
  // Categorical cross-entropy of one [classes] row is one value too (unchanged behaviour).
  EXPECT_EQ(CategoricalCrossentropy({.reduction = Reduction::kNone})(f64({0, 1, 0}, Shape{3}),
                                                                     f64({0.1, 0.8, 0.1}, Shape{3})).shape(), Shape{});
}

// Keras's squeeze_or_expand_to_same_rank: [n] against [n, 1] (either way round) gives n losses.
TEST(LossesTest, RanksDifferingByATrailingOneAreMatched) {
  const Tensor t = f64({0, 1, 2}, Shape{3});
  const Tensor p = f64({1, 1, 1}, Shape{3, 1});
  MeanSquaredError none({.reduction = Reduction::kNone});
  EXPECT_THAT(none(t, p).to_vector<double>(), ElementsAre(1.0, 0.0, 1.0));
  EXPECT_THAT(none(reshape(p, Shape{3, 1}), reshape(t, Shape{3})).to_vector<double>(), ElementsAre(1.0, 0.0, 1.0));
  // [2, 3, 1] against [2, 3]: the trailing 1 is squeezed -> [2] losses.
  const Tensor t3 = f64({0, 0, 0, 1, 1, 1}, Shape{2, 3, 1});
  const Tensor p2 = f64({0, 0, 3, 1, 1, 1}, Shape{2, 3});
  EXPECT_THAT(none(t3, p2).to_vector<double>(), ElementsAre(3.0, 0.0));
  EXPECT_EQ(BinaryCrossentropy({.reduction = Reduction::kNone})(f64({0, 1, 1}, Shape{3, 1}),
                                                                f64({0.5, 0.5, 0.5}, Shape{3})).shape(),
            Shape{3});
}

TEST(LossesTest, HigherRanksReduceOnlyTheLastAxis) {
  const Tensor t = f64({0, 0, 0, 0, 0, 0, 0, 0}, Shape{2, 2, 2});
  const Tensor p = f64({1, 1, 2, 0, 0, 0, 3, 3}, Shape{2, 2, 2});
  const Tensor none = MeanSquaredError({.reduction = Reduction::kNone})(t, p);
  EXPECT_EQ(none.shape(), (Shape{2, 2}));
  EXPECT_THAT(none.to_vector<double>(), ElementsAre(1.0, 2.0, 0.0, 9.0));
  // Targets broadcast against predictions as in Keras (y_true - y_pred): [2, 1] vs [2, 2].
  EXPECT_THAT(MeanSquaredError({.reduction = Reduction::kNone})(f64({1, 2}, Shape{2, 1}), f64({1, 3, 2, 2}, Shape{2, 2}))
                  .to_vector<double>(),
              ElementsAre(2.0, 0.0));
}

TEST(LossesTest, LastAxisLossErrorsNameTheLossAndShapes) {
  try {
    MeanSquaredError()(f64({1}, Shape{}), f64({2}, Shape{}));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("mean_squared_error: y_true and y_pred must have rank >= 1"));
  }
  try {
    MeanSquaredError()(f64({1, 2}, Shape{2}), f64({1, 2, 3}, Shape{3}));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("mean_squared_error: y_true and y_pred do not broadcast, y_true [2], y_pred [3]"));
  }
  try {
    BinaryCrossentropy()(f64({1}, Shape{1}), f64({0.5, 0.5}, Shape{2}));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("binary_crossentropy: y_true and y_pred must have the same shape"));
  }
  EXPECT_THROW(MeanSquaredError()(Tensor(), f64({1}, Shape{1})), std::invalid_argument);
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
