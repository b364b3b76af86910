// GAN training step and classifier score; see gan.h.
#include "models/gan.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "tape/autodiff/gradient_tape.h"
#include "tape/kernels/parallel.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/index_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/nn_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::models {
namespace {

// Mean binary cross-entropy from logits against a constant target (0 or 1).
Tensor bce_from_logits(const Tensor& logits, double target) {
  return reduce_mean(sigmoid_cross_entropy_with_logits(fill(logits.shape(), target, logits.dtype()), logits));
}

double mean_sigmoid(const Tensor& logits) { return reduce_mean(sigmoid(logits)).item(); }

}  // namespace

GanStepResult gan_train_step(layers::Layer& generator, layers::Layer& discriminator,
                             optimizers::Optimizer& g_optimizer, optimizers::Optimizer& d_optimizer,
                             const Tensor& real, const Tensor& noise, const GanStepOptions& options) {
  if (!(options.r1_gamma >= 0))
    throw std::invalid_argument("gan_train_step: r1_gamma must be >= 0, got " + std::to_string(options.r1_gamma));
  if (real.shape().rank() < 1 || noise.shape().rank() < 1 || real.shape()[0] != noise.shape()[0])
    throw std::invalid_argument("gan_train_step: real " + real.shape().to_string() + " and noise " +
                                noise.shape().to_string() + " must have the same batch size");
  Tensor d_loss, g_loss, r1, d_real, d_fake;
  std::vector<std::optional<Tensor>> g_grads, d_grads;
  std::vector<Variable> g_vars, d_vars;
  {
    // Each tape watches only its own network's variables, so the generator tape skips D(real) and
    // the discriminator tape skips G's forward pass (fake is a constant to it): half the recording.
    g_vars = generator.trainable_variables();
    d_vars = discriminator.trainable_variables();
    GradientTape gen_tape({.watch_accessed_variables = false});
    GradientTape disc_tape({.watch_accessed_variables = false});
    gen_tape.watch(g_vars);
    disc_tape.watch(d_vars);
    const Tensor fake = generator(noise, /*training=*/true);
    if (options.r1_gamma > 0) {
      // R1: the input gradient of D at the real batch, kept on both outer tapes (double backward).
      GradientTape inner({.watch_accessed_variables = false});
      inner.watch(real);
      d_real = discriminator(real, true);
      GradientOptions zeros_if_unconnected;
      zeros_if_unconnected.unconnected_gradients = UnconnectedGradients::kZero;
      const Tensor gx = *inner.gradient(reduce_sum(d_real), real, zeros_if_unconnected);
      std::vector<int> example_axes;  // every axis but the batch ([b, 784] or NHWC images)
      for (int a = 1; a < gx.rank(); ++a) example_axes.push_back(a);
      r1 = (0.5 * options.r1_gamma) * reduce_mean(reduce_sum(square(gx), example_axes));
    } else {
      d_real = discriminator(real, true);
    }
    d_fake = discriminator(fake, true);
    g_loss = bce_from_logits(d_fake, 1.0);
    d_loss = bce_from_logits(d_real, 1.0) + bce_from_logits(d_fake, 0.0);
    if (r1.defined()) d_loss = d_loss + r1;
    // Stop both tapes before the backward passes: nothing above a first order is needed here.
    gen_tape.stop();
    disc_tape.stop();
    // The two backward passes share no mutable state (each tape is released by its own pass), so
    // they run side by side; the kernels inside them still split across threads.
    kernels::parallel_invoke([&] { g_grads = gen_tape.gradient(g_loss, g_vars); },
                             [&] { d_grads = disc_tape.gradient(d_loss, d_vars); });
  }
  d_optimizer.apply_gradients(d_grads, d_vars);
  g_optimizer.apply_gradients(g_grads, g_vars);
  GanStepResult r;
  r.d_loss = d_loss.item();
  r.g_loss = g_loss.item();
  r.r1_penalty = r1.defined() ? r1.item() : 0.0;
  r.d_real = mean_sigmoid(d_real);
  r.d_fake = mean_sigmoid(d_fake);
  return r;
}

namespace {

// The arguments every batch-by-batch pass over images checks (`who` names the function).
void check_image_batches(const char* who, const Tensor& images, std::int64_t batch_size) {
  if (batch_size < 1)
    throw std::invalid_argument(std::string(who) + ": batch_size must be >= 1, got " + std::to_string(batch_size));
  if (images.shape().rank() != 2 || images.shape()[0] == 0)
    throw std::invalid_argument(std::string(who) + ": images must be a non-empty [n, features] tensor, got " +
                                images.shape().to_string());
}

}  // namespace

