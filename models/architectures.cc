#include "models/architectures.h"

#include <stdexcept>

#include "layers/layers.h"

namespace tapeflow::models {
namespace {

// Hands out seed + i for the i-th layer (or nothing without a seed).
class Seeds {
 public:
  explicit Seeds(std::optional<std::uint64_t> base) : base_(base) {}
  std::optional<std::uint64_t> next() {
    if (!base_) return std::nullopt;
    return *base_ + i_++;
  }

 private:
  std::optional<std::uint64_t> base_;
  std::uint64_t i_ = 0;
};

void check_positive(const char* fn, const char* what, std::int64_t v) {
  if (v <= 0) throw std::invalid_argument(std::string(fn) + ": " + what + " must be > 0, got " + std::to_string(v));
}

std::shared_ptr<layers::Dense> dense(std::int64_t units, const std::string& activation, Seeds& seeds) {
  return std::make_shared<layers::Dense>(layers::DenseOptions{.units = units, .activation = activation, .seed = seeds.next()});
}

std::shared_ptr<layers::LeakyReLU> leaky(Seeds& seeds) {
  seeds.next();  // keep "layer i gets seed + i" for every layer
  return std::make_shared<layers::LeakyReLU>(layers::LeakyReLUOptions{.alpha = 0.2});
}

std::shared_ptr<layers::BatchNormalization> batch_norm(Seeds& seeds) {
  return std::make_shared<layers::BatchNormalization>(layers::BatchNormalizationOptions{.seed = seeds.next()});
}

std::shared_ptr<layers::Conv2D> conv(std::int64_t filters, std::int64_t k, std::int64_t s, const std::string& padding,
                                     const std::string& activation, Seeds& seeds) {
  return std::make_shared<layers::Conv2D>(layers::Conv2DOptions{.filters = filters, .kernel_size = {k, k},
                                                                .strides = {s, s}, .padding = padding,
                                                                .activation = activation, .seed = seeds.next()});
}

std::shared_ptr<layers::Conv2DTranspose> conv_transpose(std::int64_t filters, std::int64_t s,
                                                        const std::string& activation, Seeds& seeds) {
  return std::make_shared<layers::Conv2DTranspose>(
      layers::Conv2DTransposeOptions{.filters = filters, .kernel_size = {5, 5}, .strides = {s, s}, .padding = "same",
                                     .activation = activation, .use_bias = false, .seed = seeds.next()});
}

// A layer without weights of its own still takes a seed slot ("layer i gets seed + i").
template <class L, class... A>
std::shared_ptr<L> plain(Seeds& seeds, A&&... args) {
  seeds.next();
  return std::make_shared<L>(std::forward<A>(args)...);
}

std::shared_ptr<layers::Dropout> dropout(double rate, Seeds& seeds) {
  return std::make_shared<layers::Dropout>(layers::DropoutOptions{.rate = rate, .seed = seeds.next()});
}

}  // namespace

std::shared_ptr<Sequential> make_classifier_cnn(const ClassifierCnnOptions& o) {
  const char* fn = "make_classifier_cnn";
  for (auto [what, v] : {std::pair<const char*, std::int64_t>{"height", o.height}, {"width", o.width},
                         {"channels", o.channels}, {"classes", o.classes}})
    check_positive(fn, what, v);
  if (!(o.dropout >= 0.0 && o.dropout < 1.0))
    throw std::invalid_argument(std::string(fn) + ": dropout must be in [0, 1), got " + std::to_string(o.dropout));
  Seeds seeds(o.seed);
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, o.name);
  model->add(plain<layers::Reshape>(seeds, layers::ReshapeOptions{.target_shape = {o.height, o.width, o.channels}}));
  model->add(conv(32, 3, 1, "valid", "relu", seeds));
  model->add(plain<layers::MaxPooling2D>(seeds));
  model->add(conv(64, 3, 1, "valid", "relu", seeds));
  model->add(plain<layers::MaxPooling2D>(seeds));
  model->add(plain<layers::Flatten>(seeds));
  model->add(dropout(o.dropout, seeds));
  model->add(dense(o.classes, "", seeds));
  model->build(Shape{1, o.height * o.width * o.channels});
  return model;
}

