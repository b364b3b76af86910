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

}  // namespace

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

}  // namespace tapeflow::models