ClassifierScore classifier_score(layers::Layer& classifier, const Tensor& images, std::int64_t batch_size) {
  check_image_batches("classifier_score", images, batch_size);
  const std::int64_t n = images.shape()[0], features = images.shape()[1];
  ClassifierScore s;
  double confidence_sum = 0, entropy_sum = 0;
  std::vector<double> marginal;
  for (std::int64_t b = 0; b < n; b += batch_size) {
    const std::int64_t m = std::min(batch_size, n - b);
    const Tensor probs = softmax(classifier(slice(images, {b, 0}, {m, features}), false));
    const auto classes = static_cast<std::size_t>(probs.shape()[1]);
    const auto p = cast(probs, DType::kFloat64).to_vector<double>();
    if (s.histogram.empty()) s.histogram.assign(classes, 0), marginal.assign(classes, 0.0);
    for (std::size_t i = 0; i < static_cast<std::size_t>(m); ++i) {
      const double* row = p.data() + i * classes;
      const std::size_t top = static_cast<std::size_t>(std::max_element(row, row + classes) - row);
      confidence_sum += row[top];
      ++s.histogram[top];
      for (std::size_t c = 0; c < classes; ++c) {
        marginal[c] += row[c];
        if (row[c] > 0) entropy_sum -= row[c] * std::log(row[c]);
      }
    }
  }
  s.mean_confidence = confidence_sum / static_cast<double>(n);
  double marginal_entropy = 0;
  for (double total : marginal) {
    const double q = total / static_cast<double>(n);
    if (q > 0) marginal_entropy -= q * std::log(q);
  }
  s.inception_score = std::exp(marginal_entropy - entropy_sum / static_cast<double>(n));
  for (std::int64_t c : s.histogram) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / static_cast<double>(n);
    s.class_entropy -= p * std::log(p);
  }
  return s;
}

Tensor classifier_features(const Sequential& classifier, const Tensor& images, std::int64_t batch_size) {
  const auto& stack = classifier.layers();
  if (stack.size() < 2)
    throw std::invalid_argument("classifier_features: '" + classifier.name() + "' has " +
                                std::to_string(stack.size()) + " layer(s); it needs at least 2 (features, then logits)");
  check_image_batches("classifier_features", images, batch_size);
  const std::int64_t n = images.shape()[0], features = images.shape()[1];
  std::vector<Tensor> parts;
  for (std::int64_t b = 0; b < n; b += batch_size) {
    Tensor h = slice(images, {b, 0}, {std::min(batch_size, n - b), features});
    for (std::size_t l = 0; l + 1 < stack.size(); ++l) h = (*stack[l])(h, false);
    parts.push_back(cast(h, DType::kFloat64));
  }
  return parts.size() == 1 ? parts[0] : concat(parts, 0);
}

namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Rows of a [n, d] tensor as a float64 matrix, checked.
Matrix feature_matrix(const Tensor& t, const char* which) {
  if (t.shape().rank() != 2 || t.shape()[0] < 2)
    throw std::invalid_argument(std::string("frechet_distance: ") + which +
                                " must be [n, d] with n >= 2 (a covariance needs two rows), got " +
                                t.shape().to_string());
  const auto v = cast(t, DType::kFloat64).to_vector<double>();
  for (double x : v)
    if (!std::isfinite(x))
      throw std::invalid_argument(std::string("frechet_distance: ") + which + " holds a non-finite value (" +
                                  std::to_string(x) + ")");
  return Eigen::Map<const Matrix>(v.data(), t.shape()[0], t.shape()[1]);
}

// The symmetric square root of a symmetric positive semi-definite matrix (negative round-off
// eigenvalues clamped to 0).
Eigen::MatrixXd sqrt_psd(const Eigen::MatrixXd& m) {
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(m);
  const Eigen::VectorXd root = eig.eigenvalues().cwiseMax(0.0).cwiseSqrt();
  return eig.eigenvectors() * root.asDiagonal() * eig.eigenvectors().transpose();
}

}  // namespace

double frechet_distance(const Tensor& a, const Tensor& b) {
  const Matrix xa = feature_matrix(a, "a"), xb = feature_matrix(b, "b");
  if (xa.cols() != xb.cols())
    throw std::invalid_argument("frechet_distance: a " + a.shape().to_string() + " and b " + b.shape().to_string() +
                                " have different feature sizes");
  auto moments = [](const Matrix& x, Eigen::VectorXd& mean, Eigen::MatrixXd& cov) {
    mean = x.colwise().mean().transpose();
    const Matrix centered = x.rowwise() - mean.transpose();
    cov = (centered.transpose() * centered) / static_cast<double>(x.rows() - 1);
  };
  Eigen::VectorXd ma, mb;
  Eigen::MatrixXd ca, cb;
  moments(xa, ma, ca);
  moments(xb, mb, cb);
  const Eigen::MatrixXd ra = sqrt_psd(ca);
  const Eigen::MatrixXd inner = ra * cb * ra;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(0.5 * (inner + inner.transpose()), Eigen::EigenvaluesOnly);
  const double trace_sqrt = eig.eigenvalues().cwiseMax(0.0).cwiseSqrt().sum();
  // A distance: round-off can take the same set's value a little below 0.
  return std::max(0.0, (ma - mb).squaredNorm() + ca.trace() + cb.trace() - 2.0 * trace_sqrt);
}

}  // namespace tapeflow::models
