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
