// ReduceLROnPlateau: multiplies the learning rate by `factor` when `monitor` has stopped improving.
#pragma once

#include <limits>
#include <string>

#include "models/callbacks.h"

namespace tapeflow::models {

// Keyword arguments of keras.callbacks.ReduceLROnPlateau, with Keras's defaults.
struct ReduceLROnPlateauOptions {
  // The epoch-log entry watched ("val_*" needs validation data).
  std::string monitor = "val_loss";
  double factor = 0.1;     // new lr = max(lr * factor, min_lr)
  int patience = 10;       // epochs without improvement before a reduction
  int verbose = 0;         // 1: log each reduction (spdlog info)
  MonitorMode mode = MonitorMode::kAuto;  // whether smaller or larger is better
  double min_delta = 1e-4;  // an improvement must beat the best by more than this
  int cooldown = 0;         // epochs after a reduction during which no epoch counts as waiting
  double min_lr = 0.0;      // the rate is never reduced below this (and not at all once at it); >= 0
};

// Keras's semantics, epoch by epoch: the epoch logs get "learning_rate" (the rate the epoch ran
// with); a monitored value that beats the best by more than min_delta becomes the best and resets
// the wait; otherwise, outside cooldown, the wait grows and at `patience` the rate is reduced (if
// above min_lr), the wait resets and the cooldown of `cooldown` epochs starts (each decrements it
// and zeroes the wait; the epoch that brings it to 0 already counts towards the next patience).
// A monitor missing from the logs logs a warning and changes nothing.
// Errors:   std::invalid_argument for factor >= 1 or <= 0, patience or cooldown < 0, min_lr < 0;
//           std::logic_error at the first epoch if the optimizer's learning rate is a schedule
//           (Keras: a LearningRateSchedule is not settable) or the model has no optimizer.
// Ref:      keras.callbacks.ReduceLROnPlateau (keras/src/callbacks/reduce_lr_on_plateau.py)
class ReduceLROnPlateau : public Callback {
 public:
  // Errors: std::invalid_argument for factor outside (0, 1), patience or cooldown < 0, min_lr < 0.
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});
  // Resets the best value, the wait and cooldown counters and reductions() (as Keras's _reset).
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  // How many times the rate was reduced in this fit.
  int reductions() const { return reductions_; }

 private:
  ReduceLROnPlateauOptions options_;
  bool maximize_ = false;
  double best_ = std::numeric_limits<double>::infinity();
  int wait_ = 0, cooldown_counter_ = 0, reductions_ = 0;
};

}  // namespace tapeflow::models
