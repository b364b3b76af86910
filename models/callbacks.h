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
  // The model the hooks act on; fit sets it before on_train_begin and clears it (null) after
  // on_train_end.
  void set_model(Model* model) { model_ = model; }
  // Called once when fit starts, before the first epoch; `logs` is empty.
  virtual void on_train_begin(const Logs& logs) {}
  // Called once when fit ends (also after an early stop); `logs` holds the last epoch's logs
  // (empty if no epoch completed).
  virtual void on_train_end(const Logs& logs) {}
  // Called at the start of each epoch (counted from 0, from FitOptions::initial_epoch), before
  // its first batch; `logs` is empty.
  virtual void on_epoch_begin(int epoch, const Logs& logs) {}
  // `logs` may be amended (LearningRateScheduler adds "learning_rate"); History sees the result.
  virtual void on_epoch_end(int epoch, Logs& logs) {}
  // Called before each train_step; `batch` counts from 0 within the epoch, `logs` is empty.
  virtual void on_train_batch_begin(std::int64_t batch, const Logs& logs) {}
  // Called after each train_step with the logs it returned (Model's own: the running means of
  // "loss" and the metrics over the epoch so far).
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
  // Clears epoch and history (a History records one fit call).
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  std::vector<int> epoch;                               // epoch indices that completed
  std::map<std::string, std::vector<double>> history;   // name -> one value per completed epoch
  // history.at(name). Errors: std::out_of_range naming the key.
  const std::vector<double>& operator[](const std::string& name) const;
};

// "min" / "max" / "auto" (auto: max for names containing "acc", else min), as Keras.
enum class MonitorMode { kAuto, kMin, kMax };

// Keyword arguments of keras.callbacks.EarlyStopping, with Keras's defaults.
struct EarlyStoppingOptions {
  // The epoch-log entry watched ("val_loss", "val_accuracy", ...; "val_*" needs validation data).
  std::string monitor = "val_loss";
  double min_delta = 0.0;            // a change of at most |min_delta| does not count as improvement
  int patience = 0;                  // epochs without improvement before stopping; >= 0
  MonitorMode mode = MonitorMode::kAuto;  // whether smaller or larger is better
  // A value the monitor must beat: until it does, the wait counter is not reset (unset: none).
  std::optional<double> baseline = std::nullopt;
  bool restore_best_weights = false;  // on stopping, assign back the variables of the best epoch
  int start_from_epoch = 0;           // epochs before this one are not watched (a warm-up)
};

// Stops training when `monitor` has not improved by more than min_delta for `patience` epochs.
// Facts:  restore_best_weights copies the model's variables at the best epoch and assigns them back
//         when it stops (or at the end of training if the best epoch was not the last).
//         A monitor missing from the logs logs a warning and is ignored (as Keras).
// Ref:    keras.callbacks.EarlyStopping
class EarlyStopping : public Callback {
 public:
  // Errors: std::invalid_argument for patience < 0.
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  // Resets the wait counter, the best value and epoch, and the saved weights (one object can
  // serve several fit calls).
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  // Logs "Epoch N: early stopping" (N from 1) if it stopped training.
  void on_train_end(const Logs& logs) override;
  // The epoch (from 0) training stopped at; 0 if it ran to the end.
  int stopped_epoch() const { return stopped_epoch_; }
  // The epoch (from 0) of the best monitored value so far.
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
  // Writes to `filename`, fields separated by `separator`; append: add rows to an existing file
  // (the header is written only if the file is empty), else truncate it (Keras's defaults).
  explicit CSVLogger(std::string filename, char separator = ',', bool append = false);
  // Opens the file. Errors: std::runtime_error naming the file if it cannot be opened.
  void on_train_begin(const Logs& logs) override;
  // Writes the row "epoch,<values>" (the header first, from the first epoch's keys; a key missing
  // later is written as NA). Errors: std::runtime_error naming the file if the write fails.
  void on_epoch_end(int epoch, Logs& logs) override;
  // Closes the file.
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
  // schedule(epoch from 0, current learning rate) -> the epoch's learning rate; verbose: log
  // "Epoch N: LearningRateScheduler setting learning rate to X." each epoch.
  // Errors: std::invalid_argument for an empty schedule.
  explicit LearningRateScheduler(std::function<double(int epoch, double lr)> schedule, bool verbose = false);
  // Sets the optimizer's learning rate to schedule(epoch, lr).
  // Errors: std::logic_error without an optimizer; std::invalid_argument naming the epoch if the
  // schedule returns a non-finite value.
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  std::function<double(int, double)> schedule_;
  bool verbose_;
};

