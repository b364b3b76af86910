// Logs: the ordered name -> value record that fit/evaluate/callbacks pass around (Keras's `logs` dict).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::models {

// Named scalars in insertion order ("loss" first, then metrics, then "val_*"), like Keras's logs.
class Logs {
 public:
  Logs() = default;
  // Logs{{"loss", 0.3}, {"accuracy", 0.9}}: the entries in order (a repeated name keeps its first
  // position and its last value, as set does).
  Logs(std::initializer_list<std::pair<std::string, double>> items) {
    for (const auto& [k, v] : items) set(k, v);
  }
  // Sets (or overwrites, keeping the position of) `name`.
  void set(const std::string& name, double value) {
    for (auto& [k, v] : items_)
      if (k == name) {
        v = value;
        return;
      }
    items_.emplace_back(name, value);
  }
  // The value of `name`, or nullopt if absent.
  std::optional<double> get(const std::string& name) const {
    for (const auto& [k, v] : items_)
      if (k == name) return v;
    return std::nullopt;
  }
  // True if `name` is present.
  bool contains(const std::string& name) const { return get(name).has_value(); }
  // Errors: std::out_of_range naming the key and the keys present.
  double at(const std::string& name) const;
  // Names in order, joined by ", " (for messages).
  std::string keys_string() const;
  // True if there is no entry.
  bool empty() const { return items_.empty(); }
  // The number of entries.
  std::size_t size() const { return items_.size(); }
  // Iteration over the (name, value) pairs in insertion order: for (const auto& [k, v] : logs).
  auto begin() const { return items_.begin(); }
  // The end of the iteration begin() starts.
  auto end() const { return items_.end(); }

 private:
  std::vector<std::pair<std::string, double>> items_;
};

}  // namespace tapeflow::models
