// One GAN step on tiny random data (losses against Keras's BinaryCrossentropy, R1 against a
// hand-made input gradient, both networks updated), the classifier score, and the error paths.
#include "models/gan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "layers/dense.h"
#include "models/architectures.h"
#include "models/losses.h"
#include "optimizers/adam.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/core/random.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tests/testing/threads.h"

namespace tapeflow::models {
namespace {

using ::testing::HasSubstr;

struct Gan {
  std::shared_ptr<Sequential> g = make_gan_generator({.noise_dim = 4, .image_dim = 6, .seed = 1});
  std::shared_ptr<Sequential> d = make_gan_discriminator({.noise_dim = 4, .image_dim = 6, .seed = 2});
  optimizers::Adam g_opt{{.learning_rate = 2e-4, .beta_1 = 0.5}};
  optimizers::Adam d_opt{{.learning_rate = 2e-4, .beta_1 = 0.5}};
  Tensor real, noise;
  Gan() {
    Generator gen(5);
    real = random_uniform(Shape{8, 6}, gen, -1.0, 1.0);
    noise = random_normal(Shape{8, 4}, gen);
  }
};

std::vector<std::vector<float>> values(const std::vector<Variable>& vars) {
  std::vector<std::vector<float>> out;
  for (const Variable& v : vars) out.push_back(v.value().to_vector<float>());
  return out;
}

TEST(GanStepTest, LossesAreKerasBinaryCrossentropyAndBothNetworksMove) {
  Gan gan;
  const auto g_before = values(gan.g->trainable_variables()), d_before = values(gan.d->trainable_variables());
  // The same forward pass the step makes (BN in training mode uses the batch statistics).
  const Tensor d_real = (*gan.d)(gan.real, true), d_fake = (*gan.d)((*gan.g)(gan.noise, true), true);
  const BinaryCrossentropy bce({.from_logits = true});
  const double expected_g = bce(ones(Shape{8, 1}), d_fake).item();
  const double expected_d = bce(ones(Shape{8, 1}), d_real).item() + bce(zeros(Shape{8, 1}), d_fake).item();

  const GanStepResult r = gan_train_step(*gan.g, *gan.d, gan.g_opt, gan.d_opt, gan.real, gan.noise);
  EXPECT_NEAR(r.g_loss, expected_g, 1e-5);
  EXPECT_NEAR(r.d_loss, expected_d, 1e-5);
  EXPECT_EQ(r.r1_penalty, 0.0);
  EXPECT_GT(r.d_real, 0.0);
  EXPECT_LT(r.d_real, 1.0);
  EXPECT_GT(r.d_fake, 0.0);
  EXPECT_LT(r.d_fake, 1.0);
  EXPECT_EQ(gan.g_opt.iterations(), 1);
  EXPECT_EQ(gan.d_opt.iterations(), 1);
  const auto g_after = values(gan.g->trainable_variables()), d_after = values(gan.d->trainable_variables());
  for (std::size_t i = 0; i < g_after.size(); ++i) EXPECT_NE(g_after[i], g_before[i]) << "generator variable " << i;
  for (std::size_t i = 0; i < d_after.size(); ++i) EXPECT_NE(d_after[i], d_before[i]) << "discriminator variable " << i;
}

TEST(GanStepTest, R1PenaltyIsHalfGammaTimesMeanSquaredInputGradient) {
  Gan gan;
  double expected = 0;
  {
    GradientTape t({.watch_accessed_variables = false});
    t.watch(gan.real);
    const Tensor gx = *t.gradient(reduce_sum((*gan.d)(gan.real, true)), gan.real);
    expected = 0.5 * 3.0 * reduce_mean(reduce_sum(square(gx), 1)).item();
  }
  const GanStepResult r = gan_train_step(*gan.g, *gan.d, gan.g_opt, gan.d_opt, gan.real, gan.noise, {.r1_gamma = 3.0});
  EXPECT_GT(expected, 0.0);
  EXPECT_NEAR(r.r1_penalty, expected, 1e-6 * std::max(1.0, expected));
  EXPECT_TRUE(std::isfinite(r.d_loss));
  EXPECT_GT(r.d_loss, r.r1_penalty);  // the BCE terms are positive
}

TEST(GanStepTest, R1ChangesTheDiscriminatorUpdate) {
  Gan a, b;  // identical networks and data
  gan_train_step(*a.g, *a.d, a.g_opt, a.d_opt, a.real, a.noise);
  gan_train_step(*b.g, *b.d, b.g_opt, b.d_opt, b.real, b.noise, {.r1_gamma = 10.0});
  EXPECT_NE(values(a.d->trainable_variables())[0], values(b.d->trainable_variables())[0]);
}

// Three steps of the full-size GAN from fixed seeds: the losses and every variable afterwards
// (BN's moving statistics included).
std::pair<std::vector<double>, std::vector<std::vector<float>>> train_three_steps() {
  auto g = make_gan_generator({.seed = 1});
  auto d = make_gan_discriminator({.seed = 2});
  optimizers::Adam g_opt({.learning_rate = 2e-4, .beta_1 = 0.5}), d_opt({.learning_rate = 2e-4, .beta_1 = 0.5});
  Generator gen(7);
  std::vector<double> losses;
  for (int step = 0; step < 3; ++step) {
    const Tensor real = random_uniform(Shape{64, 784}, gen, -1.0, 1.0), noise = random_normal(Shape{64, 100}, gen);
    const GanStepResult r = gan_train_step(*g, *d, g_opt, d_opt, real, noise, {.r1_gamma = step == 2 ? 1.0 : 0.0});
    losses.insert(losses.end(), {r.d_loss, r.g_loss, r.r1_penalty});
  }
  auto vars = g->variables();
  for (const Variable& v : d->variables()) vars.push_back(v);
  return {losses, values(vars)};
}

// The generator's and the discriminator's backward passes run side by side when two threads are
// allowed; every kernel's result is independent of the thread count, so the weights after a few
// steps must match a one-thread run bit for bit (full-size networks, so the products split).
// "Two threads" means two on any machine: an arena of exactly two (oversubscribed on one core),
// checked to be honoured and to run both sides of the step's parallel_invoke at once.
TEST(GanStepTest, TwoThreadsGiveTheOneThreadWeightsBitForBit) {
  using Run = decltype(train_three_steps());
  auto run = [](int threads) {
    Run out;
    bool concurrent = false;
    const int used = testing::with_threads(threads, [&] {
      out = train_three_steps();
      if (threads >= 2) concurrent = testing::parallel_invoke_runs_both_at_once();
    });
    EXPECT_EQ(used, threads) << "the thread count was not honoured";
    if (threads >= 2) {
      EXPECT_TRUE(concurrent) << "the two sides of parallel_invoke did not run at once";
    }
    return out;
  };
  const auto one = run(1), two = run(2);
  EXPECT_EQ(one.first, two.first);
  ASSERT_EQ(one.second.size(), two.second.size());
  for (std::size_t i = 0; i < one.second.size(); ++i) EXPECT_EQ(one.second[i], two.second[i]) << "variable " << i;
}

TEST(GanStepTest, Errors) {
  Gan gan;
  try {
    gan_train_step(*gan.g, *gan.d, gan.g_opt, gan.d_opt, gan.real, gan.noise, {.r1_gamma = -1});
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("gan_train_step: r1_gamma must be >= 0, got -1"));
  }
  try {
    gan_train_step(*gan.g, *gan.d, gan.g_opt, gan.d_opt, gan.real, zeros(Shape{3, 4}));
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("real [8, 6] and noise [3, 4] must have the same batch size"));
  }
}

