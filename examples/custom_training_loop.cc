// A training loop written by hand: batches from a Dataset, the loss under a GradientTape, the
// gradients, Optimizer::apply_gradients, and a metric updated per batch.
// Ref: Keras's "Writing a training loop from scratch" guide.
// Usage: example_custom_training_loop [--limit N]
#include <tapeflow/tapeflow.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tf = tapeflow;
using tf::layers::Dense;

int main(int argc, char** argv) {
  std::int64_t limit = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--limit") == 0) limit = std::atoll(argv[i + 1]);
  auto [x_train, y_train, x_test, y_test] =
      tf::data::load_fashion_mnist_tensors(tf::data::kDefaultFashionMnistDir, limit);

  tf::models::Sequential model({std::make_shared<Dense>(64, "relu"), std::make_shared<Dense>(10)});
  tf::optimizers::Adam optimizer({.learning_rate = 1e-3});
  tf::models::SparseCategoricalCrossentropy loss_fn({.from_logits = true});
  tf::models::SparseCategoricalAccuracy train_accuracy;

  const tf::data::Dataset batches = tf::data::Dataset::from_tensor_slices({x_train, y_train}).shuffle(1024, 7).batch(64);
  for (int epoch = 0; epoch < 3; ++epoch) {
    train_accuracy.reset_state();
    double loss_sum = 0;
    int steps = 0;
    for (const tf::data::Example& batch : batches) {  // a fresh shuffle every pass
      tf::GradientTape tape;
      const tf::Tensor logits = model(batch[0], /*training=*/true);
      const tf::Tensor loss = loss_fn(batch[1], logits);
      const std::vector<tf::Variable> vars = model.trainable_variables();
      optimizer.apply_gradients(tape.gradient(loss, vars), vars);
      train_accuracy.update_state(batch[1], logits);
      loss_sum += loss.item();
      ++steps;
    }
    std::printf("epoch %d: loss %.4f, accuracy %.4f\n", epoch + 1, loss_sum / steps, train_accuracy.result());
  }
  tf::models::SparseCategoricalAccuracy test_accuracy;
  test_accuracy.update_state(y_test, model.predict(x_test));
  std::printf("test accuracy %.4f\n", test_accuracy.result());
  return test_accuracy.result() > 0.5 ? 0 : 1;
}
