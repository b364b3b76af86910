// train_classifier: trains a Fashion-MNIST classifier, the MLP (784-256-BN-ReLU-256-BN-ReLU-10,
// default), the Keras convnet (--model cnn), the Keras LSTM recipe (--model lstm) or the Keras
// Vision Transformer (--model vit), and reports test loss and accuracy. See --help.
// Under mpirun (built with MPI) it trains data-parallel: --batch-size stays the global batch, split
// across the ranks; --threads is per rank; rank 0 alone logs, writes checkpoints and --metrics-out;
// --resume restores on rank 0 and broadcasts model, optimizer and epoch to every rank (any N).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "apps/common/app_common.h"
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "data/fashion_mnist_tensors.h"
#include "models/checkpoint.h"
#include "models/models.h"
#include "optimizers/optimizers.h"
#include "tape/kernels/parallel.h"
#ifdef TAPEFLOW_HAVE_DISTRIBUTE
#include "distribute/context.h"
#endif

namespace tf = tapeflow;

namespace {

// Each --model and the defaults of --epochs / --learning-rate / --lr-schedule that it brings (--help
// shows the chosen model's: `--model cnn --help`). A new model adds a row. cnn: 30 epochs reach 0.9165
// test accuracy (seed 42); 15 stopped at 0.9124, short of the 0.916 that TensorFlow's 2-conv tutorial
// net reaches in the dataset's benchmark table. lstm: the Keras RNN-on-MNIST recipe (Adam 1e-3,
// constant, 10 epochs; Keras 3.15 on TensorFlow 2.21 reaches 0.8726 test accuracy with it here).
struct ModelDefaults {
  const char* name;
  const char* what;
  int epochs;
  double learning_rate;
  const char* schedule;
  const char* optimizer = "adam";
  double weight_decay = 0.004;  // AdamW's (Keras default), used with --optimizer adamw
};
constexpr ModelDefaults kModels[] = {
    {"mlp", "784-256-BN-ReLU-256-BN-ReLU-10 (fast)", 8, 2e-3, "cosine"},
    {"cnn", "Conv2D 32 3x3 -> MaxPool 2 -> Conv2D 64 3x3 -> MaxPool 2 -> Flatten -> Dropout 0.5 -> Dense 10", 30, 3e-3,
     "cosine"},
    {"lstm", "the 28 rows as 28 steps of 28 pixels -> LSTM 128 -> Dense 10", 10, 1e-3, "constant"},
    // vit: the W12 recipe (Keras ViT example): AdamW(1e-3, weight_decay 1e-4) at a constant rate, 10
    // epochs, batch 128 (Keras 3.15 on TensorFlow 2.21: 0.8601 test accuracy).
    {"vit",
     "the Keras Vision Transformer example for 28x28 (4x4 patches -> 49 tokens, Dense 64 + position embedding, 4 "
     "blocks of LayerNorm -> MultiHeadAttention 4x16 -> LayerNorm -> MLP 128 gelu, 138,890 parameters)",
     10, 1e-3, "constant", "adamw", 1e-4},
};

struct Flags : tf::apps::CommonFlags {
  tf::apps::TensorBoardFlags tensorboard;
  std::string model = "mlp";
  int epochs = 8;
  std::int64_t batch_size = 128;
  std::string optimizer = "adam";
  double learning_rate = 2e-3;
  double weight_decay = 0.004;  // AdamW's (Keras default)
  std::string schedule = "cosine";
  std::string checkpoint_dir;  // save every epoch through a CheckpointManager
  bool resume = false;         // restore the newest checkpoint in checkpoint_dir first
  std::string save_model;      // after training: a .h5 / .keras file (save_model), a .onnx file (export_onnx) or a TensorFlow.js directory
  double validation_split = 0;  // Keras's: the last fraction of the training examples validates
  std::string csv_log;          // CSVLogger: one row per epoch
  double collective_timeout = 300;  // seconds, under mpirun
  bool no_shared_memory = false;    // under mpirun: the network sum instead of the shared-memory window
  bool fp16_allreduce = false;      // under mpirun: gradients cross the network as half
};

#ifdef TAPEFLOW_HAVE_DISTRIBUTE
using Replicas = tf::distribute::Context;
#else
using Replicas = tf::models::ReplicaContext;  // never made without MPI
#endif

// The optimizer named on the command line with the learning rate (a number or a schedule).
std::shared_ptr<tf::optimizers::Optimizer> make_optimizer(const std::string& name, tf::optimizers::LearningRate lr,
                                                          double weight_decay) {
  namespace opt = tf::optimizers;
  if (name == "adam") return std::make_shared<opt::Adam>(opt::AdamOptions{.learning_rate = lr});
  if (name == "adamw")
    return std::make_shared<opt::AdamW>(opt::AdamWOptions{.learning_rate = lr, .weight_decay = weight_decay});
  if (name == "sgd") return std::make_shared<opt::SGD>(opt::SGDOptions{.learning_rate = lr, .momentum = 0.9});
  if (name == "rmsprop") return std::make_shared<opt::RMSprop>(opt::RMSpropOptions{.learning_rate = lr});
  return std::make_shared<opt::Adagrad>(opt::AdagradOptions{.learning_rate = lr});
}

// Adds the learning rate of the epoch's first step to its logs (as Keras's LearningRateScheduler
// logs the rate it set), so History, --metrics-out and --csv-log hold it.
class LogLearningRate : public tf::models::Callback {
 public:
  void on_epoch_begin(int, const tf::models::Logs&) override { lr_ = model().optimizer()->current_learning_rate(); }
  void on_epoch_end(int, tf::models::Logs& logs) override { logs.set("learning_rate", lr_); }