// Options of CheckpointHook (Keras's ModelCheckpoint arguments, the saving itself left to `save`).
struct CheckpointHookOptions {
  // Called with the epoch (from 0) and its logs whenever a checkpoint is due.
  std::function<void(int epoch, const Logs& logs)> save = nullptr;
  int every_n_epochs = 1;             // a checkpoint is due after epochs n, 2n, ... (counted from 1); >= 1
  // The epoch-log entry save_best_only compares (unused without it).
  std::string monitor = "val_loss";
  // Save a due checkpoint only if `monitor` beats the best value saved so far (the first one always
  // saves; a monitor missing from the logs skips the save with a warning).
  bool save_best_only = false;
  MonitorMode mode = MonitorMode::kAuto;  // with save_best_only: whether smaller or larger is better
};

// The checkpoint hook: calls options.save every `every_n_epochs` epochs (or only when `monitor`
// improves, with save_best_only). A CheckpointManager plugs its save into it.
// Errors:  std::invalid_argument for a missing save function or every_n_epochs < 1.
// Ref:     keras.callbacks.ModelCheckpoint (save_freq="epoch")
class CheckpointHook : public Callback {
 public:
  // Errors: std::invalid_argument for a missing save function or every_n_epochs < 1.
  explicit CheckpointHook(CheckpointHookOptions options);
  void on_epoch_end(int epoch, Logs& logs) override;
  // How many times save was called.
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
  // Clears terminated() and reason() for a new fit.
  void on_train_begin(const Logs& logs) override;
  // Records the epoch for the message.
  void on_epoch_begin(int epoch, const Logs& logs) override { epoch_ = epoch; }
  // Stops training (Model::set_stop_training) if the batch's "loss" is NaN or infinite.
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  // True once a non-finite loss stopped training in this fit.
  bool terminated() const { return terminated_; }
  // "loss nan at epoch 3, batch 17" once terminated(), else "".
  const std::string& reason() const { return reason_; }

 private:
  int epoch_ = 0;
  bool terminated_ = false;
  std::string reason_;
};

// Options of ProgbarLogger (fit fills them from FitOptions::verbose and the epoch's step count).
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
  // Errors: std::invalid_argument for verbose outside 1..2.
  explicit ProgbarLogger(ProgbarLoggerOptions options);
  // verbose 1: prints "Epoch e/E" (e from 1); starts the epoch's Progbar.
  void on_epoch_begin(int epoch, const Logs& logs) override;
  // Advances the bar to batch + 1 steps with the running logs.
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  ProgbarLoggerOptions options_;
  std::optional<Progbar> bar_;
  std::int64_t seen_ = 0;
};

// Calls the given functions (any may be empty). Ref: keras.callbacks.LambdaCallback
struct LambdaCallbackOptions {
  std::function<void(int, const Logs&)> on_epoch_begin = nullptr;  // (epoch from 0, empty logs)
  std::function<void(int, const Logs&)> on_epoch_end = nullptr;    // (epoch from 0, the epoch's logs)
  // (batch from 0 within the epoch, the running logs)
  std::function<void(std::int64_t, const Logs&)> on_train_batch_end = nullptr;
};
// A callback made of the functions in LambdaCallbackOptions; an empty function is skipped.
// Ref: keras.callbacks.LambdaCallback
class LambdaCallback : public Callback {
 public:
  // Keeps the functions to call.
  explicit LambdaCallback(LambdaCallbackOptions options) : options_(std::move(options)) {}
  // Calls options.on_epoch_begin, if set.
  void on_epoch_begin(int epoch, const Logs& logs) override {
    if (options_.on_epoch_begin) options_.on_epoch_begin(epoch, logs);
  }
  // Calls options.on_epoch_end, if set.
  void on_epoch_end(int epoch, Logs& logs) override {
    if (options_.on_epoch_end) options_.on_epoch_end(epoch, logs);
  }
  // Calls options.on_train_batch_end, if set.
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override {
    if (options_.on_train_batch_end) options_.on_train_batch_end(batch, logs);
  }

 private:
  LambdaCallbackOptions options_;
};

// True if `monitor` is maximised under `mode` (auto: names containing "acc" or "auc").
bool monitor_maximizes(const std::string& monitor, MonitorMode mode);

}  // namespace tapeflow::models
