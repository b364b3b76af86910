// tensorboard_logs LOG_DIR EXPECTED_JSON: trains a small MLP with validation data through fit with
// the TensorBoard callback (update_freq 1, histogram_freq 1, write_images, a cosine schedule so the
// learning rate changes), and writes what TensorBoard must read back: every scalar per run, tag and
// step, recorded by a second callback straight from fit's logs, and each weight's histogram facts.
// tests/interop/tensorboard_check.py compares them with TensorBoard's EventAccumulator.
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapeflow.h"

namespace tf = tapeflow;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tensorboard_logs LOG_DIR EXPECTED_JSON\n");
    return 2;
  }
  const std::string log_dir = argv[1];
  auto model = std::make_shared<tf::models::Sequential>();
  model->add(std::make_shared<tf::layers::Dense>(tf::layers::DenseOptions{.units = 5, .activation = "relu", .seed = 1}));
  model->add(std::make_shared<tf::layers::Dense>(tf::layers::DenseOptions{.units = 3, .seed = 2}));
  const int epochs = 3;
  const std::int64_t batch = 4, n = 20, steps = epochs * ((n + batch - 1) / batch);
  auto optimizer = std::make_shared<tf::optimizers::Adam>(
      tf::optimizers::AdamOptions{.learning_rate = tf::optimizers::CosineDecay(0.01, steps)});
  model->compile({.optimizer = optimizer, .loss = "mse", .metrics = {"binary_accuracy"}});
  tf::Generator gen(7);
  const tf::Tensor x = tf::random_normal(tf::Shape{n, 6}, gen), y = tf::random_uniform(tf::Shape{n, 3}, gen);
  const tf::Tensor xv = tf::random_normal(tf::Shape{8, 6}, gen), yv = tf::random_uniform(tf::Shape{8, 3}, gen);

  nlohmann::json scalars = {{"train", nlohmann::json::object()}, {"validation", nlohmann::json::object()}};
  nlohmann::json histograms = nlohmann::json::object();
  auto add = [&](const std::string& run, const std::string& tag, std::int64_t step, double value) {
    scalars[run][tag].push_back({step, value});
  };
  std::int64_t global_batch = 0;
  auto recorder = std::make_shared<tf::models::LambdaCallback>(tf::models::LambdaCallbackOptions{
      .on_epoch_end =
          [&](int epoch, const tf::models::Logs& logs) {
            for (const auto& [k, v] : logs) {
              if (k.starts_with("val_")) {
                add("validation", "epoch_" + k.substr(4), epoch, v);
                add("validation", "evaluation_" + k.substr(4) + "_vs_iterations", optimizer->iterations(), v);
              } else {
                add("train", "epoch_" + k, epoch, v);
              }
            }
            add("train", "epoch_learning_rate", epoch, optimizer->current_learning_rate());
            for (const auto& layer : model->layers())
              for (const auto& w : layer->weights()) {
                const auto v = tf::cast(w.value(), tf::DType::kFloat64).to_vector<double>();
                double lo = v[0], hi = v[0], sum = 0;
                for (double e : v) lo = std::min(lo, e), hi = std::max(hi, e), sum += e;
                std::string path = w.name().substr(0, w.name().rfind(':'));
                histograms[path + "/histogram"].push_back(
                    {{"step", epoch}, {"num", v.size()}, {"min", lo}, {"max", hi}, {"sum", sum},
                     {"shape", w.shape().to_vector()}});
              }
          },
      .on_train_batch_end =
          [&](std::int64_t, const tf::models::Logs& logs) {
            ++global_batch;
            for (const auto& [k, v] : logs) add("train", "batch_" + k, global_batch, v);
          }});
  auto board = std::make_shared<tf::models::TensorBoard>(
      log_dir, tf::models::TensorBoardOptions{.update_freq = 1, .histogram_freq = 1, .write_images = true});
  model->fit(x, y, {.batch_size = batch, .epochs = epochs, .verbose = 0, .callbacks = {recorder, board},
                    .validation_data = {xv, yv}, .seed = 3});
  std::ofstream(argv[2]) << nlohmann::json{{"scalars", scalars}, {"histograms", histograms}}.dump(1);
  return 0;
}