 private:
  double lr_ = 0;
};

std::string json_number(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : "null"; }

// Keras's History.history as JSON: {"accuracy": [...], "loss": [...], ...}, one value per epoch.
std::string history_json(const tf::models::History& h) {
  std::string out;
  for (const auto& [name, values] : h.history) {
    std::string list;
    for (double v : values) list += (list.empty() ? "" : ", ") + json_number(v);
    out += fmt::format("{}\n    \"{}\": [{}]", out.empty() ? "" : ",", name, list);
  }
  return "{" + out + "\n  }";
}

void write_metrics(const std::string& path, const Flags& f, const tf::models::Logs& test,
                   const tf::models::History& h, const std::vector<double>& epoch_seconds, double total_seconds,
                   std::int64_t ranks) {
  std::string times;
  for (double t : epoch_seconds) times += (times.empty() ? "" : ", ") + json_number(t);
  const std::string json = fmt::format(
      "{{\n  \"model\": \"{}\",\n  \"test_loss\": {},\n  \"test_accuracy\": {},\n  \"train_loss\": {},\n  \"train_accuracy\": {},\n"
      "  \"epochs\": {},\n  \"batch_size\": {},\n  \"optimizer\": \"{}\",\n  \"learning_rate\": {},\n"
      "  \"seed\": {},\n  \"ranks\": {},\n  \"threads\": {},\n  \"limit\": {},\n  \"epoch_seconds\": [{}],\n  \"total_seconds\": {},\n  \"history\": {}\n}}\n",
      f.model, json_number(test.at("loss")), json_number(test.at("accuracy")), json_number(h["loss"].back()),
      json_number(h["accuracy"].back()), h.epoch.size(), f.batch_size, f.optimizer, json_number(f.learning_rate),
      f.seed, ranks, tf::kernels::num_threads(), f.limit, times, json_number(total_seconds), history_json(h));
  std::ofstream out(path);
  out << json;
  if (!out.flush()) throw std::runtime_error("--metrics-out: cannot write '" + path + "'");
}

// The flags that shape the trained model, as stored in its checkpoints. --epochs (the run may be
// extended) and --threads (results then differ in the last bits) only warn when they change.
tf::apps::AppConfig training_config(const Flags& f) {
  return {{"--model", f.model},
          {"--epochs", std::to_string(f.epochs), true},
          {"--batch-size", std::to_string(f.batch_size)},
          {"--optimizer", f.optimizer},
          {"--weight-decay", fmt::format("{}", f.weight_decay)},
          {"--learning-rate", fmt::format("{}", f.learning_rate)},
          {"--lr-schedule", f.schedule},
          {"--seed", std::to_string(f.seed)},
          {"--limit", std::to_string(f.limit)},
          {"--threads", std::to_string(tf::kernels::num_threads()), true}};
}

int run(const Flags& f, const std::shared_ptr<Replicas>& replicas) {
  const auto t_start = std::chrono::steady_clock::now();
  const bool chief = !replicas || replicas->rank() == 0;  // logs, checkpoints and metrics
  tf::apps::apply_common_flags(f);
  if (chief && f.resume && !std::filesystem::is_directory(f.checkpoint_dir))  // a typo must not start afresh
    throw std::runtime_error("--resume: the checkpoint directory '" + f.checkpoint_dir + "' does not exist");
  if (chief && !f.checkpoint_dir.empty()) tf::apps::check_writable_directory("--checkpoint-dir", f.checkpoint_dir);
  if (chief && !f.tensorboard.dir.empty()) tf::apps::check_writable_directory("--tensorboard-dir", f.tensorboard.dir);
  if (chief && !f.save_model.empty()) tf::apps::check_writable_output("--save-model", f.save_model);
  if (chief && !f.csv_log.empty()) tf::apps::check_writable_file("--csv-log", f.csv_log);
  if (!chief && spdlog::get_level() < spdlog::level::warn) spdlog::set_level(spdlog::level::warn);
  if (replicas)
    spdlog::info("Data-parallel over {} ranks: global batch {}, {} per rank, {} threads per rank", replicas->size(),
                 f.batch_size, f.batch_size / replicas->size(), tf::kernels::num_threads());

  tf::data::FashionMnistTensors ds = tf::apps::load_fashion_mnist(f);
  spdlog::info("Fashion-MNIST: {} training and {} test examples from {}", ds.x_train.shape()[0],
               ds.x_test.shape()[0], f.data_dir);

  std::shared_ptr<tf::models::Model> model;
  if (f.model == "cnn") model = tf::models::make_classifier_cnn({.seed = f.seed});
  else if (f.model == "lstm") model = tf::models::make_classifier_lstm({.seed = f.seed});
  else if (f.model == "vit") model = tf::models::make_classifier_vit({.seed = f.seed});
  else model = tf::models::make_classifier_mlp({.seed = f.seed});
  spdlog::info("\n{}", model->summary());

  const std::int64_t n = ds.x_train.shape()[0];
  const std::int64_t ranks = replicas ? replicas->size() : 1;
  // Steps of the run (fit drops the uneven tail when ranks > 1: see Model::fit).
  const std::int64_t steps_per_epoch =
      ranks > 1 ? n / (f.batch_size / ranks * ranks) : (n + f.batch_size - 1) / f.batch_size;
  const std::int64_t steps = f.epochs * steps_per_epoch;
  tf::optimizers::LearningRate lr = f.learning_rate;
  if (f.schedule == "cosine" && steps > 0) lr = tf::optimizers::CosineDecay(f.learning_rate, steps);
  model->compile({.optimizer = make_optimizer(f.optimizer, lr, f.weight_decay),
                  .loss = std::make_shared<tf::models::SparseCategoricalCrossentropy>(
                      tf::models::CrossentropyOptions{.from_logits = true}),
                  .metrics = {"accuracy"}});

  // Checkpoints: model + optimizer (slots, iterations, hence the schedule) + the epoch counter, which
  // is also the data-order state (fit shuffles epoch e as pass e), + the flags of the run.
  auto terminate = std::make_shared<tf::models::TerminateOnNaN>();
  std::int64_t done_epochs = 0;
  std::vector<std::shared_ptr<tf::models::Callback>> callbacks;
  std::shared_ptr<tf::models::CheckpointManager> manager;
  std::string last_saved;  // the checkpoint written after the newest completed epoch
  if (!f.checkpoint_dir.empty()) {
    tf::Shape one = ds.x_train.shape();
    one[0] = 1;
    model->build(one);  // weights must exist before a restore
    auto ckpt = std::make_shared<tf::models::Checkpoint>(
        tf::models::CheckpointOptions{.model = model, .optimizer = model->optimizer()});
    ckpt->track_counter("epoch", &done_epochs);
    ckpt->set_config(tf::apps::encode_config(training_config(f)));
    if (chief) manager = std::make_shared<tf::models::CheckpointManager>(ckpt, f.checkpoint_dir, 3);
    if (f.resume) {
      if (chief) {
        // The flags first: a checkpoint of another --model would otherwise fail on its weights.
        std::string checked;
        if (auto newest = manager->latest_checkpoint()) {
          tf::models::Checkpoint flags_only;
          try {
            flags_only.read(*newest);
            checked = *newest;
          } catch (const std::runtime_error&) {
          }  // unreadable: restore() says why and tries older ones
          if (!checked.empty()) tf::apps::check_config(checked, flags_only.loaded_config(), training_config(f));
        }
        if (auto path = manager->restore()) {
          if (*path != checked) tf::apps::check_config(*path, ckpt->loaded_config(), training_config(f));
          spdlog::info("Resumed from {} after epoch {}", *path, done_epochs);
          last_saved = *path;
        } else {
          throw std::runtime_error("--resume: no readable checkpoint (ckpt-N.h5) in '" + f.checkpoint_dir +
                                   "'; drop --resume to start a new run there");
        }
      }
      if (replicas && ranks > 1) {  // rank 0 restored: model, optimizer state and epoch to everyone
        model->optimizer()->build(model->trainable_variables());
        replicas->broadcast_variables(model->variables(), 0);
        replicas->broadcast_variables(model->optimizer()->variables(), 0);
        std::vector<double> epoch{static_cast<double>(done_epochs)};
        replicas->broadcast(epoch, 0, "resume: epoch");
        done_epochs = static_cast<std::int64_t>(epoch[0]);
      }
      if (done_epochs >= f.epochs)
        throw tf::apps::UsageError("--epochs " + std::to_string(f.epochs) + ": the checkpoint already has " +
                                   std::to_string(done_epochs) + " of " + std::to_string(f.epochs) + " epochs");
    } else if (auto latest = chief ? manager->latest_checkpoint() : std::nullopt) {
      throw tf::apps::UsageError("--checkpoint-dir '" + f.checkpoint_dir + "' already holds checkpoints (newest " +
                                 *latest + "): pass --resume to continue that run, or use another directory");
    }
    callbacks.push_back(std::make_shared<tf::models::CheckpointHook>(tf::models::CheckpointHookOptions{
        .save = [&, manager](int epoch, const tf::models::Logs&) {  // fit runs callbacks on rank 0 only
          if (terminate->terminated() || tf::apps::interrupted()) return;  // an incomplete or diverged epoch
          done_epochs = epoch + 1;
          last_saved = manager->save();
          spdlog::info("Saved {}", last_saved);
        }}));
  }

  std::vector<double> epoch_seconds;
  std::chrono::steady_clock::time_point t_epoch;
  int current_epoch = 0;
  auto timer = std::make_shared<tf::models::LambdaCallback>(tf::models::LambdaCallbackOptions{
      .on_epoch_begin =
          [&](int epoch, const tf::models::Logs&) {
            current_epoch = epoch;
            t_epoch = std::chrono::steady_clock::now();
          },
      .on_epoch_end =
          [&](int, const tf::models::Logs&) {
            epoch_seconds.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t_epoch).count());
          },
      .on_train_batch_end =
          [&](std::int64_t, const tf::models::Logs&) {
            if (tf::apps::interrupted()) model->set_stop_training(true);
          }});
  callbacks.insert(callbacks.begin(), timer);
  callbacks.push_back(terminate);
  if (!f.tensorboard.dir.empty())  // Keras's layout: DIR/train; weights as histograms and images every epoch
    callbacks.push_back(std::make_shared<tf::models::TensorBoard>(
        f.tensorboard.dir, tf::models::TensorBoardOptions{
                               .update_freq = f.tensorboard.update_freq, .histogram_freq = 1, .write_images = true}));
  callbacks.push_back(std::make_shared<LogLearningRate>());
  if (!f.csv_log.empty()) callbacks.push_back(std::make_shared<tf::models::CSVLogger>(f.csv_log));
  const tf::models::History history =
      model->fit(ds.x_train, ds.y_train,
                 {.batch_size = f.batch_size, .epochs = f.epochs, .verbose = tf::apps::fit_verbosity(f),
                  .callbacks = callbacks, .validation_split = f.validation_split, .initial_epoch = static_cast<int>(done_epochs), .seed = f.seed,
                  .replica_context = replicas});
  const std::string kept = last_saved.empty()
                               ? (manager ? "no checkpoint was saved yet" : "no checkpoint is kept without --checkpoint-dir")
                               : "kept " + last_saved + " (after epoch " + std::to_string(done_epochs) +
                                     "); continue with --resume";
  tf::apps::throw_if_interrupted("epoch " + std::to_string(current_epoch + 1), kept);
  if (terminate->terminated()) throw tf::apps::DivergedError("training diverged: " + terminate->reason() + "; " + kept);
  if (history.epoch.empty()) throw std::runtime_error("training ran no epoch");

  const tf::models::Logs test =
      model->evaluate(ds.x_test, ds.y_test, {.batch_size = 1000, .replica_context = replicas});
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  double train_seconds = 0;
  for (double t : epoch_seconds) train_seconds += t;
  if (chief)  // the result line: on stdout whatever --verbose and --log-level say
    std::printf("Test loss: %.4f - test accuracy: %.4f\n", test.at("loss"), test.at("accuracy"));
  spdlog::info("Wall time: {:.2f}s total, {:.2f}s per epoch on average ({} epochs, {} threads)", total,
               train_seconds / static_cast<double>(epoch_seconds.size()), epoch_seconds.size(),
               tf::kernels::num_threads());
  if (!f.metrics_out.empty() && chief) write_metrics(f.metrics_out, f, test, history, epoch_seconds, total, ranks);
  if (!f.save_model.empty() && chief) {
    if (f.save_model.ends_with(".h5") || f.save_model.ends_with(".keras")) tf::models::save_model(*model, f.save_model);
    else if (f.save_model.ends_with(".onnx")) tf::models::export_onnx(*model, f.save_model, {.opset = 17});
    else tf::models::export_tfjs(*model, f.save_model);
    spdlog::info("Saved the model to {}", f.save_model);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::shared_ptr<Replicas> replicas;
#ifdef TAPEFLOW_HAVE_DISTRIBUTE
  try {
    if (tf::distribute::launched_by_mpirun()) replicas = std::make_shared<Replicas>(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_classifier: error: %s\n", e.what());
    return 1;
  }
#endif
  Flags f;
  f.model = tf::apps::prescan_flag(argc, argv, "--model", f.model);
  std::vector<std::string> model_names;
  std::string model_help;
  for (const ModelDefaults& m : kModels) {
    model_names.push_back(m.name);
    const bool adam = std::string_view(m.optimizer) == "adam";
    model_help += fmt::format("; {}: {} (defaults: {} epochs, learning rate {:g}, {} schedule{})", m.name, m.what,
                              m.epochs, m.learning_rate, m.schedule,
                              adam ? "" : fmt::format(", optimizer {}, weight decay {:g}", m.optimizer, m.weight_decay));
    if (f.model == m.name) {  // --help shows them
      f.epochs = m.epochs, f.learning_rate = m.learning_rate, f.schedule = m.schedule;
      f.optimizer = m.optimizer, f.weight_decay = m.weight_decay;
    }
  }
  CLI::App app{"Train a tapeflow Fashion-MNIST classifier (softmax cross-entropy) and report test loss and "
               "accuracy: the MLP 784-256-BN-ReLU-256-BN-ReLU-10 (default), the Keras convnet (--model cnn), an "
               "LSTM over the image rows (--model lstm) or the Keras Vision Transformer (--model vit).",
               "train_classifier"};
  app.add_option("--model", f.model, "The classifier; --help after --model X shows X's defaults" + model_help)
      ->capture_default_str()->check(CLI::IsMember(model_names));
  app.add_option("--epochs", f.epochs, "Training epochs")->capture_default_str()->check(tf::apps::integer_at_least<int>(1));
  app.add_option("--batch-size", f.batch_size, "Examples per training step")
      ->capture_default_str()->check(tf::apps::integer_at_least<std::int64_t>(1));
  app.add_option("--optimizer", f.optimizer, "Optimizer")
      ->capture_default_str()->check(CLI::IsMember({"adam", "sgd", "rmsprop", "adagrad", "adamw"}));
  app.add_option("--weight-decay", f.weight_decay, "AdamW's decoupled weight decay (--optimizer adamw)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--learning-rate", f.learning_rate, "Initial learning rate")
      ->capture_default_str()->check(tf::apps::positive());
  app.add_option("--lr-schedule", f.schedule, "Learning-rate schedule over the whole run")
      ->capture_default_str()->check(CLI::IsMember({"cosine", "constant"}));
  app.add_option("--checkpoint-dir", f.checkpoint_dir,
                 "Save a checkpoint (model, optimizer, epoch, flags) to DIR after every epoch (keeps the newest 3)");
  app.add_option("--save-model", f.save_model,
                 "After training, save the whole model: PATH.h5 (Keras 2 HDF5) or PATH.keras (Keras 3; both load "
                 "with load_model, the predict app or Keras), PATH.onnx (ONNX, opset 17, for ONNX Runtime) or a "
                 "TensorFlow.js directory (model.json + shards, for tf.loadLayersModel)");
  app.add_option("--validation-split", f.validation_split,
                 "Hold out the last fraction of the training examples and report val_loss / val_accuracy per epoch "
                 "(Keras's validation_split)")
      ->capture_default_str()->check(tf::apps::in_range(0, 0.99));
  app.add_option("--csv-log", f.csv_log, "Write one CSV row per epoch (epoch, loss, accuracy, val_*) to FILE (CSVLogger)");
  app.add_flag("--resume", f.resume,
               "Continue from the newest readable checkpoint in --checkpoint-dir (same flags; --epochs may grow)")
      ->needs("--checkpoint-dir");
  app.add_option("--collective-timeout", f.collective_timeout,
                 "Under mpirun: seconds after which a collective that has not completed aborts the job")
      ->capture_default_str()->check(tf::apps::positive());
  app.add_flag("--no-shared-memory", f.no_shared_memory,
               "Under mpirun: reduce gradients over the network (MPI alltoall + allgather) only, not through a "
               "shared-memory window per machine (which needs twice the gradients' bytes of /dev/shm per rank: for "
               "small /dev/shm)");
  app.add_flag("--fp16-allreduce", f.fp16_allreduce,
               "Under mpirun: float32 gradients cross the network as IEEE half, half the bytes (Horovod's "
               "Compression.fp16; the sum on each machine stays float32)");
  tf::apps::add_common_flags(app, f);
  tf::apps::add_tensorboard_flags(app, f.tensorboard);
  if (auto code = tf::apps::parse_flags(app, argc, argv)) return *code;
  return tf::apps::run_app("train_classifier", [&] {
#ifdef TAPEFLOW_HAVE_DISTRIBUTE
    if (replicas) {
      replicas->set_timeout(f.collective_timeout);
      replicas->set_shared_memory(!f.no_shared_memory);
      replicas->set_compression(f.fp16_allreduce ? tf::distribute::Compression::kFp16
                                                 : tf::distribute::Compression::kNone);
    }
    try {
      return run(f, replicas);
    } catch (const std::exception& e) {  // the other ranks would wait forever
      if (replicas && replicas->size() > 1) replicas->abort(1, std::string("train_classifier: error: ") + e.what());
      throw;
    }
#else
    return run(f, replicas);
#endif
  });
}
