// Callbacks: hooks into Model::fit (History, EarlyStopping, CSVLogger, LearningRateScheduler,
// CheckpointHook, TerminateOnNaN, ProgbarLogger).
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/logs.h"
#include "models/progbar.h"
#include "tape/core/tensor.h"

namespace tapeflow::models {

class Model;

// Base class: every hook does nothing by default. fit calls set_model first, then
// on_train_begin, per epoch on_epoch_begin / on_train_batch_begin / on_train_batch_end /
// on_epoch_end (epoch counted from 0; logs hold "loss", metrics and "val_*"), and on_train_end.
// A callback stops training with model().set_stop_training(true).
// Ref: keras.callbacks.Callback
class Callback {
 public:
  virtual ~Callback() = default;
  void set_model(Model* model) { model_ = model; }
  virtual void on_train_begin(const Logs& logs) {}
  virtual void on_train_end(const Logs& logs) {}
  virtual void on_epoch_begin(int epoch, const Logs& logs) {}
  // `logs` may be amended (LearningRateScheduler adds "learning_rate"); History sees the result.
  virtual void on_epoch_end(int epoch, Logs& logs) {}
  virtual void on_train_batch_begin(std::int64_t batch, const Logs& logs) {}
  virtual void on_train_batch_end(std::int64_t batch, const Logs& logs) {}

 protected:
  // The model being trained. Errors: std::logic_error outside fit.
  Model& model() const;

 private:
  Model* model_ = nullptr;
};

// The per-epoch logs of one fit call; fit returns it.
// Ref: keras.callbacks.History
class History : public Callback {
 public:
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  std::vector<int> epoch;                               // epoch indices that completed
  std::map<std::string, std::vector<double>> history;   // name -> one value per completed epoch
  // history.at(name). Errors: std::out_of_range naming the key.
  const std::vector<double>& operator[](const std::string& name) const;
};

// "min" / "max" / "auto" (auto: max for names containing "acc", else min), as Keras.
enum class MonitorMode { kAuto, kMin, kMax };

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0.0;
  int patience = 0;
  MonitorMode mode = MonitorMode::kAuto;
  std::optional<double> baseline = std::nullopt;
  bool restore_best_weights = false;
  int start_from_epoch = 0;
};

// Stops training when `monitor` has not improved by more than min_delta for `patience` epochs.
// Facts:  restore_best_weights copies the model's variables at the best epoch and assigns them back
//         when it stops (or at the end of training if the best epoch was not the last).
//         A monitor missing from the logs logs a warning and is ignored (as Keras).
// Ref:    keras.callbacks.EarlyStopping
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  // The epoch training stopped at (0 if it ran to the end), and the best epoch seen.
  int stopped_epoch() const { return stopped_epoch_; }
  int best_epoch() const { return best_epoch_; }

 private:
  bool improved(double value, double reference) const;
  EarlyStoppingOptions options_;
  bool maximize_ = false;
  int wait_ = 0, stopped_epoch_ = 0, best_epoch_ = 0;
  std::optional<double> best_;
  std::vector<Tensor> best_weights_;
};

// Streams the epoch logs to a CSV file: header "epoch,<keys sorted>", one row per epoch, flushed.
// Errors: std::runtime_error naming the file if it cannot be opened (at on_train_begin).
// Ref:    keras.callbacks.CSVLogger
class CSVLogger : public Callback {
 public:
  explicit CSVLogger(std::string filename, char separator = ',', bool append = false);
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_end(const Logs& logs) override;

 private:
  std::string filename_;
  char separator_;
  bool append_;
  std::ofstream out_;
  std::vector<std::string> keys_;
};

// Sets the optimizer's learning rate at each epoch start to schedule(epoch, current lr) and adds
// "learning_rate" to the epoch logs.
// Errors: std::logic_error if the model has no optimizer (not compiled).
// Ref:    keras.callbacks.LearningRateScheduler
class LearningRateScheduler : public Callback {
 public:
  explicit LearningRateScheduler(std::function<double(int epoch, double lr)> schedule, bool verbose = false);
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  std::function<double(int, double)> schedule_;
  bool verbose_;
};