TEST(ClassifierScoreTest, ConfidenceAndHistogramEntropy) {
  layers::Dense clf({.units = 3, .use_bias = false});
  clf(zeros(Shape{1, 3}));
  clf.trainable_variables()[0].assign(constant<float>({10, 0, 0, 0, 10, 0, 0, 0, 10}, Shape{3, 3}));
  const Tensor images = constant<float>({1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1}, Shape{4, 3});
  const ClassifierScore s = classifier_score(clf, images, 3);  // two batches
  EXPECT_EQ(s.histogram, (std::vector<std::int64_t>{2, 1, 1}));
  EXPECT_NEAR(s.mean_confidence, std::exp(10.0) / (std::exp(10.0) + 2.0), 1e-6);
  EXPECT_NEAR(s.class_entropy, -(0.5 * std::log(0.5) + 0.5 * std::log(0.25)), 1e-12);
  // Rows of p: a = softmax([10, 0, 0]) (and its permutations); marginal (2a + b + c) / 4.
  const double e = std::exp(10.0), hi = e / (e + 2), lo = 1 / (e + 2);
  const double row_entropy = -(hi * std::log(hi) + 2 * lo * std::log(lo));
  const double q0 = (2 * hi + 2 * lo) / 4, q1 = (hi + 3 * lo) / 4;  // q2 == q1
  const double marginal_entropy = -(q0 * std::log(q0) + 2 * q1 * std::log(q1));
  EXPECT_NEAR(s.inception_score, std::exp(marginal_entropy - row_entropy), 1e-6);
  EXPECT_THROW(classifier_score(clf, images, 0), std::invalid_argument);
  try {
    classifier_score(clf, zeros(Shape{0, 3}));
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("classifier_score: images must be a non-empty [n, features] tensor, got [0, 3]"));
  }
}

