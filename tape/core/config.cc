#include "tape/core/config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "tape/core/internal/config_json.h"

namespace tapeflow {

struct Config::Impl {
  nlohmann::json value = nlohmann::json::object();
};

namespace internal {
nlohmann::json& ConfigAccess::json(Config& config) {
  if (!config.impl_) config.impl_ = std::make_unique<Config::Impl>();
  return config.impl_->value;
}
const nlohmann::json& ConfigAccess::json(const Config& config) {
  static const nlohmann::json empty = nlohmann::json::object();
  return config.impl_ ? config.impl_->value : empty;
}
Config ConfigAccess::make(nlohmann::json value) {
  Config c;
  c.impl_->value = std::move(value);
  return c;
}
}  // namespace internal

void check_config_depth(const nlohmann::json& config, const std::string& where) {
  int deepest = 0;
  std::vector<std::pair<const nlohmann::json*, int>> stack{{&config, 1}};
  while (!stack.empty()) {
    const auto [j, depth] = stack.back();
    stack.pop_back();
    if (!j->is_structured()) continue;
    deepest = std::max(deepest, depth);
    for (const nlohmann::json& child : *j) stack.emplace_back(&child, depth + 1);
  }
  if (deepest > kMaxConfigDepth)
    throw std::invalid_argument(where + ": the JSON is nested " + std::to_string(deepest) +
                                " levels deep; tapeflow reads at most " + std::to_string(kMaxConfigDepth));
}

namespace {

const char* type_of(const nlohmann::json& v) { return v.type_name(); }

// A short rendering of a value for error messages (long values are cut).
std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

nlohmann::json& object_of(Config& c, std::string_view what) {
  nlohmann::json& j = json_of(c);
  if (!j.is_object())
    throw std::invalid_argument("Config::" + std::string(what) + ": the config is a " + type_of(j) +
                                ", not an object");
  return j;
}

Config& put(Config& c, std::string_view key, nlohmann::json value) {
  object_of(c, "set")[std::string(key)] = std::move(value);
  return c;
}

[[noreturn]] void wrong(std::string_view key, const char* wanted, const nlohmann::json& v) {
  throw std::invalid_argument("Config::get: key '" + std::string(key) + "' is not " + wanted + " (it is " +
                              type_of(v) + " " + shown(v) + ")");
}

template <class I>
I integer_of(std::string_view key, const nlohmann::json& v) {
  if (const auto i = exact_integer<I>(v)) return *i;
  wrong(key, std::is_signed_v<I> ? "an integer in range" : "a non-negative integer in range", v);
}

template <class T>
T value_of(std::string_view key, const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) wrong(key, "a boolean", v);
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    return integer_of<T>(key, v);
  } else if constexpr (std::is_same_v<T, double>) {
    if (!v.is_number()) wrong(key, "a number", v);
    return v.get<double>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) wrong(key, "a string", v);
    return v.get<std::string>();
  } else if constexpr (std::is_same_v<T, Config>) {
    return to_config(v);
  } else {  // std::vector<E>
    using E = typename T::value_type;
    if (!v.is_array()) wrong(key, "a list", v);
    T out;
    out.reserve(v.size());
    for (const nlohmann::json& e : v) out.push_back(value_of<E>(key, e));
    return out;
  }
}

}  // namespace

Config::Config() : impl_(std::make_unique<Impl>()) {}
Config::~Config() = default;
Config::Config(const Config& other) : impl_(std::make_unique<Impl>()) { impl_->value = json_of(other); }
Config::Config(Config&& other) noexcept = default;
Config& Config::operator=(const Config& other) {
  if (this != &other) json_of(*this) = json_of(other);
  return *this;
}
Config& Config::operator=(Config&& other) noexcept = default;

Config Config::parse(std::string_view json_text) {
  try {
    nlohmann::json j = nlohmann::json::parse(json_text);
    check_config_depth(j, "Config::parse");
    return to_config(std::move(j));
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(std::string("Config::parse: ") + e.what());
  }
}

std::string Config::to_json_string(int indent) const { return json_of(*this).dump(indent < 0 ? -1 : indent); }

bool Config::is_object() const { return json_of(*this).is_object(); }
bool Config::is_null() const { return json_of(*this).is_null(); }

