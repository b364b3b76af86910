// A subclassed Model that overrides train_step (here: clipping each gradient's norm before the
// update), while fit keeps doing the rest (batching, shuffling, callbacks, metrics, progress).
// Ref: Keras's "Customizing what happens in fit()" guide.
// Usage: example_subclassed_train_step [--limit N]
#include <tapeflow/tapeflow.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tf = tapeflow;

class ClippedMLP : public tf::models::Model {
 public:
  explicit ClippedMLP(double clip_norm) : Model("clipped_mlp"), clip_norm_(clip_norm) {
    hidden_ = track_layer(std::make_shared<tf::layers::Dense>(64, "relu"));
    logits_ = track_layer(std::make_shared<tf::layers::Dense>(10));
  }
  tf::Tensor call(const tf::Tensor& x, bool training) override { return (*logits_)((*hidden_)(x, training), training); }

  tf::models::Logs train_step(const tf::data::Example& batch) override {
    const tf::Tensor& x = batch[0];
    const tf::Tensor& y = batch[1];
    tf::GradientTape tape;
    const tf::Tensor y_pred = (*this)(x, /*training=*/true);
    const tf::Tensor loss = compute_loss(y, y_pred);  // the compiled loss
    const std::vector<tf::Variable> vars = trainable_variables();
    std::vector<std::optional<tf::Tensor>> grads = tape.gradient(loss, vars);
    for (auto& g : grads)
      if (g) g = tf::clip_by_norm(*g, clip_norm_);
    optimizer()->apply_gradients(grads, vars);
    return compute_metrics(y, y_pred, loss, x.shape()[0]);  // "loss" and "accuracy" for fit's logs
  }

 private:
  double clip_norm_;
  std::shared_ptr<tf::layers::Dense> hidden_, logits_;
};

int main(int argc, char** argv) {
  std::int64_t limit = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--limit") == 0) limit = std::atoll(argv[i + 1]);
  auto [x_train, y_train, x_test, y_test] =
      tf::data::load_fashion_mnist_tensors(tf::data::kDefaultFashionMnistDir, limit);

  auto model = std::make_shared<ClippedMLP>(/*clip_norm=*/1.0);
  model->compile({.optimizer = std::make_shared<tf::optimizers::SGD>(tf::optimizers::SGDOptions{.learning_rate = 0.1}),
                  .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                      tf::models::CrossentropyOptions{.from_logits = true}),
                  .metrics = {"accuracy"}});
  const tf::models::History h = model->fit(x_train, y_train, {.batch_size = 32, .epochs = 3, .verbose = 2});
  const double accuracy = model->evaluate(x_test, y_test).at("accuracy");
  std::printf("train loss %.4f -> %.4f, test accuracy %.4f\n", h["loss"].front(), h["loss"].back(), accuracy);
  return h["loss"].back() < h["loss"].front() && accuracy > 0.5 ? 0 : 1;
}