// 1-D: a = {-1, 1} (mean 0, variance 2), b = {2, 6} (mean 4, variance 8): 16 + (√2 − √8)² = 18.
TEST(FrechetDistanceTest, OneDimensionalGaussians) {
  EXPECT_NEAR(frechet_distance(constant<double>({-1, 1}, Shape{2, 1}), constant<double>({2, 6}, Shape{2, 1})), 18.0,
              1e-12);
  EXPECT_NEAR(frechet_distance(constant<double>({2, 6}, Shape{2, 1}), constant<double>({-1, 1}, Shape{2, 1})), 18.0,
              1e-12);
}

// Identical sets: 0; a shifted copy: only ‖shift‖² (the covariances are equal).
TEST(FrechetDistanceTest, SameSetIsZeroAndAShiftCostsItsSquaredLength) {
  Generator g(3);
  const Tensor a = random_normal(Shape{200, 5}, g, 0.0, 1.0, DType::kFloat64);
  EXPECT_NEAR(frechet_distance(a, a), 0.0, 1e-9);
  // A set against itself lands on either side of 0 by round-off; the distance is clamped at 0.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Generator gs(seed);
    const Tensor x = random_normal(Shape{50, 8}, gs, 0.0, 1.0, DType::kFloat64);
    EXPECT_GE(frechet_distance(x, x), 0.0) << "seed " << seed;
  }
  const Tensor shift = constant<double>({0.5, -1, 0, 2, 0.25}, Shape{1, 5});
  EXPECT_NEAR(frechet_distance(a, a + shift), 0.25 + 1 + 4 + 0.0625, 1e-9);
}

