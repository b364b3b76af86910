// adversarial_regularization: trains a baseline and an input-gradient-regularized Fashion-MNIST
// classifier (loss = CE + λ·‖∂CE/∂x‖₂, a double backward) with the same seed, batches and budget,
// then prints clean and FGSM (optionally PGD) test accuracies for both. See --help.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "apps/common/app_common.h"
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/fashion_mnist_tensors.h"
#include "models/adversarial.h"
#include "models/architectures.h"
#include "models/callbacks/tensorboard.h"
#include "models/checkpoint.h"
#include "models/progbar.h"
#include "optimizers/adam.h"
#include "tape/core/random.h"
#include "tape/kernels/parallel.h"

namespace tf = tapeflow;

namespace {

struct Flags : tf::apps::CommonFlags {
  tf::apps::TensorBoardFlags tensorboard;
  int epochs = 10;
  std::int64_t batch_size = 128;
  double lambda = 5.0;
  double learning_rate = 1e-3;
  std::vector<double> epsilons = {0.01, 0.03, 0.05, 0.1};
  int pgd_steps = 0;
  std::vector<std::int64_t> hidden = {256};
  std::string model = "mlp";  // or "cnn": the Keras convnet (make_classifier_cnn); "lstm": make_classifier_lstm
  std::string checkpoint_dir;
};

struct ModelReport {
  std::string name;
  double lambda = 0;
  bool restored = false;  // loaded from --checkpoint-dir instead of trained (no training losses)
  double final_loss = 0, final_cross_entropy = 0, final_input_gradient_norm = 0;
  double train_seconds = 0;
  double clean_accuracy = 0;
  std::vector<double> fgsm, pgd;
};

std::string json_number(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : "null"; }

std::string json_list(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += (s.empty() ? "" : ", ") + json_number(x);
  return "[" + s + "]";
}

// The flags that shape one trained model, as stored in its checkpoint (λ only for the regularized
// one). --threads only warns when it changes (results then differ in the last bits).
tf::apps::AppConfig training_config(const Flags& f, double lambda) {
  std::string hidden;
  for (auto h : f.hidden) hidden += (hidden.empty() ? "" : ",") + std::to_string(h);
  return {{"--model", f.model},
          {"--epochs", std::to_string(f.epochs)},
          {"--batch-size", std::to_string(f.batch_size)},
          {"--lambda", fmt::format("{}", lambda)},
          {"--learning-rate", fmt::format("{}", f.learning_rate)},
          {"--hidden", hidden},
          {"--seed", std::to_string(f.seed)},
          {"--limit", std::to_string(f.limit)},
          {"--threads", std::to_string(tf::kernels::num_threads()), true}};
}

// Trains one classifier for f.epochs epochs; the shuffling depends only on f.seed, so both models
// see the same batches in the same order. A checkpoint of the same name in --checkpoint-dir is
// loaded instead, after checking that it was trained with the same flags.
ModelReport train(const Flags& f, const tf::data::FashionMnistTensors& ds, const std::string& name, double lambda) {
  std::shared_ptr<tf::models::Sequential> model =
      f.model == "cnn"    ? tf::models::make_classifier_cnn({.seed = f.seed, .name = name})
      : f.model == "lstm" ? tf::models::make_classifier_lstm({.seed = f.seed, .name = name})
                          : tf::models::make_classifier_mlp({.hidden = f.hidden, .batch_norm = false, .seed = f.seed, .name = name});
  auto adam = std::make_shared<tf::optimizers::Adam>(tf::optimizers::AdamOptions{.learning_rate = f.learning_rate});
  const std::int64_t n = ds.x_train.shape()[0];
  tf::Generator shuffle_gen(f.seed ^ 0x5eedULL);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  ModelReport r;
  r.name = name;
  r.lambda = lambda;
  tf::models::Checkpoint ckpt({.model = model, .optimizer = adam});
  ckpt.set_config(tf::apps::encode_config(training_config(f, lambda)));
  const std::string ckpt_path =
      f.checkpoint_dir.empty() ? "" : (std::filesystem::path(f.checkpoint_dir) / (name + ".h5")).string();
  if (!ckpt_path.empty() && std::filesystem::exists(ckpt_path)) {
    // The flags first (an empty checkpoint reads only them): a checkpoint of another --model would
    // otherwise fail on its weights.
    tf::models::Checkpoint flags_only;
    flags_only.read(ckpt_path);
    tf::apps::check_config(ckpt_path, flags_only.loaded_config(), training_config(f, lambda));
    ckpt.read(ckpt_path);
    r.restored = true;
    r.final_loss = r.final_cross_entropy = r.final_input_gradient_norm = r.train_seconds = std::nan("");
    spdlog::info("[{}] restored from {} (not trained)", name, ckpt_path);
  }
  // --tensorboard-dir: DIR/<name>/train, driven as fit drives the callback (running-mean batch logs).
  std::optional<tf::models::TensorBoard> board;
  if (!f.tensorboard.dir.empty() && !r.restored) {
    board.emplace((std::filesystem::path(f.tensorboard.dir) / name).string(),
                  tf::models::TensorBoardOptions{.update_freq = f.tensorboard.update_freq, .histogram_freq = 1});
    board->set_model(model.get());
    board->on_train_begin({});
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < f.epochs && !r.restored; ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[shuffle_gen.uniform_int(i)]);
    double loss_sum = 0, ce_sum = 0, gn_sum = 0;
    std::int64_t steps = 0;
    const std::int64_t total_steps = (n + f.batch_size - 1) / f.batch_size;
    tf::models::Progbar bar({.target = total_steps, .verbose = tf::apps::fit_verbosity(f),
                             .prefix = fmt::format("[{}] epoch {}/{}", name, epoch + 1, f.epochs)});
    for (std::int64_t b = 0; b < n; b += f.batch_size) {
      tf::apps::throw_if_interrupted("training of the " + name + " model (epoch " + std::to_string(epoch + 1) + ")",
                                     "nothing of this model was saved (a model is saved when its training ends)");
      const std::vector<std::int64_t> rows(order.begin() + b, order.begin() + std::min(n, b + f.batch_size));
      const auto s = tf::models::input_gradient_regularized_step(*model, *adam, tf::data::gather_rows(ds.x_train, rows),
                                                                 tf::data::gather_rows(ds.y_train, rows), lambda);
      if (!std::isfinite(s.loss))
        throw tf::apps::DivergedError(fmt::format("[{}] training diverged: loss {} at epoch {}, step {}", name, s.loss,
                                                  epoch + 1, steps + 1));
      loss_sum += s.loss, ce_sum += s.cross_entropy, gn_sum += s.input_gradient_norm, ++steps;
      bar.update(steps, {{"loss", loss_sum / steps}}, steps == total_steps);
      if (board) board->on_train_batch_end(steps - 1, {{"loss", loss_sum / static_cast<double>(steps)}});
    }
    r.final_loss = loss_sum / steps, r.final_cross_entropy = ce_sum / steps, r.final_input_gradient_norm = gn_sum / steps;
    spdlog::info("[{}] epoch {}/{} - loss {:.4f} - cross-entropy {:.4f} - ‖∂CE/∂x‖ {:.4f}", name, epoch + 1, f.epochs,
                 r.final_loss, r.final_cross_entropy, r.final_input_gradient_norm);
    if (board) {
      tf::models::Logs logs{{"loss", r.final_loss},
                            {"cross_entropy", r.final_cross_entropy},
                            {"input_gradient_norm", r.final_input_gradient_norm},
                            {"learning_rate", adam->current_learning_rate()}};
      board->on_epoch_end(epoch, logs);
    }
  }
  if (board) board->on_train_end({});
  if (!r.restored) {
    r.train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!ckpt_path.empty()) {
      ckpt.write(ckpt_path);
      spdlog::info("[{}] saved {}", name, ckpt_path);
    }
  }
  r.clean_accuracy = tf::models::attacked_accuracy(*model, ds.x_test, ds.y_test, {});
  for (double eps : f.epsilons) {
    r.fgsm.push_back(tf::models::attacked_accuracy(*model, ds.x_test, ds.y_test, {.epsilon = eps}));
    if (f.pgd_steps > 0)
      r.pgd.push_back(
          tf::models::attacked_accuracy(*model, ds.x_test, ds.y_test, {.epsilon = eps, .pgd_steps = f.pgd_steps}));
  }
  spdlog::info("[{}] {}; clean test accuracy {:.4f}", name,
               r.restored ? std::string("restored") : fmt::format("trained in {:.1f}s", r.train_seconds), r.clean_accuracy);
  return r;
}

