// Attributes of an op call: named, typed, non-tensor arguments (axes, flags, dtypes).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tape/core/dtype.h"

namespace tapeflow {

using AttrValue = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, DType>;

// An ordered list of name -> value pairs. Empty for most ops (no allocation).
// Errors: get_* throw std::logic_error naming the attribute when it is missing or of another type.
class Attrs {
 public:
  Attrs() = default;
  Attrs& set(std::string name, AttrValue value);
  bool has(const std::string& name) const;
  std::int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const std::vector<std::int64_t>& get_ints(const std::string& name) const;
  DType get_dtype(const std::string& name) const;
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }

 private:
  const AttrValue& get(const std::string& name) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace tapeflow