// Non-commuting 2 × 2 covariances, against the closed form of a 2 × 2 matrix with real
// non-negative eigenvalues: Tr √M = √(Tr M + 2 √det M), with M = Σa Σb.
TEST(FrechetDistanceTest, NonCommutingCovariancesMatchTheTwoByTwoClosedForm) {
  const std::vector<double> va{0, 0, 2, 1, -1, 3, 4, -2, 1, 1, 3, 0};  // 6 rows of 2
  const std::vector<double> vb{1, 2, -2, 0, 3, 3, 0, 1, 2, -1, 5, 4};
  auto moments = [](const std::vector<double>& v, double mean[2], double cov[3]) {
    const double n = static_cast<double>(v.size() / 2);
    mean[0] = mean[1] = 0;
    for (std::size_t i = 0; i < v.size(); i += 2) mean[0] += v[i] / n, mean[1] += v[i + 1] / n;
    cov[0] = cov[1] = cov[2] = 0;  // xx, xy, yy
    for (std::size_t i = 0; i < v.size(); i += 2) {
      const double x = v[i] - mean[0], y = v[i + 1] - mean[1];
      cov[0] += x * x / (n - 1), cov[1] += x * y / (n - 1), cov[2] += y * y / (n - 1);
    }
  };
  double ma[2], mb[2], a[3], b[3];
  moments(va, ma, a);
  moments(vb, mb, b);
  const double trace_m = a[0] * b[0] + 2 * a[1] * b[1] + a[2] * b[2];
  const double det_m = (a[0] * a[2] - a[1] * a[1]) * (b[0] * b[2] - b[1] * b[1]);
  const double want = (ma[0] - mb[0]) * (ma[0] - mb[0]) + (ma[1] - mb[1]) * (ma[1] - mb[1]) + a[0] + a[2] + b[0] +
                      b[2] - 2 * std::sqrt(trace_m + 2 * std::sqrt(det_m));
  EXPECT_NEAR(frechet_distance(constant(va, Shape{6, 2}), constant(vb, Shape{6, 2})), want, 1e-10);
  // float32 inputs are widened: the same value to float rounding.
  std::vector<float> fa(va.begin(), va.end()), fb(vb.begin(), vb.end());
  EXPECT_NEAR(frechet_distance(constant(fa, Shape{6, 2}), constant(fb, Shape{6, 2})), want, 1e-5);
}

TEST(FrechetDistanceTest, Errors) {
  const Tensor ok = zeros(Shape{3, 2});
  auto message = [](const Tensor& a, const Tensor& b) {
    try {
      frechet_distance(a, b);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no throw");
  };
  EXPECT_THAT(message(ok, zeros(Shape{3, 4})), HasSubstr("a [3, 2] and b [3, 4] have different feature sizes"));
  EXPECT_THAT(message(zeros(Shape{1, 2}), ok), HasSubstr("a must be [n, d] with n >= 2"));
  EXPECT_THAT(message(ok, zeros(Shape{6})), HasSubstr("b must be [n, d] with n >= 2 (a covariance needs two rows), got [6]"));
  EXPECT_THAT(message(ok, constant<float>({0, 1, NAN, 0}, Shape{2, 2})), HasSubstr("b holds a non-finite value"));
}

// The features are the stack's output without its last layer, in inference mode, batch by batch.
TEST(ClassifierFeaturesTest, PenultimateActivationsInInferenceMode) {
  auto clf = make_classifier_mlp({.inputs = 4, .hidden = {3}, .classes = 2, .seed = 5});  // Dense BN ReLU Dense
  Generator g(2);
  const Tensor x = random_normal(Shape{7, 4}, g);
  const auto& stack = clf->layers();
  Tensor want = x;
  for (std::size_t l = 0; l + 1 < stack.size(); ++l) want = (*stack[l])(want, false);
  const Tensor got = classifier_features(*clf, x, 3);  // batches of 3, 3, 1
  EXPECT_EQ(got.shape(), (Shape{7, 3}));
  EXPECT_EQ(got.dtype(), DType::kFloat64);
  EXPECT_EQ(got.to_vector<double>(), cast(want, DType::kFloat64).to_vector<double>());
  EXPECT_THROW(classifier_features(*clf, x, 0), std::invalid_argument);
  EXPECT_THROW(classifier_features(*clf, zeros(Shape{0, 4})), std::invalid_argument);
  Sequential one({std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2})}, "one");
  try {
    classifier_features(one, x);
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("classifier_features: 'one' has 1 layer(s); it needs at least 2"));
  }
}

}  // namespace
}  // namespace tapeflow::models
