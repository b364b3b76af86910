// Input-gradient regularization (double backward) against finite differences, one regularized
// training step, FGSM/PGD budgets and attacked accuracy, and every error path.
#include "models/adversarial.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "layers/dense.h"
#include "models/architectures.h"
#include "optimizers/adam.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/core/random.h"
#include "tape/ops/index_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/nn_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::models {
namespace {

using ::testing::HasSubstr;

// 4 -> Dense 5 tanh -> Dense 3 (logits), float64, so the penalty has real second derivatives.
// (A custom Layer rather than a Sequential: Sequential has no dtype option and would cast the
// inputs to float32 at its boundary.)
class TinyF64Model : public layers::Layer {
 public:
  TinyF64Model() : Layer("TinyF64Model", "", std::nullopt, DType::kFloat64) {
    hidden_ = track_layer(std::make_shared<layers::Dense>(
        layers::DenseOptions{.units = 5, .activation = "tanh", .seed = 3, .dtype = DType::kFloat64}));
    out_ = track_layer(std::make_shared<layers::Dense>(layers::DenseOptions{.units = 3, .seed = 4, .dtype = DType::kFloat64}));
  }
  Tensor call(const Tensor& x, bool training) override { return (*out_)((*hidden_)(x, training), training); }

 private:
  std::shared_ptr<layers::Dense> hidden_, out_;
};

std::shared_ptr<TinyF64Model> tiny_f64_model() {
  auto m = std::make_shared<TinyF64Model>();
  (*m)(zeros(Shape{1, 4}, DType::kFloat64));
  return m;
}

struct Batch {
  Tensor x, y;
};

Batch tiny_batch(DType dtype, std::int64_t n = 6, std::int64_t features = 4) {
  Generator g(11);
  return {random_uniform(Shape{n, features}, g, 0.0, 1.0, dtype), constant<std::int64_t>({0, 1, 2, 1, 0, 2}, Shape{n})};
}

TEST(InputGradientRegularizationTest, VariableGradientMatchesFiniteDifferences) {
  auto model = tiny_f64_model();
  const Batch b = tiny_batch(DType::kFloat64);
  const double lambda = 0.7;
  const Variable kernel = model->trainable_variables()[0];
  std::optional<Tensor> grad;
  {
    GradientTape tape;
    grad = tape.gradient(input_gradient_regularized_loss(*model, b.x, b.y, lambda), kernel);
  }
  ASSERT_TRUE(grad.has_value());
  const std::vector<double> analytic = grad->to_vector<double>();
  const std::vector<double> w0 = kernel.value().to_vector<double>();
  const double h = 1e-6;
  for (std::size_t i : {0u, 7u, 13u, 19u}) {
    auto at = [&](double delta) {
      std::vector<double> w = w0;
      w[i] += delta;
      kernel.assign(constant(w, kernel.shape()));
      return input_gradient_regularized_loss(*model, b.x, b.y, lambda).item();
    };
    const double numeric = (at(h) - at(-h)) / (2 * h);
    EXPECT_NEAR(analytic[i], numeric, 1e-7 + 1e-5 * std::abs(numeric)) << "kernel entry " << i;
  }
  kernel.assign(constant(w0, kernel.shape()));
}

TEST(InputGradientRegularizationTest, LossIsCrossEntropyPlusLambdaTimesInputGradientNorm) {
  auto model = tiny_f64_model();
  const Batch b = tiny_batch(DType::kFloat64);
  Tensor gnorm;
  const double total = input_gradient_regularized_loss(*model, b.x, b.y, 2.0, true, &gnorm).item();
  Tensor expected_gx;
  double ce = 0;
  {
    GradientTape t({.watch_accessed_variables = false});
    t.watch(b.x);
    const Tensor loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(b.y, (*model)(b.x)));
    ce = loss.item();
    expected_gx = *t.gradient(loss, b.x);
  }
  ASSERT_TRUE(gnorm.defined());
  EXPECT_NEAR(gnorm.item(), norm(expected_gx).item(), 1e-12);
  EXPECT_GT(gnorm.item(), 0.0);
  EXPECT_NEAR(total, ce + 2.0 * gnorm.item(), 1e-12);
  Tensor none;
  EXPECT_NEAR(input_gradient_regularized_loss(*model, b.x, b.y, 0.0, true, &none).item(), ce, 1e-12);
  EXPECT_FALSE(none.defined());
}

TEST(InputGradientRegularizationTest, StepChangesEveryVariableAndReportsFiniteLosses) {
  auto model = make_classifier_mlp({.inputs = 4, .hidden = {5}, .classes = 3, .batch_norm = false, .seed = 1});
  optimizers::Adam adam({.learning_rate = 1e-2});
  const Batch b = tiny_batch(DType::kFloat32);
  std::vector<std::vector<float>> before;
  for (const Variable& v : model->trainable_variables()) before.push_back(v.value().to_vector<float>());
  const RegularizedStepResult r = input_gradient_regularized_step(*model, adam, b.x, b.y, 0.5);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_GT(r.cross_entropy, 0.0);
  EXPECT_GT(r.input_gradient_norm, 0.0);
  EXPECT_NEAR(r.loss, r.cross_entropy + 0.5 * r.input_gradient_norm, 1e-5);
  EXPECT_EQ(adam.iterations(), 1);
  const auto vars = model->trainable_variables();
  for (std::size_t i = 0; i < vars.size(); ++i) EXPECT_NE(vars[i].value().to_vector<float>(), before[i]) << vars[i].name();
  const RegularizedStepResult plain = input_gradient_regularized_step(*model, adam, b.x, b.y, 0.0);
  EXPECT_GT(plain.input_gradient_norm, 0.0);  // measured for the baseline too (not used in its loss)
  EXPECT_EQ(plain.loss, plain.cross_entropy);
}

