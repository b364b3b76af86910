// Ready-made architectures: the Fashion-MNIST classifier MLP and convnet, the GAN generator/
// discriminator and TF's DCGAN tutorial networks.
//
// Facts:    Every Dense uses Keras defaults (glorot_uniform kernel, zero bias); BatchNormalization
//           uses Keras defaults (momentum 0.99, epsilon 1e-3). With `seed` set, layer i (counting
//           every layer from 0) gets seed + i, so the same seed builds bit-identical weights; without
//           it, layers draw the process-wide default seeds. Models are built for `inputs` features,
//           so summary() shows shapes at once.
// Ref:      ../shared/peers/RESULTS.md workloads W1 (classifier), W4 (GAN), W8 (convnet), W9 (DCGAN),
//           W11 (LSTM);
//           keras.io/examples/vision/mnist_convnet, tensorflow.org/tutorials/generative/dcgan
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "models/functional.h"
#include "models/sequential.h"

namespace tapeflow::models {

// Options of make_classifier_mlp (defaults: the W1 Fashion-MNIST classifier).
struct ClassifierMlpOptions {
  std::int64_t inputs = 784;                      // input features (28 x 28 pixels, flattened)
  std::vector<std::int64_t> hidden = {256, 256};  // units of each hidden Dense, in order
  std::int64_t classes = 10;                      // units of the output Dense (logits)
  bool batch_norm = true;                         // a BatchNormalization after each hidden Dense
  double dropout = 0.0;  // a Dropout after each hidden ReLU when > 0
  // Base seed of the layers' initializers and dropout (layer i gets seed + i); unset: the defaults.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The model's name.
  std::string name = "classifier_mlp";
};

// inputs -> [Dense h -> BatchNormalization -> ReLU (-> Dropout)] per hidden size -> Dense classes (logits).
// Default: 784 -> Dense 256 -> BN -> ReLU -> Dense 256 -> BN -> ReLU -> Dense 10 (271,370 params,
// 1,024 of them non-trainable).
// Errors:  std::invalid_argument for non-positive sizes or a dropout outside [0, 1).
std::shared_ptr<Sequential> make_classifier_mlp(const ClassifierMlpOptions& options = {});

// Options of make_gan_generator and make_gan_discriminator (defaults: the W4 MNIST GAN).
struct GanOptions {
  std::int64_t noise_dim = 100;  // generator input features (the noise vector)
  std::int64_t image_dim = 784;  // generator output / discriminator input features (flat images)
  // Base seed of the layers' initializers (layer i gets seed + i); unset: the defaults.
  std::optional<std::uint64_t> seed = std::nullopt;
};

// noise [batch, 100] -> Dense 256 -> LeakyReLU(0.2) -> Dense 512 -> BN -> LeakyReLU(0.2) -> Dense 784 -> tanh.
std::shared_ptr<Sequential> make_gan_generator(const GanOptions& options = {});
// images [batch, 784] -> Dense 512 -> LeakyReLU(0.2) -> Dense 256 -> LeakyReLU(0.2) -> Dense 1 (logit).
std::shared_ptr<Sequential> make_gan_discriminator(const GanOptions& options = {});

// Options of make_classifier_cnn (defaults: Keras's MNIST convnet on 28 x 28 x 1 images).
struct ClassifierCnnOptions {
  // Image rows: the flat input [batch, height·width·channels] is reshaped to (height, width, channels).
  std::int64_t height = 28, width = 28, /**< image columns */ channels = 1;  // image channels
  std::int64_t classes = 10;  // units of the output Dense (logits)
  double dropout = 0.5;       // rate of the Dropout before the output Dense; in [0, 1)
  // Base seed of the layers' initializers and dropout (layer i gets seed + i); unset: the defaults.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The model's name.
  std::string name = "classifier_cnn";
};

// The Keras "simple MNIST convnet" (W8): flat inputs [batch, h·w·c] -> Reshape (h, w, c) ->
// Conv2D 32 3x3 relu -> MaxPooling2D 2 -> Conv2D 64 3x3 relu -> MaxPooling2D 2 -> Flatten ->
// Dropout 0.5 -> Dense classes (logits). Default: 28x28x1 -> 26x26x32 -> 13x13x32 -> 11x11x64 ->
// 5x5x64 -> 1600 -> 10; 34,826 parameters, as Keras.
// Errors:  std::invalid_argument for non-positive sizes, a dropout outside [0, 1), or an image too
//          small for the two conv + pool stages (names the layer).
std::shared_ptr<Sequential> make_classifier_cnn(const ClassifierCnnOptions& options = {});

// Options of make_classifier_lstm (defaults: Keras's RNN on 28 x 28 MNIST images, row by row).
struct ClassifierLstmOptions {
  // Time steps: the flat input [batch, steps·features] is reshaped to (steps, features).
  std::int64_t steps = 28, features = 28;  // features per step (each image's rows as a sequence of pixel rows)
  std::int64_t units = 128;   // units of the LSTM (its last output feeds the output Dense)
  std::int64_t classes = 10;  // units of the output Dense (logits)
  // Base seed of the layers' initializers (layer i gets seed + i); unset: the defaults.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The model's name.
  std::string name = "classifier_lstm";
};

// The Keras RNN-on-MNIST recipe (W11): flat inputs [batch, steps·features] -> Reshape (steps, features)
// -> LSTM units (tanh / sigmoid, last output) -> Dense classes (logits). Default: 28 steps of 28
// pixels -> LSTM 128 -> 10; 81,674 parameters, as Keras.
// Errors:  std::invalid_argument for non-positive sizes.
std::shared_ptr<Sequential> make_classifier_lstm(const ClassifierLstmOptions& options = {});

// Options of make_dcgan_generator and make_dcgan_discriminator (TF's DCGAN tutorial).
struct DcganOptions {
  std::int64_t noise_dim = 100;  // generator input features (the noise vector; the discriminator ignores it)
  // Base seed of the layers' initializers and dropout (layer i gets seed + i); unset: the defaults.
  std::optional<std::uint64_t> seed = std::nullopt;
};

// TF's DCGAN tutorial generator (W9): noise [batch, 100] -> Dense 7·7·256 (no bias) -> BN ->
// LeakyReLU(0.3) -> Reshape (7, 7, 256) -> Conv2DTranspose 128 5x5 s1 same (no bias) -> BN -> LReLU ->
// Conv2DTranspose 64 5x5 s2 same (no bias) -> BN -> LReLU -> Conv2DTranspose 1 5x5 s2 same (no bias)
// -> tanh: images [batch, 28, 28, 1]; 2,330,944 parameters (2,305,472 trainable).
std::shared_ptr<Sequential> make_dcgan_generator(const DcganOptions& options = {});
// TF's DCGAN tutorial discriminator (W9): images [batch, 28, 28, 1] -> Conv2D 64 5x5 s2 same ->
// LeakyReLU(0.3) -> Dropout 0.3 -> Conv2D 128 5x5 s2 same -> LReLU -> Dropout 0.3 -> Flatten ->
// Dense 1 (logit); 212,865 parameters.
std::shared_ptr<Sequential> make_dcgan_discriminator(const DcganOptions& options = {});

// Options of make_classifier_vit (defaults: the W12 ViT for 28 x 28 x 1 images).
struct ClassifierVitOptions {
  // Image rows of the flat one-channel input [batch, height·width].
  std::int64_t height = 28, width = 28;  // image columns (one channel)
  std::int64_t patch_size = 4;           // square patches of patch_size² pixels; divides height and width
  std::int64_t projection_dim = 64;      // token width (Dense projection, attention and block output)
  std::int64_t num_heads = 4;            // attention heads (key_dim projection_dim / num_heads)
  std::int64_t transformer_layers = 4;   // transformer blocks
  std::int64_t mlp_units = 128;          // units of each block's gelu Dense
  double dropout = 0.1;                  // rate of the attention and MLP dropouts; in [0, 1)
  double epsilon = 1e-6;                 // every LayerNormalization's epsilon
  std::int64_t classes = 10;             // units of the output Dense (logits)
  // Base seed of the layers' initializers and dropout (layer i gets seed + i); unset: the defaults.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The model's name.
  std::string name = "classifier_vit";
};

// The Keras example "Image classification with Vision Transformer" sized for 28x28x1 (W12), as a
// Functional model on flat inputs [batch, h·w]: Reshape (h/p, p, w/p, p) -> Permute (1, 3, 2, 4) ->
// Reshape (tokens, p²) -> Dense projection_dim -> + PositionEmbedding (random_uniform) -> per
// block { LayerNormalization(ε) -> MultiHeadAttention(num_heads, key_dim projection_dim / num_heads,
// dropout)(x, x) -> Add residual -> LayerNormalization(ε) -> Dense mlp_units gelu -> Dropout ->
// Dense projection_dim -> Dropout -> Add residual } -> LayerNormalization(ε) ->
// GlobalAveragePooling1D -> Dense classes (logits). Default: 49 tokens of 16 pixels, 4 blocks,
// 138,890 parameters, as Keras.
// Errors:  std::invalid_argument for non-positive sizes, a patch size that does not divide the
//          image, projection_dim not divisible by num_heads, a dropout outside [0, 1).
std::shared_ptr<Functional> make_classifier_vit(const ClassifierVitOptions& options = {});

}  // namespace tapeflow::models
