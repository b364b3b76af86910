// Input-gradient regularization (double backward) and FGSM/PGD robustness evaluation of classifiers.
//
// Facts:    Every function takes the classifier as a Layer that maps x [batch, features] to logits
//           [batch, classes]; the loss is the batch mean of the sparse softmax cross-entropy. Attacks
//           and evaluation run the model in inference mode (training = false) and change no state.
// Ref:      Finlay & Oberman 2019 "Scaleable input gradient regularization for adversarial
//           robustness"; Goodfellow et al. 2015 (FGSM); Madry et al. 2018 (PGD); the TF guide
//           "Advanced automatic differentiation" (input gradient regularization example).
#pragma once

#include <cstdint>
#include <vector>

#include "layers/layer.h"
#include "optimizers/optimizer.h"
#include "tape/core/tensor.h"

namespace tapeflow::models {

// Scalars of one training step (already evaluated; nothing of them stays on a tape).
struct RegularizedStepResult {
  double loss = 0;                 // cross_entropy + lambda * input_gradient_norm
  double cross_entropy = 0;        // mean softmax cross-entropy of the batch
  double input_gradient_norm = 0;  // ‖∂CE/∂x‖₂ over the whole batch (training mode; for lambda == 0 too)
};

// The regularized loss CE + lambda · ‖∂CE/∂x‖₂ as a tensor recorded on the caller's tapes: an inner
// tape (watch_accessed_variables = false) watches x and gives ∂CE/∂x, whose global L2 norm is
// differentiable again, so an outer tape can take its gradient with respect to the variables.
// With lambda == 0 no inner tape is made and the result is the plain cross-entropy.
// Shapes:   x [batch, features] float; y [batch] int32/int64 -> scalar. *input_gradient_norm (if not
//           null) receives the norm tensor (a scalar; undefined when lambda == 0).
// Errors:   std::invalid_argument for lambda < 0 (message names the value); those of the model and of
//           sparse_softmax_cross_entropy_with_logits (bad labels, shapes).
// Ref:      ../shared/peers/RESULTS.md workload W5 (loss = CE + 0.1·‖gx‖₂)
Tensor input_gradient_regularized_loss(layers::Layer& model, const Tensor& x, const Tensor& y, double lambda,
                                       bool training = true, Tensor* input_gradient_norm = nullptr);

// One optimizer step on input_gradient_regularized_loss (outer tape over model.trainable_variables()).
// lambda == 0 is a plain cross-entropy step, the baseline trained with the same budget; its
// input_gradient_norm comes from the same backward pass (the tape also watches x), so the update
// is the plain one.
// Errors:   those of input_gradient_regularized_loss and Optimizer::apply_gradients.
RegularizedStepResult input_gradient_regularized_step(layers::Layer& model, optimizers::Optimizer& optimizer,
                                                      const Tensor& x, const Tensor& y, double lambda);

// Fast gradient sign method: clip(x + epsilon · sign(∂CE/∂x), 0, 1).
// Shapes:   x [batch, features] in [0, 1]; y [batch] -> [batch, features].
// Errors:   std::invalid_argument for epsilon < 0.
// Ref:      Goodfellow et al. 2015; tensorflow.org/tutorials/generative/adversarial_fgsm
Tensor fgsm_attack(layers::Layer& model, const Tensor& x, const Tensor& y, double epsilon);

// Projected gradient descent (L∞, no random start): `steps` FGSM steps of size step_size, each
// projected back to the epsilon-ball around x and to [0, 1]. step_size <= 0 uses 2.5·epsilon/steps.
// Errors:   std::invalid_argument for epsilon < 0 or steps < 1.
// Ref:      Madry et al. 2018
Tensor pgd_attack(layers::Layer& model, const Tensor& x, const Tensor& y, double epsilon, int steps,
                  double step_size = 0);

// How evaluate_robustness attacks: epsilon == 0 is clean accuracy; pgd_steps == 0 is FGSM.
struct AttackOptions {
  double epsilon = 0;        // L∞ attack radius on inputs in [0, 1]; 0: no attack (clean accuracy)
  int pgd_steps = 0;         // PGD steps (pgd_attack); 0: one FGSM step (fgsm_attack)
  double pgd_step_size = 0;  // <= 0: 2.5·epsilon/steps
};

// Accuracy (fraction of argmax(logits) == y) on x, or on its attacked copy, batch by batch.
// Shapes:   x [n, features]; y [n] int32/int64.
// Errors:   std::invalid_argument for batch_size < 1, an empty x, or x and y of different lengths.
double attacked_accuracy(layers::Layer& model, const Tensor& x, const Tensor& y, const AttackOptions& attack,
                         std::int64_t batch_size = 500);

}  // namespace tapeflow::models
