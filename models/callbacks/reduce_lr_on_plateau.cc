#include "models/callbacks/reduce_lr_on_plateau.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "models/model.h"
#include "tape/runtime/logging.h"

namespace tapeflow::models {

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options) : options_(std::move(options)) {
  if (!(options_.factor > 0 && options_.factor < 1))
    throw std::invalid_argument("ReduceLROnPlateau: factor must be in (0, 1), got " + std::to_string(options_.factor));
  if (options_.patience < 0 || options_.cooldown < 0)
    throw std::invalid_argument("ReduceLROnPlateau: patience and cooldown must be >= 0, got " +
                                std::to_string(options_.patience) + " and " + std::to_string(options_.cooldown));
  if (!(options_.min_lr >= 0))
    throw std::invalid_argument("ReduceLROnPlateau: min_lr must be >= 0, got " + std::to_string(options_.min_lr));
  maximize_ = monitor_maximizes(options_.monitor, options_.mode);
}

void ReduceLROnPlateau::on_train_begin(const Logs&) {
  best_ = maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  wait_ = cooldown_counter_ = reductions_ = 0;
}

void ReduceLROnPlateau::on_epoch_end(int epoch, Logs& logs) {
  const auto& optimizer = model().optimizer();
  if (!optimizer) throw std::logic_error("ReduceLROnPlateau: the model has no optimizer (compile it first)");
  if (optimizer->learning_rate().is_schedule())
    throw std::logic_error("ReduceLROnPlateau: the optimizer's learning rate is a schedule, which cannot be "
                           "reduced; give the optimizer a constant learning rate");
  const double lr = optimizer->current_learning_rate();
  logs.set("learning_rate", lr);
  const std::optional<double> current = logs.get(options_.monitor);
  if (!current) {
    logger()->warn("ReduceLROnPlateau: metric '{}' is not available; available metrics are: {}", options_.monitor,
                   logs.keys_string());
    return;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    wait_ = 0;
  }
  const bool improved = maximize_ ? *current > best_ + options_.min_delta : *current < best_ - options_.min_delta;
  if (improved) {
    best_ = *current;
    wait_ = 0;
  } else if (cooldown_counter_ == 0 && ++wait_ >= options_.patience && lr > options_.min_lr) {  // Keras asks
    // in_cooldown() again after the decrement: the last cooldown epoch already counts as waiting.
    const double new_lr = std::max(lr * options_.factor, options_.min_lr);
    optimizer->set_learning_rate(new_lr);
    if (options_.verbose > 0)
      logger()->info("Epoch {}: ReduceLROnPlateau reducing learning rate to {}", epoch + 1, new_lr);
    cooldown_counter_ = options_.cooldown;
    wait_ = 0;
    ++reductions_;
  }
}

}  // namespace tapeflow::models
