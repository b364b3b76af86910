// ModelCheckpoint: saves the model (or its weights) after epochs, every epoch or only the best.
#pragma once

#include <memory>
#include <string>

#include "models/callbacks.h"

namespace tapeflow::models {

// Keyword arguments of keras.callbacks.ModelCheckpoint (save_freq "epoch"), with Keras's defaults.
struct ModelCheckpointOptions {
  // Where to save; "{epoch}" and "{epoch:0Nd}" become the epoch number from 1 ("ckpt-{epoch:02d}.h5").
  std::string filepath;
  // The epoch-log entry save_best_only compares (Keras's default "val_loss"; unused without it).
  std::string monitor = "val_loss";
  int verbose = 0;                   // 1: log each save (spdlog info)
  bool save_best_only = false;       // save only when `monitor` beats the best seen so far
  bool save_weights_only = false;    // save_weights (models/saving.h) instead of save_model
  MonitorMode mode = MonitorMode::kAuto;  // with save_best_only: whether smaller or larger is better
};

// Keras's semantics (save_freq "epoch"): at each epoch end the model is saved to filepath; with
// save_best_only only when the monitored value is strictly better than every earlier one (min or
// max by `mode`; "auto" maximizes names containing "acc"). The best is kept across fit calls, as
// Keras keeps it on the callback. A monitor missing from the logs logs a warning and saves nothing.
// Built on CheckpointHook (which decides when), so a CheckpointManager and this agree on "best".
// Errors:   std::invalid_argument for an empty filepath; what save_model / save_weights throw.
// Ref:      keras.callbacks.ModelCheckpoint (keras/src/callbacks/model_checkpoint.py)
class ModelCheckpoint : public Callback {
 public:
  // Errors: std::invalid_argument for an empty filepath.
  explicit ModelCheckpoint(ModelCheckpointOptions options);
  void on_epoch_end(int epoch, Logs& logs) override;
  // The path for an epoch counted from 0 (filepath with its placeholders filled).
  std::string path_for(int epoch) const;
  // How many files were written (over every fit call that used this callback).
  int saves() const { return hook_->saves(); }
  // The file written last ("" before the first save).
  const std::string& last_saved() const { return last_saved_; }

 private:
  ModelCheckpointOptions options_;
  std::unique_ptr<CheckpointHook> hook_;
  std::string last_saved_;
};

}  // namespace tapeflow::models
