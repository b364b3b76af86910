// The TensorBoard callback: training curves, weight histograms and weight images as TensorBoard
// event files (models/io/event_file_writer.h), laid out and named as Keras 3's callback does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "models/callbacks.h"

namespace tapeflow::io {
class EventFileWriter;
}

namespace tapeflow::models {

// Keyword arguments of keras.callbacks.TensorBoard that tapeflow supports (Keras's defaults).
struct TensorBoardOptions {
  // 0 ("epoch"): scalars at epoch ends only. N > 0: also batch_<name> scalars every N batches
  // (counted over the whole fit call from 1; Keras's update_freq="batch" is 1).
  std::int64_t update_freq = 0;
  // Every this many epochs (from epoch 0; 0: never), a histogram of every weight of every layer.
  int histogram_freq = 0;
  // With histograms, also each 1-D and 2-D weight as a grayscale image (others are skipped, as
  // Keras skips most of them).
  bool write_images = false;
};

// Writes event files for TensorBoard (`tensorboard --logdir LOG_DIR`) during fit.
// Layout:  LOG_DIR/train and LOG_DIR/validation, one event file each per fit call (validation only
//          when fit has validation data).
// Tags:    train: epoch_<name> for each epoch log without "val_" (loss, metrics) and
//          epoch_learning_rate (the optimizer's current rate), at step = epoch (from 0); with
//          update_freq N, batch_<name> for each batch log at step = global batch (from 1) when it is
//          a multiple of N; with histogram_freq, <weight path>/histogram (and <weight path>/image
//          with write_images) at step = epoch, the path being the weight's name without ":0"
//          ("dense/kernel"). validation: epoch_<name> for each "val_<name>" log at step = epoch,
//          and evaluation_<name>_vs_iterations at step = the optimizer's iterations.
// Images:  float weights are clipped to [0, 1] and scaled by 255.5, truncated (tf.summary.image's
//          conversion); a 1-D weight of n is an n x 1 image, a 2-D one [a, b] is a x b, transposed
//          when a > b (Keras).
// Errors:  std::invalid_argument for update_freq < 0 or histogram_freq < 0 (constructor);
//          std::runtime_error naming the directory when LOG_DIR/train or LOG_DIR/validation cannot
//          be made or written (on_train_begin / on_epoch_end).
// Ref:     keras.callbacks.TensorBoard (Keras 3; no graph, profiler or embeddings)
class TensorBoard : public Callback {
 public:
  // Event files go under log_dir (Keras's default "logs"); nothing is written before fit starts.
  // Errors: std::invalid_argument for update_freq < 0 or histogram_freq < 0.
  explicit TensorBoard(std::string log_dir = "logs", TensorBoardOptions options = {});
  ~TensorBoard() override;
  // Opens a new event file under LOG_DIR/train and restarts the global batch count.
  // Errors: std::runtime_error naming the directory if it cannot be made or written.
  void on_train_begin(const Logs& logs) override;
  // Counts the batch; with update_freq N, every N-th batch of the fit call writes batch_<name>.
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  // Writes the epoch scalars (and histograms / images when due) and flushes (see Tags above).
  // Errors: std::runtime_error naming the directory if LOG_DIR/validation cannot be made or written.
  void on_epoch_end(int epoch, Logs& logs) override;
  // Flushes and closes the event files.
  void on_train_end(const Logs& logs) override;

 private:
  void log_weights(int epoch);
  std::string log_dir_;
  TensorBoardOptions options_;
  std::unique_ptr<io::EventFileWriter> train_, validation_;
  std::int64_t global_train_batch_ = 0;
};

}  // namespace tapeflow::models
