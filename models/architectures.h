// Ready-made architectures: the Fashion-MNIST classifier MLP and the GAN generator/discriminator.
//
// Facts:    Every Dense uses Keras defaults (glorot_uniform kernel, zero bias); BatchNormalization
//           uses Keras defaults (momentum 0.99, epsilon 1e-3). With `seed` set, layer i (counting
//           every layer from 0) gets seed + i, so the same seed builds bit-identical weights; without
//           it, layers draw the process-wide default seeds. Models are built for `inputs` features,
//           so summary() shows shapes at once.
// Ref:      ../shared/peers/RESULTS.md workloads W1 (classifier) and W4 (GAN), the TF DCGAN tutorial
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "models/sequential.h"

namespace tapeflow::models {

struct ClassifierMlpOptions {
  std::int64_t inputs = 784;
  std::vector<std::int64_t> hidden = {256, 256};
  std::int64_t classes = 10;
  bool batch_norm = true;
  double dropout = 0.0;  // a Dropout after each hidden ReLU when > 0
  std::optional<std::uint64_t> seed = std::nullopt;
  std::string name = "classifier_mlp";
};

// inputs -> [Dense h -> BatchNormalization -> ReLU (-> Dropout)] per hidden size -> Dense classes (logits).
// Default: 784 -> Dense 256 -> BN -> ReLU -> Dense 256 -> BN -> ReLU -> Dense 10 (271,370 params,
// 1,024 of them non-trainable).
// Errors:  std::invalid_argument for non-positive sizes or a dropout outside [0, 1).
std::shared_ptr<Sequential> make_classifier_mlp(const ClassifierMlpOptions& options = {});

struct GanOptions {
  std::int64_t noise_dim = 100;
  std::int64_t image_dim = 784;
  std::optional<std::uint64_t> seed = std::nullopt;
};

// noise [batch, 100] -> Dense 256 -> LeakyReLU(0.2) -> Dense 512 -> BN -> LeakyReLU(0.2) -> Dense 784 -> tanh.
std::shared_ptr<Sequential> make_gan_generator(const GanOptions& options = {});
// images [batch, 784] -> Dense 512 -> LeakyReLU(0.2) -> Dense 256 -> LeakyReLU(0.2) -> Dense 1 (logit).
std::shared_ptr<Sequential> make_gan_discriminator(const GanOptions& options = {});

}  // namespace tapeflow::models
