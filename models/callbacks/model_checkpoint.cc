#include "models/callbacks/model_checkpoint.h"

#include <spdlog/spdlog.h>

#include <regex>
#include <stdexcept>

#include "models/model.h"
#include "models/saving.h"
#include "models/saving_model.h"
#include "tape/runtime/logging.h"

namespace tapeflow::models {

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options) : options_(std::move(options)) {
  if (options_.filepath.empty()) throw std::invalid_argument("ModelCheckpoint: filepath is empty");
  hook_ = std::make_unique<CheckpointHook>(CheckpointHookOptions{
      .save =
          [this](int epoch, const Logs& logs) {
            const std::string path = path_for(epoch);
            if (options_.save_weights_only) save_weights(model(), path);
            else save_model(model(), path);
            last_saved_ = path;
            if (options_.verbose > 0) {
              const std::optional<double> value = logs.get(options_.monitor);
              if (options_.save_best_only && value)
                logger()->info("Epoch {}: {} improved to {:.5f}, saving model to {}", epoch + 1, options_.monitor,
                               *value, path);
              else
                logger()->info("Epoch {}: saving model to {}", epoch + 1, path);
            }
          },
      .monitor = options_.monitor,
      .save_best_only = options_.save_best_only,
      .mode = options_.mode});
}

std::string ModelCheckpoint::path_for(int epoch) const {
  const std::string number = std::to_string(epoch + 1);
  std::string out;
  const std::regex placeholder(R"(\{epoch(?::0?(\d+)d)?\})");
  auto begin = std::sregex_iterator(options_.filepath.begin(), options_.filepath.end(), placeholder);
  std::size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    out += options_.filepath.substr(last, static_cast<std::size_t>(it->position()) - last);
    const std::size_t width = (*it)[1].matched ? std::stoul((*it)[1].str()) : 0;
    out += std::string(width > number.size() ? width - number.size() : 0, '0') + number;
    last = static_cast<std::size_t>(it->position() + it->length());
  }
  return out + options_.filepath.substr(last);
}

void ModelCheckpoint::on_epoch_end(int epoch, Logs& logs) { hook_->on_epoch_end(epoch, logs); }

}  // namespace tapeflow::models
