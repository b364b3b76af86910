#include "models/callbacks.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "models/model.h"
#include "tape/runtime/logging.h"

namespace tapeflow::models {

double Logs::at(const std::string& name) const {
  if (auto v = get(name)) return *v;
  throw std::out_of_range("Logs: no entry '" + name + "' (have: " + keys_string() + ")");
}

std::string Logs::keys_string() const {
  std::string s;
  for (const auto& [k, v] : items_) s += (s.empty() ? "" : ", ") + k;
  return s;
}

Model& Callback::model() const {
  if (!model_) throw std::logic_error("Callback: no model set (callbacks run inside Model::fit)");
  return *model_;
}

bool monitor_maximizes(const std::string& monitor, MonitorMode mode) {
  if (mode != MonitorMode::kAuto) return mode == MonitorMode::kMax;
  return monitor.find("acc") != std::string::npos || monitor.find("auc") != std::string::npos;
}

// ---- History ----------------------------------------------------------------------------------
void History::on_train_begin(const Logs&) {
  epoch.clear();
  history.clear();
}

void History::on_epoch_end(int e, Logs& logs) {
  epoch.push_back(e);
  for (const auto& [k, v] : logs) history[k].push_back(v);
}

const std::vector<double>& History::operator[](const std::string& name) const {
  auto it = history.find(name);
  if (it == history.end()) {
    std::string keys;
    for (const auto& [k, v] : history) keys += (keys.empty() ? "" : ", ") + k;
    throw std::out_of_range("History: no entry '" + name + "' (have: " + keys + ")");
  }
  return it->second;
}

// ---- EarlyStopping ------------------------------------------------------------------------------
EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : options_(std::move(options)) {
  if (options_.patience < 0)
    throw std::invalid_argument("EarlyStopping: patience must be >= 0, got " + std::to_string(options_.patience));
  maximize_ = monitor_maximizes(options_.monitor, options_.mode);
}

bool EarlyStopping::improved(double value, double reference) const {
  // Keras: monitor_op(current - min_delta, reference) with min_delta signed by the direction.
  const double delta = std::abs(options_.min_delta);
  return maximize_ ? value - delta > reference : value + delta < reference;
}

void EarlyStopping::on_train_begin(const Logs&) {
  wait_ = stopped_epoch_ = best_epoch_ = 0;
  best_.reset();
  best_weights_.clear();
}

void EarlyStopping::on_epoch_end(int epoch, Logs& logs) {
  const std::optional<double> value = logs.get(options_.monitor);
  if (!value) {
    logger()->warn("EarlyStopping: metric '{}' is not available; available metrics are: {}", options_.monitor,
                   logs.keys_string());
    return;
  }
  if (epoch < options_.start_from_epoch) return;
  if (options_.restore_best_weights && best_weights_.empty()) {
    for (const Variable& v : model().variables()) best_weights_.push_back(v.value());
  }
  ++wait_;
  const double reference = best_ ? *best_
                                 : (maximize_ ? -std::numeric_limits<double>::infinity()
                                              : std::numeric_limits<double>::infinity());
  if (improved(*value, reference)) {
    best_ = *value;
    best_epoch_ = epoch;
    if (options_.restore_best_weights) {
      best_weights_.clear();
      for (const Variable& v : model().variables()) best_weights_.push_back(v.value());
    }
    // Keras only resets the patience counter when the baseline (if any) is beaten.
    if (!options_.baseline || improved(*value, *options_.baseline)) wait_ = 0;
    return;
  }
  if (wait_ >= options_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    model().set_stop_training(true);
    if (options_.restore_best_weights && !best_weights_.empty()) {
      const auto vars = model().variables();
      for (std::size_t i = 0; i < vars.size() && i < best_weights_.size(); ++i) vars[i].assign(best_weights_[i]);
    }
  }
}

void EarlyStopping::on_train_end(const Logs&) {
  if (stopped_epoch_ > 0) logger()->info("Epoch {}: early stopping", stopped_epoch_ + 1);
}

// ---- CSVLogger ------------------------------------------------------------------------------------
CSVLogger::CSVLogger(std::string filename, char separator, bool append)
    : filename_(std::move(filename)), separator_(separator), append_(append) {}

void CSVLogger::on_train_begin(const Logs&) {
  keys_.clear();
  out_.close();
  out_.open(filename_, append_ ? std::ios::app : std::ios::trunc);
  if (!out_) throw std::runtime_error("CSVLogger: cannot open '" + filename_ + "' for writing");
}

void CSVLogger::on_epoch_end(int epoch, Logs& logs) {
  if (keys_.empty()) {
    for (const auto& [k, v] : logs) keys_.push_back(k);
    std::sort(keys_.begin(), keys_.end());
    const bool has_header = append_ && out_.tellp() > 0;
    if (!has_header) {
      out_ << "epoch";
      for (const auto& k : keys_) out_ << separator_ << k;
      out_ << '\n';
    }
  }
  out_ << epoch;
  for (const auto& k : keys_) {
    out_ << separator_;
    if (auto v = logs.get(k)) out_ << fmt::format("{}", *v);
    else out_ << "NA";
  }
  out_ << '\n';
  out_.flush();
  if (!out_) throw std::runtime_error("CSVLogger: write to '" + filename_ + "' failed");
}

void CSVLogger::on_train_end(const Logs&) { out_.close(); }

// ---- LearningRateScheduler --------------------------------------------------------------------
LearningRateScheduler::LearningRateScheduler(std::function<double(int, double)> schedule, bool verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {
  if (!schedule_) throw std::invalid_argument("LearningRateScheduler: empty schedule function");
}

void LearningRateScheduler::on_epoch_begin(int epoch, const Logs&) {
  auto& opt = model().optimizer();
  if (!opt) throw std::logic_error("LearningRateScheduler: the model has no optimizer (call compile first)");
  const double lr = schedule_(epoch, opt->current_learning_rate());
  if (!std::isfinite(lr))
    throw std::invalid_argument("LearningRateScheduler: schedule returned a non-finite learning rate at epoch " +
                                std::to_string(epoch));
  opt->set_learning_rate(lr);
  if (verbose_) logger()->info("Epoch {}: LearningRateScheduler setting learning rate to {}.", epoch + 1, lr);
}

void LearningRateScheduler::on_epoch_end(int, Logs& logs) {
  logs.set("learning_rate", model().optimizer()->current_learning_rate());
}

// ---- CheckpointHook -------------------------------------------------------------------------------
CheckpointHook::CheckpointHook(CheckpointHookOptions options) : options_(std::move(options)) {
  if (!options_.save) throw std::invalid_argument("CheckpointHook: no save function given");
  if (options_.every_n_epochs < 1)
    throw std::invalid_argument("CheckpointHook: every_n_epochs must be >= 1, got " +
                                std::to_string(options_.every_n_epochs));
}

void CheckpointHook::on_epoch_end(int epoch, Logs& logs) {
  if ((epoch + 1) % options_.every_n_epochs != 0) return;
  if (options_.save_best_only) {
    const std::optional<double> value = logs.get(options_.monitor);
    if (!value) {
      logger()->warn("CheckpointHook: can save best model only with '{}' available, skipping (have: {})",
                     options_.monitor, logs.keys_string());
      return;
    }
    const bool maximize = monitor_maximizes(options_.monitor, options_.mode);
    if (best_ && !(maximize ? *value > *best_ : *value < *best_)) return;
    best_ = *value;
  }
  options_.save(epoch, logs);
  ++saves_;
}

void TerminateOnNaN::on_train_begin(const Logs&) {
  terminated_ = false;
  reason_.clear();
}

void TerminateOnNaN::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  const std::optional<double> loss = logs.get("loss");
  if (!loss || std::isfinite(*loss) || terminated_) return;
  terminated_ = true;
  reason_ = fmt::format("loss {} at epoch {}, batch {}", *loss, epoch_ + 1, batch + 1);
  logger()->error("TerminateOnNaN: {}; training stops", reason_);
  model().set_stop_training(true);
}

ProgbarLogger::ProgbarLogger(ProgbarLoggerOptions options) : options_(options) {
  if (options_.verbose < 1 || options_.verbose > 2)
    throw std::invalid_argument("ProgbarLogger: verbose must be 1 or 2, got " + std::to_string(options_.verbose));
}

void ProgbarLogger::on_epoch_begin(int epoch, const Logs&) {
  const std::string title = fmt::format("Epoch {}/{}", epoch + 1, options_.epochs);
  if (options_.verbose == 1) {
    std::fprintf(options_.out, "%s\n", title.c_str());
    std::fflush(options_.out);
  }
  // verbose 2: "epoch 3/10 - 120/469 - ..." progress lines, distinct from fit's "Epoch 3/10 - ..." summary.
  bar_.emplace(ProgbarOptions{.target = options_.steps, .verbose = options_.verbose,
                              .log_interval = options_.log_interval,
                              .prefix = fmt::format("epoch {}/{}", epoch + 1, options_.epochs), .out = options_.out,
                              .dynamic_display = options_.dynamic_display});
  seen_ = 0;
}

void ProgbarLogger::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  seen_ = batch + 1;
  if (bar_) bar_->update(seen_, Progbar::Values(logs.begin(), logs.end()));
}

void ProgbarLogger::on_epoch_end(int, Logs& logs) {
  if (bar_) bar_->update(seen_, Progbar::Values(logs.begin(), logs.end()), /*finalize=*/true);
  bar_.reset();
}

}  // namespace tapeflow::models