struct CheckpointHookOptions {
  // Called with the epoch (from 0) and its logs whenever a checkpoint is due.
  std::function<void(int epoch, const Logs& logs)> save = nullptr;
  int every_n_epochs = 1;
  std::string monitor = "val_loss";  // used only with save_best_only
  bool save_best_only = false;
  MonitorMode mode = MonitorMode::kAuto;
};

// The checkpoint hook: calls options.save every `every_n_epochs` epochs (or only when `monitor`
// improves, with save_best_only). A CheckpointManager plugs its save into it.
// Errors:  std::invalid_argument for a missing save function or every_n_epochs < 1.
// Ref:     keras.callbacks.ModelCheckpoint (save_freq="epoch")
class CheckpointHook : public Callback {
 public:
  explicit CheckpointHook(CheckpointHookOptions options);
  void on_epoch_end(int epoch, Logs& logs) override;
  int saves() const { return saves_; }

 private:
  CheckpointHookOptions options_;
  std::optional<double> best_;
  int saves_ = 0;
};

// Stops training at the first batch whose "loss" is NaN or infinite, logging an error that names
// the epoch (from 1) and the batch (from 1). fit still calls on_epoch_end for that epoch (as Keras),
// so checkpoint savers should consult terminated() and not save the diverged weights.
// Ref:    keras.callbacks.TerminateOnNaN
class TerminateOnNaN : public Callback {
 public:
  void on_train_begin(const Logs& logs) override;
  void on_epoch_begin(int epoch, const Logs& logs) override { epoch_ = epoch; }
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  bool terminated() const { return terminated_; }
  // "loss nan at epoch 3, batch 17" once terminated(), else "".
  const std::string& reason() const { return reason_; }

 private:
  int epoch_ = 0;
  bool terminated_ = false;
  std::string reason_;
};

struct ProgbarLoggerOptions {
  int verbose = 1;            // 1: "Epoch e/E" and a progress bar per epoch; 2: a log line every log_interval s
  int epochs = 1;             // for "Epoch e/E"
  std::int64_t steps = -1;    // batches per epoch (-1: unknown)
  double log_interval = 5.0;  // verbose 2
  std::FILE* out = stdout;    // verbose 1
  std::optional<bool> dynamic_display = std::nullopt;  // verbose 1: see ProgbarOptions (unset: out is a terminal)
};

// Prints training progress during each epoch through a Progbar; fit adds one when verbose > 0.
// verbose 1 ends each epoch's bar with the epoch's logs (val_* included), so fit then logs no
// separate epoch line; verbose 2 adds a line every log_interval seconds to fit's line per epoch.
// Errors: std::invalid_argument for verbose outside 1..2.
// Ref:    keras.callbacks.ProgbarLogger
class ProgbarLogger : public Callback {
 public:
  explicit ProgbarLogger(ProgbarLoggerOptions options);
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  ProgbarLoggerOptions options_;
  std::optional<Progbar> bar_;
  std::int64_t seen_ = 0;
};

// Calls the given functions (any may be empty). Ref: keras.callbacks.LambdaCallback
struct LambdaCallbackOptions {
  std::function<void(int, const Logs&)> on_epoch_begin = nullptr;
  std::function<void(int, const Logs&)> on_epoch_end = nullptr;
  std::function<void(std::int64_t, const Logs&)> on_train_batch_end = nullptr;
};
class LambdaCallback : public Callback {
 public:
  explicit LambdaCallback(LambdaCallbackOptions options) : options_(std::move(options)) {}
  void on_epoch_begin(int epoch, const Logs& logs) override {
    if (options_.on_epoch_begin) options_.on_epoch_begin(epoch, logs);
  }
  void on_epoch_end(int epoch, Logs& logs) override {
    if (options_.on_epoch_end) options_.on_epoch_end(epoch, logs);
  }
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override {
    if (options_.on_train_batch_end) options_.on_train_batch_end(batch, logs);
  }

 private:
  LambdaCallbackOptions options_;
};

// True if `monitor` is maximised under `mode` (auto: names containing "acc" or "auc").
bool monitor_maximizes(const std::string& monitor, MonitorMode mode);

}  // namespace tapeflow::models
