// A custom layer as Keras writes one: configuration in the constructor, weights in build(), math
// in call(), get_config() for saving, and a registered class so load_model can rebuild it.
// Ref: Keras's "Making new layers and models via subclassing" guide.
// Usage: example_custom_layer
#include <tapeflow/tapeflow.h>

#include <cstdio>

namespace tf = tapeflow;

// y = x * scale + offset, one learnable scale and offset per feature.
class Affine : public tf::layers::Layer {
 public:
  explicit Affine(double initial_scale = 1.0, std::string name = "")
      : Layer("Affine", std::move(name)), initial_scale_(initial_scale) {}
  void build(const tf::Shape& input_shape) override {
    const std::int64_t features = input_shape.dim(-1);
    scale_ = add_weight("scale", {features}, tf::layers::initializers::constant(initial_scale_));
    offset_ = add_weight("offset", {features}, tf::layers::initializers::zeros());
    Layer::build(input_shape);  // marks the layer built
  }
  tf::Tensor call(const tf::Tensor& x, bool /*training*/) override { return x * scale_ + offset_; }
  tf::Config get_config() const override {
    return base_config().set("initial_scale", initial_scale_);  // name, trainable, dtype + our argument
  }

 private:
  double initial_scale_;
  tf::Variable scale_, offset_;
};

int main() {
  tf::layers::register_layer_class("Affine", [](const tf::Config& config) {
    const tf::layers::ConfigReader c(config, "Affine");
    return std::make_shared<Affine>(c.number("initial_scale", 1.0), c.name());
  });

  tf::Generator gen(3);
  const tf::Tensor x = tf::random_uniform({128, 4}, gen, -1.0, 1.0);
  const tf::Tensor y = 2.0 * x - 0.5;  // Affine can fit this exactly
  auto model = std::make_shared<tf::models::Sequential>(
      std::vector<std::shared_ptr<tf::layers::Layer>>{std::make_shared<Affine>(0.5)});
  model->compile({.optimizer = std::make_shared<tf::optimizers::Adam>(tf::optimizers::AdamOptions{.learning_rate = 0.05}),
                  .loss = "mean_squared_error"});
  const tf::models::History h = model->fit(x, y, {.batch_size = 32, .epochs = 60, .verbose = 0});
  std::printf("loss after 60 epochs: %.3g\n", h["loss"].back());

  tf::models::save_model(*model, "affine.h5");
  auto restored = tf::models::load_model("affine.h5");  // finds "Affine" in the registry
  const double diff = tf::reduce_max(tf::abs(restored->predict(x) - model->predict(x))).item();
  std::printf("restored %s with layer %s, predictions differ by %g\n", restored->class_name().c_str(),
              restored->layers().at(0)->class_name().c_str(), diff);
  return h["loss"].back() < 1e-3 && diff == 0 ? 0 : 1;
}
