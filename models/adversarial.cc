// Input-gradient regularization and FGSM/PGD attacks; see adversarial.h.
#include "models/adversarial.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/index_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/nn_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::models {
namespace {

GradientOptions zeros_if_unconnected() {
  GradientOptions options;
  options.unconnected_gradients = UnconnectedGradients::kZero;
  return options;
}

Tensor mean_cross_entropy(layers::Layer& model, const Tensor& x, const Tensor& y, bool training) {
  return reduce_mean(sparse_softmax_cross_entropy_with_logits(y, model(x, training)));
}

// ∂CE/∂x at x in inference mode, taken on a tape that watches only x.
Tensor input_gradient(layers::Layer& model, const Tensor& x, const Tensor& y) {
  GradientTape tape({.watch_accessed_variables = false});
  tape.watch(x);
  const Tensor loss = mean_cross_entropy(model, x, y, /*training=*/false);
  return *tape.gradient(loss, x, zeros_if_unconnected());
}

void require_epsilon(const char* fn, double epsilon) {
  if (!(epsilon >= 0)) throw std::invalid_argument(std::string(fn) + ": epsilon must be >= 0, got " + std::to_string(epsilon));
}

}  // namespace

Tensor input_gradient_regularized_loss(layers::Layer& model, const Tensor& x, const Tensor& y, double lambda,
                                       bool training, Tensor* input_gradient_norm) {
  if (!(lambda >= 0))
    throw std::invalid_argument("input_gradient_regularized_loss: lambda must be >= 0, got " + std::to_string(lambda));
  if (lambda == 0) {
    if (input_gradient_norm) *input_gradient_norm = Tensor();
    return mean_cross_entropy(model, x, y, training);
  }
  Tensor ce;
  Tensor gx;
  {
    // The inner tape sees only the ops that depend on x; the caller's tapes see everything,
    // including the backward pass below, so ‖gx‖ differentiates with respect to the variables.
    GradientTape inner({.watch_accessed_variables = false});
    inner.watch(x);
    ce = mean_cross_entropy(model, x, y, training);
    gx = *inner.gradient(ce, x, zeros_if_unconnected());
  }
  const Tensor gnorm = norm(gx);
  if (input_gradient_norm) *input_gradient_norm = gnorm;
  return ce + lambda * gnorm;
}

RegularizedStepResult input_gradient_regularized_step(layers::Layer& model, optimizers::Optimizer& optimizer,
                                                      const Tensor& x, const Tensor& y, double lambda) {
  Tensor loss;
  Tensor gnorm;
  std::vector<std::optional<Tensor>> grads;
  std::vector<Variable> vars;
  {
    GradientTape tape;
    if (lambda == 0) tape.watch(x);  // the baseline's ∂CE/∂x comes out of the same backward pass
    loss = input_gradient_regularized_loss(model, x, y, lambda, /*training=*/true, &gnorm);
    vars = model.trainable_variables();
    if (lambda == 0) {
      std::vector<Source> sources(vars.begin(), vars.end());
      sources.emplace_back(x);
      grads = tape.gradient(loss, sources);  // as below for the variables: unconnected ones stay None
      gnorm = grads.back() ? norm(*grads.back()) : zeros(Shape{}, x.dtype());
      grads.pop_back();
    } else {
      grads = tape.gradient(loss, vars);
    }
  }
  optimizer.apply_gradients(grads, vars);
  RegularizedStepResult r;
  r.loss = loss.item();
  r.input_gradient_norm = gnorm.defined() ? gnorm.item() : 0.0;
  r.cross_entropy = r.loss - lambda * r.input_gradient_norm;
  return r;
}

Tensor fgsm_attack(layers::Layer& model, const Tensor& x, const Tensor& y, double epsilon) {
  require_epsilon("fgsm_attack", epsilon);
  if (epsilon == 0) return x;
  return clip_by_value(x + epsilon * sign(input_gradient(model, x, y)), 0.0, 1.0);
}

Tensor pgd_attack(layers::Layer& model, const Tensor& x, const Tensor& y, double epsilon, int steps,
                  double step_size) {
  require_epsilon("pgd_attack", epsilon);
  if (steps < 1) throw std::invalid_argument("pgd_attack: steps must be >= 1, got " + std::to_string(steps));
  if (step_size <= 0) step_size = 2.5 * epsilon / steps;
  const Tensor lo = clip_by_value(x - epsilon, 0.0, 1.0);
  const Tensor hi = clip_by_value(x + epsilon, 0.0, 1.0);
  Tensor adv = x;
  for (int k = 0; k < steps; ++k) {
    adv = adv + step_size * sign(input_gradient(model, adv, y));
    adv = minimum(maximum(adv, lo), hi);
  }
  return adv;
}

double attacked_accuracy(layers::Layer& model, const Tensor& x, const Tensor& y, const AttackOptions& attack,
                         std::int64_t batch_size) {
  if (batch_size < 1)
    throw std::invalid_argument("attacked_accuracy: batch_size must be >= 1, got " + std::to_string(batch_size));
  if (x.shape().rank() < 1 || x.shape()[0] == 0) throw std::invalid_argument("attacked_accuracy: x is empty");
  const std::int64_t n = x.shape()[0];
  if (y.shape().rank() < 1 || y.shape()[0] != n)
    throw std::invalid_argument("attacked_accuracy: x has " + std::to_string(n) + " rows but y has shape " +
                                y.shape().to_string());
  require_epsilon("attacked_accuracy", attack.epsilon);
  const Tensor labels = cast(y, DType::kInt64);
  std::int64_t correct = 0;
  for (std::int64_t b = 0; b < n; b += batch_size) {
    const std::int64_t m = std::min(batch_size, n - b);
    std::vector<std::int64_t> begin_x(x.shape().rank(), 0), size_x = x.shape().to_vector();
    begin_x[0] = b;
    size_x[0] = m;
    const Tensor xb = slice(x, begin_x, size_x);
    const Tensor yb = slice(labels, {b}, {m});
    Tensor xa = xb;
    if (attack.epsilon > 0)
      xa = attack.pgd_steps > 0 ? pgd_attack(model, xb, yb, attack.epsilon, attack.pgd_steps, attack.pgd_step_size)
                                : fgsm_attack(model, xb, yb, attack.epsilon);
    const Tensor hits = cast(equal(argmax(model(xa, false), 1), yb), DType::kFloat64);
    correct += static_cast<std::int64_t>(reduce_sum(hits).item() + 0.5);
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

}  // namespace tapeflow::models