std::shared_ptr<Sequential> make_classifier_lstm(const ClassifierLstmOptions& o) {
  const char* fn = "make_classifier_lstm";
  for (auto [what, v] : {std::pair<const char*, std::int64_t>{"steps", o.steps}, {"features", o.features},
                         {"units", o.units}, {"classes", o.classes}})
    check_positive(fn, what, v);
  Seeds seeds(o.seed);
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, o.name);
  model->add(plain<layers::Reshape>(seeds, layers::ReshapeOptions{.target_shape = {o.steps, o.features}}));
  model->add(std::make_shared<layers::LSTM>(layers::LSTMOptions{.units = o.units, .seed = seeds.next()}));
  model->add(dense(o.classes, "", seeds));
  model->build(Shape{1, o.steps * o.features});
  return model;
}

std::shared_ptr<Sequential> make_dcgan_generator(const DcganOptions& o) {
  check_positive("make_dcgan_generator", "noise_dim", o.noise_dim);
  Seeds seeds(o.seed);
  auto leaky3 = [&] { return plain<layers::LeakyReLU>(seeds, layers::LeakyReLUOptions{.alpha = 0.3}); };
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, "generator");
  model->add(std::make_shared<layers::Dense>(
      layers::DenseOptions{.units = 7 * 7 * 256, .use_bias = false, .seed = seeds.next()}));
  model->add(batch_norm(seeds));
  model->add(leaky3());
  model->add(plain<layers::Reshape>(seeds, layers::ReshapeOptions{.target_shape = {7, 7, 256}}));
  model->add(conv_transpose(128, 1, "", seeds));
  model->add(batch_norm(seeds));
  model->add(leaky3());
  model->add(conv_transpose(64, 2, "", seeds));
  model->add(batch_norm(seeds));
  model->add(leaky3());
  model->add(conv_transpose(1, 2, "tanh", seeds));
  model->build(Shape{1, o.noise_dim});
  return model;
}

std::shared_ptr<Sequential> make_dcgan_discriminator(const DcganOptions& o) {
  Seeds seeds(o.seed);
  auto leaky3 = [&] { return plain<layers::LeakyReLU>(seeds, layers::LeakyReLUOptions{.alpha = 0.3}); };
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, "discriminator");
  model->add(conv(64, 5, 2, "same", "", seeds));
  model->add(leaky3());
  model->add(dropout(0.3, seeds));
  model->add(conv(128, 5, 2, "same", "", seeds));
  model->add(leaky3());
  model->add(dropout(0.3, seeds));
  model->add(plain<layers::Flatten>(seeds));
  model->add(dense(1, "", seeds));
  model->build(Shape{1, 28, 28, 1});
  return model;
}

std::shared_ptr<Sequential> make_classifier_mlp(const ClassifierMlpOptions& o) {
  const char* fn = "make_classifier_mlp";
  check_positive(fn, "inputs", o.inputs);
  check_positive(fn, "classes", o.classes);
  for (std::int64_t h : o.hidden) check_positive(fn, "hidden sizes", h);
  if (!(o.dropout >= 0.0 && o.dropout < 1.0))
    throw std::invalid_argument(std::string(fn) + ": dropout must be in [0, 1), got " + std::to_string(o.dropout));
  Seeds seeds(o.seed);
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, o.name);
  for (std::int64_t h : o.hidden) {
    model->add(dense(h, "", seeds));
    if (o.batch_norm) model->add(batch_norm(seeds));
    seeds.next();
    model->add(std::make_shared<layers::Activation>("relu"));
    if (o.dropout > 0.0) model->add(std::make_shared<layers::Dropout>(layers::DropoutOptions{.rate = o.dropout, .seed = seeds.next()}));
  }
  model->add(dense(o.classes, "", seeds));
  model->build(Shape{1, o.inputs});
  return model;
}

std::shared_ptr<Sequential> make_gan_generator(const GanOptions& o) {
  check_positive("make_gan_generator", "noise_dim", o.noise_dim);
  check_positive("make_gan_generator", "image_dim", o.image_dim);
  Seeds seeds(o.seed);
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, "generator");
  model->add(dense(256, "", seeds));
  model->add(leaky(seeds));
  model->add(dense(512, "", seeds));
  model->add(batch_norm(seeds));
  model->add(leaky(seeds));
  model->add(dense(o.image_dim, "tanh", seeds));
  model->build(Shape{1, o.noise_dim});
  return model;
}

