// Attributes of an op call: named, typed, non-tensor arguments (axes, flags, dtypes).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tape/core/dtype.h"
#include "tape/core/shape.h"

namespace tapeflow {

// One attribute value: an int, a float, a bool, a string, a list of ints or a dtype.
using AttrValue = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, DType>;

// An ordered list of name -> value pairs. Empty for most ops (no allocation).
// Errors: get_* throw std::logic_error naming the attribute when it is missing or of another type.
class Attrs {
 public:
  Attrs() = default;
  // Sets `name` to `value` (replacing an earlier value of that name, keeping its place); returns *this
  // for chaining: Attrs().set("keepdims", true).set("padding", std::string("SAME")).
  Attrs& set(std::string name, AttrValue value);
  // True if `name` is set.
  bool has(const std::string& name) const;
  // The int attribute `name`. Errors: std::logic_error if missing or not an int.
  std::int64_t get_int(const std::string& name) const;
  // The float attribute `name`. Errors: std::logic_error if missing or not a double.
  double get_float(const std::string& name) const;
  // The bool attribute `name`. Errors: std::logic_error if missing or not a bool.
  bool get_bool(const std::string& name) const;
  // The string attribute `name`. Errors: std::logic_error if missing or not a string.
  const std::string& get_string(const std::string& name) const;
  // The int-list attribute `name`. Errors: std::logic_error if missing or not a list of ints.
  const std::vector<std::int64_t>& get_ints(const std::string& name) const;
  // The dtype attribute `name`. Errors: std::logic_error if missing or not a DType.
  DType get_dtype(const std::string& name) const;
  // Every (name, value) pair, in the order first set.
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  // True when no attribute is set.
  bool empty() const { return items_.empty(); }

 private:
  const AttrValue& get(const std::string& name) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};

// Checks of attribute values, for OpDef::check_attrs (the attributes of a deserialised function
// come from an untrusted file). Each returns the checked value.
// Errors:   std::invalid_argument "<op>: attribute '<name>' = <value>: <why>", also when the
//           attribute is missing or of another type.

// An int in [lo, hi].
std::int64_t check_int_attr(const std::string& op, const Attrs& attrs, const std::string& name, std::int64_t lo,
                            std::int64_t hi);
// A list of min_size..max_size ints, each in [lo, hi].
const std::vector<std::int64_t>& check_ints_attr(const std::string& op, const Attrs& attrs, const std::string& name,
                                                 std::size_t min_size, std::size_t max_size, std::int64_t lo,
                                                 std::int64_t hi);
// A shape that can exist: rank <= Shape::kMaxRank (exactly `rank` when >= 0), dims >= 0, element
// count and strides within int64.
Shape check_shape_attr(const std::string& op, const Attrs& attrs, const std::string& name, int rank = -1);
// One of `allowed`.
const std::string& check_string_attr(const std::string& op, const Attrs& attrs, const std::string& name,
                                     std::initializer_list<const char*> allowed);
// Present with the type of T (bool, double, DType, ...).
template <typename T>
void check_attr_type(const std::string& op, const Attrs& attrs, const std::string& name);

// "[1, 2, 3]".
std::string ints_to_string(const std::vector<std::int64_t>& v);

}  // namespace tapeflow