void print_table(const Flags& f, const std::vector<ModelReport>& reports) {
  std::string header = fmt::format("{:<24}{:>8}", "model", "clean");
  for (double eps : f.epsilons) header += fmt::format("{:>12}", fmt::format("FGSM {:g}", eps));
  if (f.pgd_steps > 0)
    for (double eps : f.epsilons) header += fmt::format("{:>14}", fmt::format("PGD{} {:g}", f.pgd_steps, eps));
  std::printf("%s\n", header.c_str());
  for (const auto& r : reports) {
    std::string row = fmt::format("{:<24}{:>8.4f}", fmt::format("{} (λ={:g})", r.name, r.lambda), r.clean_accuracy);
    for (double a : r.fgsm) row += fmt::format("{:>12.4f}", a);
    for (double a : r.pgd) row += fmt::format("{:>14.4f}", a);
    std::printf("%s\n", row.c_str());
  }
  std::fflush(stdout);
}

void write_metrics(const Flags& f, const std::vector<ModelReport>& reports, std::int64_t n_train,
                   std::int64_t n_test) {
  std::string models;
  for (const auto& r : reports)
    models += fmt::format(
        "{}    \"{}\": {{\"lambda\": {}, \"restored\": {}, \"clean_accuracy\": {}, \"fgsm_accuracy\": {}, \"pgd_accuracy\": {}, "
        "\"final_loss\": {}, \"final_cross_entropy\": {}, \"final_input_gradient_norm\": {}, \"train_seconds\": {}}}",
        models.empty() ? "" : ",\n", r.name, json_number(r.lambda), r.restored, json_number(r.clean_accuracy), json_list(r.fgsm),
        json_list(r.pgd), json_number(r.final_loss), json_number(r.final_cross_entropy),
        json_number(r.final_input_gradient_norm), json_number(r.train_seconds));
  const std::string json = fmt::format(
      "{{\n  \"model\": \"{}\",\n  \"epsilons\": {},\n  \"pgd_steps\": {},\n  \"lambda\": {},\n  \"epochs\": {},\n  \"batch_size\": {},\n"
      "  \"learning_rate\": {},\n  \"seed\": {},\n  \"threads\": {},\n  \"train_examples\": {},\n"
      "  \"test_examples\": {},\n  \"models\": {{\n{}\n  }}\n}}\n",
      f.model, json_list(f.epsilons), f.pgd_steps, json_number(f.lambda), f.epochs, f.batch_size, json_number(f.learning_rate),
      f.seed, tf::kernels::num_threads(), n_train, n_test, models);
  std::ofstream out(f.metrics_out);
  out << json;
  if (!out.flush()) throw std::runtime_error("--metrics-out: cannot write '" + f.metrics_out + "'");
}

