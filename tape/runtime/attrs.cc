#include "tape/runtime/attrs.h"

#include <stdexcept>

namespace tapeflow {

Attrs& Attrs::set(std::string name, AttrValue value) {
  for (auto& [k, v] : items_)
    if (k == name) {
      v = std::move(value);
      return *this;
    }
  items_.emplace_back(std::move(name), std::move(value));
  return *this;
}

bool Attrs::has(const std::string& name) const {
  for (const auto& kv : items_)
    if (kv.first == name) return true;
  return false;
}

const AttrValue& Attrs::get(const std::string& name) const {
  for (const auto& kv : items_)
    if (kv.first == name) return kv.second;
  throw std::logic_error("Attrs: missing attribute '" + name + "'");
}

namespace {
template <typename T>
const T& typed(const AttrValue& v, const std::string& name) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  throw std::logic_error("Attrs: attribute '" + name + "' has another type");
}
}  // namespace

std::int64_t Attrs::get_int(const std::string& n) const { return typed<std::int64_t>(get(n), n); }
double Attrs::get_float(const std::string& n) const { return typed<double>(get(n), n); }
bool Attrs::get_bool(const std::string& n) const { return typed<bool>(get(n), n); }
const std::string& Attrs::get_string(const std::string& n) const { return typed<std::string>(get(n), n); }
const std::vector<std::int64_t>& Attrs::get_ints(const std::string& n) const {
  return typed<std::vector<std::int64_t>>(get(n), n);
}
DType Attrs::get_dtype(const std::string& n) const { return typed<DType>(get(n), n); }

std::string ints_to_string(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

namespace {

[[noreturn]] void bad_attr(const std::string& op, const std::string& name, const std::string& value,
                           const std::string& why) {
  throw std::invalid_argument(op + ": attribute '" + name + "' = " + value + ": " + why);
}

// The attribute as T, or an error naming op and attribute.
template <typename T>
const T& attr_as(const std::string& op, const Attrs& attrs, const std::string& name) {
  for (const auto& [k, v] : attrs.items())
    if (k == name) {
      if (const T* p = std::get_if<T>(&v)) return *p;
      throw std::invalid_argument(op + ": attribute '" + name + "' has another type");
    }
  throw std::invalid_argument(op + ": attribute '" + name + "' is missing");
}

std::string range(std::int64_t lo, std::int64_t hi) {
  return "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

}  // namespace

std::int64_t check_int_attr(const std::string& op, const Attrs& attrs, const std::string& name, std::int64_t lo,
                            std::int64_t hi) {
  const std::int64_t v = attr_as<std::int64_t>(op, attrs, name);
  if (v < lo || v > hi) bad_attr(op, name, std::to_string(v), range(lo, hi));
  return v;
}

const std::vector<std::int64_t>& check_ints_attr(const std::string& op, const Attrs& attrs, const std::string& name,
                                                 std::size_t min_size, std::size_t max_size, std::int64_t lo,
                                                 std::int64_t hi) {
  const auto& v = attr_as<std::vector<std::int64_t>>(op, attrs, name);
  if (v.size() < min_size || v.size() > max_size)
    bad_attr(op, name, ints_to_string(v),
             min_size == max_size ? "needs " + std::to_string(min_size) + " entries"
                                  : "needs " + std::to_string(min_size) + " to " + std::to_string(max_size) + " entries");
  for (std::int64_t x : v)
    if (x < lo || x > hi) bad_attr(op, name, ints_to_string(v), "every entry " + range(lo, hi));
  return v;
}

Shape check_shape_attr(const std::string& op, const Attrs& attrs, const std::string& name, int rank) {
  const auto& v = attr_as<std::vector<std::int64_t>>(op, attrs, name);
  if (rank >= 0 && v.size() != static_cast<std::size_t>(rank))
    bad_attr(op, name, ints_to_string(v), "needs rank " + std::to_string(rank));
  try {
    Shape s(v);
    s.num_elements();
    s.strides();
    return s;
  } catch (const ShapeError& e) {
    bad_attr(op, name, ints_to_string(v), e.what());
  }
}

const std::string& check_string_attr(const std::string& op, const Attrs& attrs, const std::string& name,
                                     std::initializer_list<const char*> allowed) {
  const auto& v = attr_as<std::string>(op, attrs, name);
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return v;
    list += std::string(list.empty() ? "" : ", ") + '"' + a + '"';
  }
  bad_attr(op, name, '"' + v + '"', "must be one of " + list);
}

template <typename T>
void check_attr_type(const std::string& op, const Attrs& attrs, const std::string& name) {
  attr_as<T>(op, attrs, name);
}
template void check_attr_type<std::int64_t>(const std::string&, const Attrs&, const std::string&);
template void check_attr_type<double>(const std::string&, const Attrs&, const std::string&);
template void check_attr_type<bool>(const std::string&, const Attrs&, const std::string&);
template void check_attr_type<std::string>(const std::string&, const Attrs&, const std::string&);
template void check_attr_type<std::vector<std::int64_t>>(const std::string&, const Attrs&, const std::string&);
template void check_attr_type<DType>(const std::string&, const Attrs&, const std::string&);

}  // namespace tapeflow
