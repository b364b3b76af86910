#include "optimizers/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "optimizers/internal/update_loop.h"
#include "tape/runtime/recorder.h"

namespace tapeflow::optimizers {
namespace {

std::string base_name(const std::string& name) {
  if (name.size() > 2 && name.compare(name.size() - 2, 2, ":0") == 0) return name.substr(0, name.size() - 2);
  return name;
}

double sum_squares(const Tensor& g) {
  double s = 0.0;
  dispatch_floating(g.dtype(), "clip", [&](auto tag) {
    using T = decltype(tag);
    const T* p = g.data<T>();
    for (std::int64_t i = 0, n = g.num_elements(); i < n; ++i) s += double(p[i]) * double(p[i]);
  });
  return s;
}

Tensor scaled(const Tensor& g, double factor) {
  Tensor out = Tensor::empty(g.shape(), g.dtype());
  dispatch_floating(g.dtype(), "clip", [&](auto tag) {
    using T = decltype(tag);
    const T* p = g.data<T>();
    T* q = out.mutable_data<T>();
    const T f = static_cast<T>(factor);
    internal::for_each_index(g.num_elements(), [&](std::int64_t i) { q[i] = p[i] * f; });
  });
  return out;
}

Tensor clipped(const Tensor& g, double limit) {
  Tensor out = Tensor::empty(g.shape(), g.dtype());
  dispatch_floating(g.dtype(), "clip", [&](auto tag) {
    using T = decltype(tag);
    const T* p = g.data<T>();
    T* q = out.mutable_data<T>();
    const T hi = static_cast<T>(limit), lo = -hi;
    internal::for_each_index(g.num_elements(), [&](std::int64_t i) { q[i] = std::min(std::max(p[i], lo), hi); });
  });
  return out;
}

void check_positive(const std::string& opt, const char* what, const std::optional<double>& v) {
  if (v && !(*v > 0))
    throw std::invalid_argument(opt + ": " + what + " must be positive, got " + std::to_string(*v));
}

}  // namespace

Optimizer::Optimizer(OptimizerConfig config) : config_(std::move(config)) {
  if (config_.name.empty()) config_.name = "Optimizer";
  if (config_.clipnorm && config_.global_clipnorm)
    throw std::invalid_argument(config_.name + ": only one of clipnorm and global_clipnorm can be set, got clipnorm=" +
                                std::to_string(*config_.clipnorm) +
                                ", global_clipnorm=" + std::to_string(*config_.global_clipnorm));
  check_positive(config_.name, "clipnorm", config_.clipnorm);
  check_positive(config_.name, "clipvalue", config_.clipvalue);
  check_positive(config_.name, "global_clipnorm", config_.global_clipnorm);
  require(config_.weight_decay >= 0, "weight_decay must be >= 0", config_.weight_decay);
  iterations_ = Variable(constant(std::vector<std::int64_t>{0}, Shape{}),
                         {.name = config_.name + "/iterations:0", .trainable = false});
}

Optimizer::~Optimizer() = default;

void Optimizer::require(bool ok, const char* what, double value) const {
  if (!ok) throw std::invalid_argument(config_.name + ": " + what + ", got " + std::to_string(value));
}

std::int64_t Optimizer::iterations() const { return iterations_.value().data<std::int64_t>()[0]; }

double Optimizer::current_learning_rate() const { return config_.learning_rate.at(iterations()); }

void Optimizer::build(const std::vector<Variable>& vars) {
  for (const Variable& v : vars) {
    if (index_.count(v.handle_id())) continue;
    index_.emplace(v.handle_id(), tracked_.size());
    tracked_.push_back({v, {}});
    build_slots(v);
  }
}

Variable Optimizer::add_slot(const Variable& var, const std::string& slot_name, double initial_value) {
  auto it = index_.find(var.handle_id());
  if (it == index_.end())
    throw std::logic_error(config_.name + ": add_slot for variable '" + var.name() + "' outside build_slots");
  Variable s(fill(var.shape(), initial_value, var.dtype()),
             {.name = config_.name + "/" + base_name(var.name()) + "/" + slot_name + ":0", .trainable = false});
  tracked_[it->second].slots.emplace_back(slot_name, s);
  return s;
}

const Optimizer::Tracked& Optimizer::tracked(const Variable& var, const char* what) const {
  auto it = index_.find(var.handle_id());
  if (it == index_.end())
    throw std::invalid_argument(config_.name + ": " + what + ": variable '" + var.name() +
                                "' is not tracked by this optimizer (apply_gradients or build first)");
  return tracked_[it->second];
}

void Optimizer::add_slot_alias(std::string alias, std::string slot_name) {
  slot_aliases_.emplace_back(std::move(alias), std::move(slot_name));
}

const Variable& Optimizer::slot(const Variable& var, const std::string& slot_name) const {
  const Tracked& t = tracked(var, "get_slot");
  for (const auto& [n, s] : t.slots)
    if (n == slot_name) return s;
  for (const auto& [alias, stored] : slot_aliases_)
    if (alias == slot_name)
      for (const auto& [n, s] : t.slots)
        if (n == stored) return s;
  std::string known;
  for (const auto& [n, s] : t.slots) {
    known += (known.empty() ? "" : ", ") + n;
    for (const auto& [alias, stored] : slot_aliases_)
      if (stored == n && alias != n) known += " (" + alias + ")";
  }
  throw std::invalid_argument(config_.name + ": get_slot: variable '" + var.name() + "' has no slot '" + slot_name +
                              "' (slots: " + (known.empty() ? "none" : known) + ")");
}

Variable Optimizer::get_slot(const Variable& var, const std::string& slot_name) const { return slot(var, slot_name); }

std::vector<std::string> Optimizer::slot_names(const Variable& var) const {
  std::vector<std::string> out;
  for (const auto& [n, s] : tracked(var, "slot_names").slots) out.push_back(n);
  return out;
}

std::vector<Variable> Optimizer::variables() const {
  std::vector<Variable> out{iterations_};
  for (const auto& t : tracked_)
    for (const auto& [n, s] : t.slots) out.push_back(s);
  return out;
}

void Optimizer::apply_gradients(const std::vector<std::optional<Tensor>>& grads, const std::vector<Variable>& vars) {
  if (grads.size() != vars.size())
    throw std::invalid_argument(config_.name + ": apply_gradients got " + std::to_string(grads.size()) +
                                " gradients for " + std::to_string(vars.size()) + " variables");
  std::vector<std::pair<Tensor, Variable>> pairs;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i] || !grads[i]->defined()) continue;
    const Tensor& g = *grads[i];
    const Variable& v = vars[i];
    if (g.shape() != v.shape() || g.dtype() != v.dtype())
      throw std::invalid_argument(config_.name + ": apply_gradients: gradient for variable '" + v.name() +
                                  "' has shape " + g.shape().to_string() + " " + dtype_name(g.dtype()) +
                                  ", variable has shape " + v.shape().to_string() + " " + dtype_name(v.dtype()));
    if (!is_floating(v.dtype()))
      throw std::invalid_argument(config_.name + ": apply_gradients: variable '" + v.name() + "' has dtype " +
                                  dtype_name(v.dtype()) + "; only float32/float64 variables can be optimized");
    pairs.emplace_back(g, v);
  }
  if (pairs.empty())
    throw std::invalid_argument(config_.name + ": No gradients provided for any variable (" +
                                std::to_string(vars.size()) + " variables, all gradients absent)");
  RecordingPause pause;
  apply(pairs);
}