int run(const Flags& f) {
  tf::apps::apply_common_flags(f);
  if (!f.checkpoint_dir.empty()) tf::apps::check_writable_directory("--checkpoint-dir", f.checkpoint_dir);
  if (!f.tensorboard.dir.empty()) tf::apps::check_writable_directory("--tensorboard-dir", f.tensorboard.dir);
  tf::data::FashionMnistTensors ds = tf::apps::load_fashion_mnist(f);
  spdlog::info("Fashion-MNIST: {} training and {} test examples; {} threads", ds.x_train.shape()[0],
               ds.x_test.shape()[0], tf::kernels::num_threads());
  std::vector<ModelReport> reports;
  reports.push_back(train(f, ds, "baseline", 0.0));
  reports.push_back(train(f, ds, "regularized", f.lambda));
  print_table(f, reports);
  if (!f.metrics_out.empty()) write_metrics(f, reports, ds.x_train.shape()[0], ds.x_test.shape()[0]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"Train a baseline and an input-gradient-regularized Fashion-MNIST MLP or convnet (loss = CE + λ·‖∂CE/∂x‖₂, "
               "double backward) with the same seed and budget; report clean and FGSM/PGD test accuracy.",
               "adversarial_regularization"};
  app.add_option("--epochs", f.epochs, "Training epochs per model")->capture_default_str()->check(tf::apps::integer_at_least<int>(1));
  app.add_option("--batch-size", f.batch_size, "Examples per step")->capture_default_str()->check(tf::apps::integer_at_least<std::int64_t>(1));
  app.add_option("--lambda", f.lambda, "Weight λ of ‖∂CE/∂x‖₂ (global L2 norm over the batch) for the regularized model")
      ->capture_default_str()->check(tf::apps::positive());
  app.add_option("--learning-rate", f.learning_rate, "Adam learning rate")
      ->capture_default_str()->check(tf::apps::positive());
  app.add_option("--epsilons", f.epsilons, "FGSM/PGD budgets (L∞, pixels in [0, 1]), comma-separated")
      ->delimiter(',')->capture_default_str()->check(tf::apps::in_range(0.0, 1.0));
  app.add_option("--pgd-steps", f.pgd_steps, "Also evaluate PGD with K steps of 2.5·ε/K (0, the default: PGD off)")
      ->capture_default_str()->check(tf::apps::integer_at_least<int>(0));
  app.add_option("--model", f.model,
                 "Classifier: mlp (Dense ReLU layers of --hidden) or cnn (the Keras convnet: Conv2D 32 -> MaxPool -> "
                 "Conv2D 64 -> MaxPool -> Dropout 0.5 -> Dense 10; its input gradient needs the second derivative "
                 "of a convolution) or lstm (the Keras RNN recipe: each image's 28 rows as 28 steps -> LSTM 128 -> "
                 "Dense 10; the penalty differentiates twice through the recurrence)")
      ->capture_default_str()->check(CLI::IsMember({"mlp", "cnn", "lstm"}));
  app.add_option("--hidden", f.hidden, "Hidden layer sizes of the MLP (ReLU), comma-separated")
      ->delimiter(',')->capture_default_str()->check(tf::apps::integer_at_least<std::int64_t>(1));
  app.add_option("--checkpoint-dir", f.checkpoint_dir,
                 "Save each trained model (weights, Adam state, flags) as DIR/<baseline|regularized>.h5; a file that "
                 "already exists is loaded instead of training, if it was trained with the same flags");
  tf::apps::add_common_flags(app, f);
  tf::apps::add_tensorboard_flags(app, f.tensorboard);
  if (auto code = tf::apps::parse_flags(app, argc, argv)) return *code;
  return tf::apps::run_app("adversarial_regularization", [&] { return run(f); });
}