TEST(AttackTest, FgsmStaysInBudgetAndRaisesTheLoss) {
  auto model = tiny_f64_model();
  const Batch b = tiny_batch(DType::kFloat64);
  const double eps = 0.05;
  const Tensor adv = fgsm_attack(*model, b.x, b.y, eps);
  ASSERT_EQ(adv.shape(), b.x.shape());
  const auto x = b.x.to_vector<double>(), a = adv.to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_GE(a[i], 0.0);
    EXPECT_LE(a[i], 1.0);
    const double moved = std::abs(a[i] - x[i]);
    // Either a full step of epsilon or clipped at the border of [0, 1].
    EXPECT_TRUE(std::abs(moved - eps) < 1e-12 || a[i] == 0.0 || a[i] == 1.0) << i << ": moved " << moved;
  }
  auto ce = [&](const Tensor& in) { return reduce_mean(sparse_softmax_cross_entropy_with_logits(b.y, (*model)(in))).item(); };
  EXPECT_GT(ce(adv), ce(b.x));
  EXPECT_EQ(fgsm_attack(*model, b.x, b.y, 0.0).to_vector<double>(), x);
}

TEST(AttackTest, PgdStaysInTheBallAndBeatsFgsm) {
  auto model = tiny_f64_model();
  const Batch b = tiny_batch(DType::kFloat64);
  const double eps = 0.2;
  const Tensor adv = pgd_attack(*model, b.x, b.y, eps, 10);
  const auto x = b.x.to_vector<double>(), a = adv.to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::abs(a[i] - x[i]), eps + 1e-12);
    EXPECT_GE(a[i], 0.0);
    EXPECT_LE(a[i], 1.0);
  }
  auto ce = [&](const Tensor& in) { return reduce_mean(sparse_softmax_cross_entropy_with_logits(b.y, (*model)(in))).item(); };
  EXPECT_GT(ce(adv), ce(b.x));
  EXPECT_GE(ce(adv), ce(fgsm_attack(*model, b.x, b.y, eps)) - 1e-9);
}

TEST(AttackTest, AttackedAccuracyCountsArgmaxHitsAcrossBatches) {
  auto model = tiny_f64_model();
  const Batch b = tiny_batch(DType::kFloat64);
  const auto pred = argmax((*model)(b.x), 1).to_vector<std::int64_t>();
  const auto labels = b.y.to_vector<std::int64_t>();
  int hits = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) hits += pred[i] == labels[i];
  EXPECT_DOUBLE_EQ(attacked_accuracy(*model, b.x, b.y, {}, 4), hits / 6.0);
  EXPECT_DOUBLE_EQ(attacked_accuracy(*model, b.x, cast(b.y, DType::kInt32), {}, 1), hits / 6.0);
  const double fgsm = attacked_accuracy(*model, b.x, b.y, {.epsilon = 0.5}, 4);
  const double pgd = attacked_accuracy(*model, b.x, b.y, {.epsilon = 0.5, .pgd_steps = 5}, 4);
  EXPECT_GE(fgsm, 0.0);
  EXPECT_LE(fgsm, 1.0);
  EXPECT_GE(pgd, 0.0);
  EXPECT_LE(pgd, 1.0);
}

TEST(AdversarialErrorsTest, BadArgumentsNameTheFunctionAndValue) {
  auto model = tiny_f64_model();
  const Batch b = tiny_batch(DType::kFloat64);
  optimizers::Adam adam;
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no std::invalid_argument");
  };
  EXPECT_THAT(message([&] { input_gradient_regularized_loss(*model, b.x, b.y, -1.0); }),
              HasSubstr("input_gradient_regularized_loss: lambda must be >= 0, got -1"));
  EXPECT_THAT(message([&] { input_gradient_regularized_step(*model, adam, b.x, b.y, -0.5); }), HasSubstr("lambda"));
  EXPECT_THAT(message([&] { fgsm_attack(*model, b.x, b.y, -0.1); }), HasSubstr("fgsm_attack: epsilon must be >= 0"));
  EXPECT_THAT(message([&] { pgd_attack(*model, b.x, b.y, -0.1, 3); }), HasSubstr("pgd_attack: epsilon"));
  EXPECT_THAT(message([&] { pgd_attack(*model, b.x, b.y, 0.1, 0); }), HasSubstr("pgd_attack: steps must be >= 1, got 0"));
  EXPECT_THAT(message([&] { attacked_accuracy(*model, b.x, b.y, {}, 0); }), HasSubstr("batch_size must be >= 1, got 0"));
  EXPECT_THAT(message([&] { attacked_accuracy(*model, zeros(Shape{0, 4}, DType::kFloat64), b.y, {}); }),
              HasSubstr("x is empty"));
  EXPECT_THAT(message([&] { attacked_accuracy(*model, b.x, constant<std::int64_t>({0, 1}, Shape{2}), {}); }),
              HasSubstr("x has 6 rows but y has shape [2]"));
  EXPECT_THAT(message([&] { attacked_accuracy(*model, b.x, b.y, {.epsilon = -1}); }), HasSubstr("epsilon"));
}

}  // namespace
}  // namespace tapeflow::models
