// Checkpoints as tf.train.Checkpoint / CheckpointManager: model, optimizer state and the epoch
// counter saved after every epoch; a second run resumes from the newest one and continues.
// Usage: example_checkpoint_and_resume [--limit N]
#include <tapeflow/tapeflow.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace tf = tapeflow;

// Trains up to `epochs` epochs, resuming from `dir` when it holds a checkpoint; returns the epochs done.
std::int64_t train(const tf::data::FashionMnistTensors& d, const std::string& dir, int epochs) {
  auto model = tf::models::make_classifier_mlp({.seed = 1});
  model->compile({.optimizer = std::make_shared<tf::optimizers::Adam>(),
                  .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                      tf::models::CrossentropyOptions{.from_logits = true}),
                  .metrics = {"accuracy"}});
  model->build({1, 784});  // the weights must exist before a restore
  std::int64_t done = 0;
  auto ckpt = std::make_shared<tf::models::Checkpoint>(
      tf::models::CheckpointOptions{.model = model, .optimizer = model->optimizer()});
  ckpt->track_counter("epoch", &done);
  tf::models::CheckpointManager manager(ckpt, dir, /*max_to_keep=*/2);
  if (auto path = manager.restore()) std::printf("resumed from %s after epoch %lld\n", path->c_str(), (long long)done);
  auto save = std::make_shared<tf::models::LambdaCallback>(tf::models::LambdaCallbackOptions{
      .on_epoch_end = [&](int epoch, const tf::models::Logs&) {
        done = epoch + 1;
        std::printf("saved %s\n", manager.save().c_str());
      }});
  model->fit(d.x_train, d.y_train,
             {.batch_size = 64, .epochs = epochs, .verbose = 2, .callbacks = {save}, .initial_epoch = static_cast<int>(done)});
  std::printf("test accuracy after %lld epochs: %.4f\n", (long long)done, model->evaluate(d.x_test, d.y_test).at("accuracy"));
  return done;
}

int main(int argc, char** argv) {
  std::int64_t limit = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--limit") == 0) limit = std::atoll(argv[i + 1]);
  const auto data = tf::data::load_fashion_mnist_tensors(tf::data::kDefaultFashionMnistDir, limit);
  const std::string dir = "checkpoints";
  std::filesystem::remove_all(dir);
  const std::int64_t first = train(data, dir, 2);   // a run stopped after 2 epochs
  const std::int64_t second = train(data, dir, 4);  // the next run continues with epochs 3 and 4
  return first == 2 && second == 4 ? 0 : 1;
}
