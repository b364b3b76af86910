// A Sequential classifier on Fashion-MNIST: compile, fit (with a validation split), evaluate and
// predict, as in Keras's "basic classification" tutorial.
// Usage: example_sequential_classifier [--limit N]   (N > 0: the first N training and test images)
#include <tapeflow/tapeflow.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tf = tapeflow;
using tf::layers::Dense;

int main(int argc, char** argv) {
  std::int64_t limit = 0;  // 0: all 60,000 training and 10,000 test images
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--limit") == 0) limit = std::atoll(argv[i + 1]);
  // Pixels as float32 in [0, 1], flattened to [n, 784]; labels int64 in [0, 10).
  auto [x_train, y_train, x_test, y_test] =
      tf::data::load_fashion_mnist_tensors(tf::data::kDefaultFashionMnistDir, limit);

  tf::models::Sequential model({std::make_shared<Dense>(128, "relu"), std::make_shared<Dense>(10)});
  model.compile({.optimizer = std::make_shared<tf::optimizers::Adam>(tf::optimizers::AdamOptions{.learning_rate = 1e-3}),
                 .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                     tf::models::CrossentropyOptions{.from_logits = true}),
                 .metrics = {"accuracy"}});
  const tf::models::History history =
      model.fit(x_train, y_train, {.batch_size = 32, .epochs = 3, .validation_split = 0.1});
  std::printf("last epoch: loss %.4f, val_accuracy %.4f\n", history["loss"].back(), history["val_accuracy"].back());
  std::printf("%s\n", model.summary().c_str());

  const tf::models::Logs test = model.evaluate(x_test, y_test);
  std::printf("test loss %.4f, test accuracy %.4f\n", test.at("loss"), test.at("accuracy"));

  // The model outputs logits; softmax makes them class probabilities.
  const tf::Tensor probabilities = tf::softmax(model.predict(x_test), -1);
  const auto predicted = tf::argmax(probabilities, -1).to_vector<std::int64_t>();
  const auto confidence = tf::reduce_max(probabilities, -1).to_vector<float>();
  const auto truth = y_test.to_vector<std::int64_t>();
  const auto names = tf::data::fashion_mnist_class_names();
  for (std::size_t i = 0; i < 3 && i < predicted.size(); ++i)
    std::printf("image %zu: %s (%.2f), truly %s\n", i, names[static_cast<std::size_t>(predicted[i])],
                static_cast<double>(confidence[i]), names[static_cast<std::size_t>(truth[i])]);
  return test.at("accuracy") > 0.5 ? 0 : 1;
}
