// A Functional model with a skip (residual) connection, h + f(h), saved to HDF5 and loaded back
// without its code. Ref: Keras's "The Functional API" guide (a toy ResNet).
// Usage: example_functional_skip_connection [--limit N]
#include <tapeflow/tapeflow.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tf = tapeflow;
namespace L = tf::layers;

int main(int argc, char** argv) {
  std::int64_t limit = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--limit") == 0) limit = std::atoll(argv[i + 1]);
  auto [x_train, y_train, x_test, y_test] =
      tf::data::load_fashion_mnist_tensors(tf::data::kDefaultFashionMnistDir, limit);

  // Layers called on symbolic KerasTensors record a graph; Functional turns it into a model.
  L::KerasTensor inputs = L::Input({.shape = {784}});
  L::KerasTensor h = (*std::make_shared<L::Dense>(128, "relu"))(inputs);
  L::KerasTensor f = (*std::make_shared<L::Dense>(128, "relu"))(h);
  L::KerasTensor residual = (*std::make_shared<L::Add>())({h, f});  // the skip connection
  L::KerasTensor outputs = (*std::make_shared<L::Dense>(10))(residual);
  auto model = std::make_shared<tf::models::Functional>(inputs, outputs, "toy_resnet");
  model->compile({.optimizer = std::make_shared<tf::optimizers::Adam>(),
                  .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                      tf::models::CrossentropyOptions{.from_logits = true}),
                  .metrics = {"accuracy"}});
  std::printf("%s\n", model->summary().c_str());
  model->fit(x_train, y_train, {.batch_size = 64, .epochs = 2, .verbose = 2});
  const double accuracy = model->evaluate(x_test, y_test).at("accuracy");
  std::printf("test accuracy %.4f\n", accuracy);

  // The whole model (graph, weights, optimizer state) in one Keras HDF5 file.
  tf::models::save_model(*model, "toy_resnet.h5");
  std::shared_ptr<tf::models::Model> restored = tf::models::load_model("toy_resnet.h5");
  const double diff = tf::reduce_max(tf::abs(restored->predict(x_test) - model->predict(x_test))).item();
  std::printf("reloaded model's predictions differ by %g\n", diff);
  return diff == 0 && accuracy > 0.5 ? 0 : 1;
}