void Optimizer::apply(std::vector<std::pair<Tensor, Variable>>& pairs) {
  std::vector<Variable> vars;
  for (auto& [g, v] : pairs) vars.push_back(v);
  build(vars);

  if (config_.clipnorm) {
    for (auto& [g, v] : pairs) {
      double norm = std::sqrt(sum_squares(g));
      if (norm > *config_.clipnorm) g = scaled(g, *config_.clipnorm / norm);
    }
  } else if (config_.global_clipnorm) {
    double total = 0.0;
    for (auto& [g, v] : pairs) total += sum_squares(g);
    double norm = std::sqrt(total), c = *config_.global_clipnorm;
    double scale = std::isfinite(norm) ? c * std::min(1.0 / norm, 1.0 / c) : std::numeric_limits<double>::quiet_NaN();
    if (scale != 1.0)
      for (auto& [g, v] : pairs) g = scaled(g, scale);
  } else if (config_.clipvalue) {
    for (auto& [g, v] : pairs) g = clipped(g, *config_.clipvalue);
  }

  const double lr = current_learning_rate();
  if (config_.weight_decay > 0) {
    for (auto& [g, v] : pairs) {
      internal::dispatch_update(v.dtype(), config_.name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        T* w = v.template mutable_data_for_update<T>();
        const T keep = static_cast<T>(1.0 - config_.weight_decay * lr);
        internal::for_each_index(v.shape().num_elements(), [&](std::int64_t i) { w[i] *= keep; });
      });
    }
  }
  for (auto& [g, v] : pairs) update_step(g, v, lr);
  iterations_.mutable_data_for_update<std::int64_t>()[0] += 1;
}

}  // namespace tapeflow::optimizers
