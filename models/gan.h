// GAN training step (two tapes, as in TF's DCGAN tutorial) with an optional R1 penalty, and a
// classifier-based sample-quality score.
//
// Facts:    The generator maps noise [batch, noise_dim] to images [batch, features] (tanh, [-1, 1]);
//           the discriminator maps images to one logit [batch, 1]. Losses are binary cross-entropy
//           from logits: L_D = BCE(D(real), 1) + BCE(D(G(z)), 0) (+ R1), L_G = BCE(D(G(z)), 1).
// Ref:      tensorflow.org/tutorials/generative/dcgan (train_step); Mescheder et al. 2018 (R1);
//           ../shared/peers/RESULTS.md workload W4
#pragma once

#include <cstdint>
#include <vector>

#include "layers/layer.h"
#include "models/sequential.h"
#include "optimizers/optimizer.h"
#include "tape/core/tensor.h"

namespace tapeflow::models {

// Options of gan_train_step.
struct GanStepOptions {
  // R1 penalty weight γ: L_D += γ/2 · mean over the batch of ‖∂D(real)/∂real‖² (double backward).
  double r1_gamma = 0;
};

// Scalars of one step (evaluated; nothing of them stays on a tape).
struct GanStepResult {
  double d_loss = 0;      // including the R1 term
  double g_loss = 0;      // BCE(D(G(z)), 1), the generator's loss
  double r1_penalty = 0;  // γ/2 · E‖∇D‖² (0 when r1_gamma == 0)
  double d_real = 0;      // mean sigmoid(D(real))
  double d_fake = 0;      // mean sigmoid(D(G(z)))
};

// One step: fake = G(noise, training); both losses from the same forward pass, recorded on two
// tapes (one per network); then d_optimizer and g_optimizer apply their gradients.
// Shapes:   real [batch, features]; noise [batch, noise_dim].
// Errors:   std::invalid_argument for r1_gamma < 0 or real and noise of different batch sizes;
//           those of the networks and optimizers.
GanStepResult gan_train_step(layers::Layer& generator, layers::Layer& discriminator,
                             optimizers::Optimizer& g_optimizer, optimizers::Optimizer& d_optimizer,
                             const Tensor& real, const Tensor& noise, const GanStepOptions& options = {});

// Classifier-based score of a set of images.
struct ClassifierScore {
  double mean_confidence = 0;           // mean over images of max softmax probability
  double class_entropy = 0;             // entropy (nats) of the predicted-class histogram; ln 10 = 2.303 is uniform
  std::vector<std::int64_t> histogram;  // predicted-class counts
  // exp(H(mean_x p(y|x)) - mean_x H(p(y|x))) = exp(E_x KL(p(y|x) || p(y))), the Inception Score
  // formula with this classifier: 1 for images all given one confident class, up to 10 for
  // confident, evenly spread predictions (Salimans et al. 2016).
  double inception_score = 0;
};

// Scores images with a classifier (logits out), in inference mode, batch by batch.
// Shapes:   images [n, features] in the classifier's input range.
// Errors:   std::invalid_argument for an empty images tensor or batch_size < 1.
ClassifierScore classifier_score(layers::Layer& classifier, const Tensor& images, std::int64_t batch_size = 1000);

// A classifier's penultimate activations: every layer of the stack but the last (the logits), in
// inference mode, batch by batch — the feature space of frechet_distance (FID's Inception pool3
// features, with this classifier instead of Inception v3).
// Shapes:   images [n, features] -> [n, d], float64.
// Errors:   std::invalid_argument for fewer than two layers, an empty images tensor or batch_size < 1.
Tensor classifier_features(const Sequential& classifier, const Tensor& images, std::int64_t batch_size = 1000);

// Fréchet distance between Gaussians fitted to two feature sets (sample mean and covariance, n - 1
// in the denominator as numpy.cov): ‖μa − μb‖² + Tr(Σa + Σb − 2 (Σa Σb)^½), with Tr (Σa Σb)^½ taken
// as Σ √λ of the symmetric Σa^½ Σb Σa^½ (round-off's negative eigenvalues, and a result below 0,
// clamped to 0). 0 for the same distribution; lower is closer. Computed in float64.
// Shapes:   a [n, d], b [m, d] (n, m >= 2; any floating dtype).
// Errors:   std::invalid_argument for non-matrices, different d, fewer than 2 rows or non-finite values.
// Ref:      Heusel et al. 2017 (FID); github.com/mseitzer/pytorch-fid (calculate_frechet_distance).
double frechet_distance(const Tensor& a, const Tensor& b);

}  // namespace tapeflow::models