std::shared_ptr<Sequential> make_gan_discriminator(const GanOptions& o) {
  check_positive("make_gan_discriminator", "image_dim", o.image_dim);
  Seeds seeds(o.seed);
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, "discriminator");
  model->add(dense(512, "", seeds));
  model->add(leaky(seeds));
  model->add(dense(256, "", seeds));
  model->add(leaky(seeds));
  model->add(dense(1, "", seeds));
  model->build(Shape{1, o.image_dim});
  return model;
}

std::shared_ptr<Functional> make_classifier_vit(const ClassifierVitOptions& o) {
  const char* fn = "make_classifier_vit";
  for (auto [what, v] : {std::pair<const char*, std::int64_t>{"height", o.height}, {"width", o.width},
                         {"patch_size", o.patch_size}, {"projection_dim", o.projection_dim},
                         {"num_heads", o.num_heads}, {"transformer_layers", o.transformer_layers},
                         {"mlp_units", o.mlp_units}, {"classes", o.classes}})
    check_positive(fn, what, v);
  if (o.height % o.patch_size || o.width % o.patch_size)
    throw std::invalid_argument(std::string(fn) + ": patch_size " + std::to_string(o.patch_size) +
                                " does not divide the image " + std::to_string(o.height) + "x" + std::to_string(o.width));
  if (o.projection_dim % o.num_heads)
    throw std::invalid_argument(std::string(fn) + ": projection_dim " + std::to_string(o.projection_dim) +
                                " is not divisible by num_heads " + std::to_string(o.num_heads));
  if (!(o.dropout >= 0.0 && o.dropout < 1.0))
    throw std::invalid_argument(std::string(fn) + ": dropout must be in [0, 1), got " + std::to_string(o.dropout));
  namespace L = layers;
  Seeds seeds(o.seed);
  const std::int64_t p = o.patch_size, gh = o.height / p, gw = o.width / p, tokens = gh * gw;
  auto call = [](std::shared_ptr<L::Layer> layer, const L::KerasTensor& x) { return (*layer)(x); };
  auto add = [&](const L::KerasTensor& a, const L::KerasTensor& b) {
    return (*plain<L::Add>(seeds))(std::vector<L::KerasTensor>{a, b});
  };
  auto norm = [&](const L::KerasTensor& x) {
    return call(std::make_shared<L::LayerNormalization>(L::LayerNormalizationOptions{.epsilon = o.epsilon}), x);
  };
  const L::KerasTensor in = L::Input({.shape = {o.height * o.width}});
  L::KerasTensor h = call(plain<L::Reshape>(seeds, L::ReshapeOptions{.target_shape = {gh, p, gw, p}}), in);
  h = call(plain<L::Permute>(seeds, L::PermuteOptions{.dims = {1, 3, 2, 4}}), h);
  h = call(plain<L::Reshape>(seeds, L::ReshapeOptions{.target_shape = {tokens, p * p}}), h);
  h = call(dense(o.projection_dim, "", seeds), h);
  h = add(h, call(std::make_shared<L::PositionEmbedding>(L::PositionEmbeddingOptions{
                      .sequence_length = tokens, .initializer = "random_uniform", .seed = seeds.next()}),
                  h));
  for (std::int64_t b = 0; b < o.transformer_layers; ++b) {
    seeds.next();
    const L::KerasTensor a = norm(h);
    auto mha = std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{
        .num_heads = o.num_heads, .key_dim = o.projection_dim / o.num_heads, .dropout = o.dropout,
        .seed = seeds.next()});
    const L::KerasTensor h2 = add((*mha)(std::vector<L::KerasTensor>{a, a}), h);
    seeds.next();
    L::KerasTensor m = norm(h2);
    m = call(dropout(o.dropout, seeds), call(dense(o.mlp_units, "gelu", seeds), m));
    m = call(dropout(o.dropout, seeds), call(dense(o.projection_dim, "", seeds), m));
    h = add(m, h2);
  }
  seeds.next();
  h = norm(h);
  h = call(plain<L::GlobalAveragePooling1D>(seeds), h);
  const L::KerasTensor out = call(dense(o.classes, "", seeds), h);
  return std::make_shared<Functional>(in, out, o.name);
}

}  // namespace tapeflow::models
