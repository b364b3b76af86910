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

}  // namespace tapeflow
