#include "models/callbacks/tensorboard.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "models/io/event_file_writer.h"
#include "models/model.h"
#include "optimizers/optimizer.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::models {
namespace {

// Keras 3's weight.path: the variable's name without TF's ":0".
std::string weight_path(const std::string& name) {
  const auto colon = name.rfind(':');
  return colon == std::string::npos ? name : name.substr(0, colon);
}

// tf.summary.image's float -> uint8: clip to [0, 1], times 255.5, truncated.
std::uint8_t to_pixel(double v) { return static_cast<std::uint8_t>(std::clamp(v, 0.0, 1.0) * 255.5); }

}  // namespace

TensorBoard::TensorBoard(std::string log_dir, TensorBoardOptions options)
    : log_dir_(std::move(log_dir)), options_(options) {
  if (options_.update_freq < 0)
    throw std::invalid_argument("TensorBoard: update_freq must be >= 0 (0: per epoch), got " +
                                std::to_string(options_.update_freq));
  if (options_.histogram_freq < 0)
    throw std::invalid_argument("TensorBoard: histogram_freq must be >= 0, got " +
                                std::to_string(options_.histogram_freq));
}

TensorBoard::~TensorBoard() = default;

void TensorBoard::on_train_begin(const Logs&) {
  global_train_batch_ = 0;
  validation_.reset();
  train_ = std::make_unique<io::EventFileWriter>((std::filesystem::path(log_dir_) / "train").string());
}

void TensorBoard::on_train_batch_end(std::int64_t, const Logs& logs) {
  ++global_train_batch_;
  if (options_.update_freq == 0 || global_train_batch_ % options_.update_freq != 0 || !train_) return;
  for (const auto& [name, value] : logs) train_->add_scalar("batch_" + name, value, global_train_batch_);
}

void TensorBoard::on_epoch_end(int epoch, Logs& logs) {
  if (!train_) return;
  Logs train_logs, val_logs;
  for (const auto& [name, value] : logs) {
    if (name.rfind("val_", 0) == 0)
      val_logs.set(name.substr(4), value);
    else
      train_logs.set(name, value);
  }
  const auto& optimizer = model().optimizer();
  if (optimizer) train_logs.set("learning_rate", optimizer->current_learning_rate());
  for (const auto& [name, value] : train_logs) train_->add_scalar("epoch_" + name, value, epoch);
  if (!val_logs.empty()) {
    if (!validation_)
      validation_ = std::make_unique<io::EventFileWriter>((std::filesystem::path(log_dir_) / "validation").string());
    for (const auto& [name, value] : val_logs) validation_->add_scalar("epoch_" + name, value, epoch);
    if (optimizer)
      for (const auto& [name, value] : val_logs)
        validation_->add_scalar("evaluation_" + name + "_vs_iterations", value, optimizer->iterations());
    validation_->flush();
  }
  if (options_.histogram_freq > 0 && epoch % options_.histogram_freq == 0) log_weights(epoch);
  train_->flush();
}

void TensorBoard::log_weights(int epoch) {
  for (const auto& layer : model().layers())
    for (const Variable& weight : layer->weights()) {
      const std::string path = weight_path(weight.name());
      const Tensor value = cast(weight.value(), DType::kFloat64);
      const std::vector<double> v = value.to_vector<double>();
      if (v.empty()) continue;
      train_->add_histogram(path + "/histogram", v, epoch);
      if (!options_.write_images) continue;
      const Tensor squeezed = squeeze(value);
      if (squeezed.rank() != 1 && squeezed.rank() != 2) continue;
      std::int64_t rows = squeezed.shape()[0];
      std::int64_t cols = squeezed.rank() == 1 ? 1 : squeezed.shape()[1];
      const bool transpose = squeezed.rank() == 2 && rows > cols;
      if (transpose) std::swap(rows, cols);
      std::vector<std::uint8_t> pixels(static_cast<std::size_t>(rows * cols));
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          pixels[static_cast<std::size_t>(r * cols + c)] =
              to_pixel(v[static_cast<std::size_t>(transpose ? c * rows + r : r * cols + c)]);
      train_->add_image(path + "/image", io::encode_png(pixels, static_cast<int>(rows), static_cast<int>(cols), 1),
                        static_cast<int>(rows), static_cast<int>(cols), 1, epoch);
    }
}

void TensorBoard::on_train_end(const Logs&) {
  if (train_) train_->flush();
  if (validation_) validation_->flush();
  train_.reset();
  validation_.reset();
}

}  // namespace tapeflow::models