std::vector<std::string> Config::keys() const {
  std::vector<std::string> out;
  const nlohmann::json& j = json_of(*this);
  if (j.is_object())
    for (const auto& [k, v] : j.items()) out.push_back(k);
  return out;
}

bool Config::contains(std::string_view key) const {
  const nlohmann::json& j = json_of(*this);
  return j.is_object() && j.contains(std::string(key));
}

bool Config::has(std::string_view key) const {
  const nlohmann::json& j = json_of(*this);
  if (!j.is_object()) return false;
  const auto it = j.find(std::string(key));
  return it != j.end() && !it->is_null();
}

Config& Config::set(std::string_view key, bool value) { return put(*this, key, value); }
Config& Config::set(std::string_view key, int value) { return put(*this, key, value); }
Config& Config::set(std::string_view key, long value) { return put(*this, key, value); }
Config& Config::set(std::string_view key, long long value) { return put(*this, key, value); }
Config& Config::set(std::string_view key, unsigned long value) { return put(*this, key, value); }
Config& Config::set(std::string_view key, unsigned long long value) { return put(*this, key, value); }
Config& Config::set(std::string_view key, double value) {
  if (!std::isfinite(value))
    throw std::invalid_argument("Config::set: key '" + std::string(key) + "': " + std::to_string(value) +
                                " is not finite (JSON has no NaN or infinity)");
  return put(*this, key, value);
}
Config& Config::set(std::string_view key, const char* value) { return put(*this, key, std::string(value)); }
Config& Config::set(std::string_view key, std::string value) { return put(*this, key, std::move(value)); }
Config& Config::set(std::string_view key, Config value) {
  return put(*this, key, std::move(json_of(value)));
}
Config& Config::set(std::string_view key, std::nullptr_t) { return put(*this, key, nullptr); }
Config& Config::set(std::string_view key, const std::vector<std::int64_t>& values) { return put(*this, key, values); }
Config& Config::set(std::string_view key, const std::vector<double>& values) {
  for (const double v : values)
    if (!std::isfinite(v))
      throw std::invalid_argument("Config::set: key '" + std::string(key) + "': the list holds " + std::to_string(v) +
                                  ", which is not finite (JSON has no NaN or infinity)");
  return put(*this, key, values);
}
Config& Config::set(std::string_view key, const std::vector<std::string>& values) { return put(*this, key, values); }
Config& Config::set(std::string_view key, const std::vector<Config>& values) {
  nlohmann::json list = nlohmann::json::array();
  for (const Config& v : values) list.push_back(json_of(v));
  return put(*this, key, std::move(list));
}

Config& Config::erase(std::string_view key) {
  object_of(*this, "erase").erase(std::string(key));
  return *this;
}

template <ConfigValue T>
T Config::get(std::string_view key) const {
  const nlohmann::json& j = json_of(*this);
  if (!j.is_object())
    throw std::invalid_argument("Config::get: key '" + std::string(key) + "': the config is a " + type_of(j) +
                                ", not an object");
  const auto it = j.find(std::string(key));
  if (it == j.end()) throw std::invalid_argument("Config::get: no key '" + std::string(key) + "'");
  if (it->is_null() && !std::is_same_v<T, Config>)
    throw std::invalid_argument("Config::get: key '" + std::string(key) + "' is null");
  return value_of<T>(key, *it);
}

bool operator==(const Config& a, const Config& b) { return json_of(a) == json_of(b); }

template bool Config::get<bool>(std::string_view) const;
template int Config::get<int>(std::string_view) const;
template std::int64_t Config::get<std::int64_t>(std::string_view) const;
template std::uint64_t Config::get<std::uint64_t>(std::string_view) const;
template double Config::get<double>(std::string_view) const;
template std::string Config::get<std::string>(std::string_view) const;
template Config Config::get<Config>(std::string_view) const;
template std::vector<std::int64_t> Config::get<std::vector<std::int64_t>>(std::string_view) const;
template std::vector<double> Config::get<std::vector<double>>(std::string_view) const;
template std::vector<std::string> Config::get<std::vector<std::string>>(std::string_view) const;
template std::vector<Config> Config::get<std::vector<Config>>(std::string_view) const;

}  // namespace tapeflow
