// Config: a Keras config value — what get_config() returns (Keras: a Python dict of JSON values)
// for layers, models, optimizers, schedules and losses — without making users depend on a JSON
// library.
//
// Facts:    A Config holds one JSON value; a default-constructed Config is an empty object {},
//           the start of every get_config(). Objects keep their keys sorted (as nlohmann-json's
//           default object does), so to_json_string() is the same for equal configs.
//           set() adds or replaces a key of an object and returns *this (chainable); get<T>(key)
//           reads one: T is bool, int, std::int64_t, std::uint64_t, double, std::string, Config,
//           std::vector<std::int64_t>, std::vector<double>, std::vector<std::string> or
//           std::vector<Config> (a list of objects, such as a Sequential's "layers"). Numbers
//           convert as JSON does (an integer reads as double; a double reads as an integer only
//           when it is integral and in range). A key set to nullptr holds JSON null.
//           Users who have nlohmann-json convert with <tapeflow/json.h> (to_json / from_json);
//           nothing else in tapeflow's public headers needs it.
// Errors:   std::invalid_argument for text that does not parse (with the parser's position) or
//           nests deeper than kMaxConfigDepth, for
//           set() or get() on a Config that is not an object, and for get() of a missing key or of a
//           value of another type (naming the key, the type asked for and the value found);
//           std::invalid_argument for a non-finite double in set() (JSON has no NaN or infinity).
// Ref:      keras.layers.Layer.get_config, keras.saving.serialize_keras_object (configs as dicts)
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tapeflow {

// The deepest JSON nesting a config may have (Config::parse and every reader of model files). Each
// nested model adds 3 levels (its {"class_name", "config"} object, the config object, the "layers"
// list) and a layer's own config up to about 8 (Keras 3's inbound_nodes), so 512 admits models
// nested about 160 deep; Keras models are a few dozen levels deep. Deeper configs are refused before
// anything recurses over them (copies, to_json_string(), deserialization), so a hostile file cannot
// exhaust the stack.
inline constexpr int kMaxConfigDepth = 512;

class Config;

// The types Config::get<T> reads (defined for these in config.cc).
template <class T>
concept ConfigValue =
    std::same_as<T, bool> || std::same_as<T, int> || std::same_as<T, std::int64_t> || std::same_as<T, std::uint64_t> ||
    std::same_as<T, double> || std::same_as<T, std::string> || std::same_as<T, Config> ||
    std::same_as<T, std::vector<std::int64_t>> || std::same_as<T, std::vector<double>> ||
    std::same_as<T, std::vector<std::string>> || std::same_as<T, std::vector<Config>>;

namespace internal {
struct ConfigAccess;  // the library's view of the JSON inside (tape/core/internal/config_json.h)
}  // namespace internal

// A JSON value as Keras's get_config() gives one (see the file comment).
class Config {
 public:
  Config();  // {}
  ~Config();
  Config(const Config& other);  // a deep copy (Config is a value, not a handle)
  Config(Config&& other) noexcept;  // `other` is left as {}
  Config& operator=(const Config& other);  // a deep copy
  Config& operator=(Config&& other) noexcept;  // `other` is left as {}

  // The value of JSON text. Errors: std::invalid_argument with the parser's message and position,
  // or for nesting deeper than kMaxConfigDepth.
  static Config parse(std::string_view json_text);
  // JSON text; indent < 0 gives one line, else pretty-printed with `indent` spaces.
  std::string to_json_string(int indent = -1) const;

  bool is_object() const;  // a JSON object (what get_config() returns)
  bool is_null() const;  // JSON null (a key set to nullptr, read with get<Config>)
  // Keys of an object, sorted; empty for any other value.
  std::vector<std::string> keys() const;
  // Whether an object has `key` (also when its value is null); false for any other value.
  bool contains(std::string_view key) const;
  // Whether an object has `key` with a non-null value.
  bool has(std::string_view key) const;

  // Adds or replaces key = value in an object. Errors: std::invalid_argument if this is not an
  // object, or for a NaN or infinite double.
  Config& set(std::string_view key, bool value);
  Config& set(std::string_view key, int value);  // an integer
  Config& set(std::string_view key, long value);  // an integer
  Config& set(std::string_view key, long long value);  // an integer
  Config& set(std::string_view key, unsigned long value);  // an integer
  Config& set(std::string_view key, unsigned long long value);  // an integer
  Config& set(std::string_view key, double value);  // a number (finite)
  Config& set(std::string_view key, const char* value);  // a string (not a bool)
  Config& set(std::string_view key, std::string value);  // a string
  Config& set(std::string_view key, Config value);  // a nested value (an object, a list, ...)
  Config& set(std::string_view key, std::nullptr_t);  // JSON null (Keras's None)
  Config& set(std::string_view key, const std::vector<std::int64_t>& values);  // a list of integers
  Config& set(std::string_view key, const std::vector<double>& values);  // a list of numbers (finite)
  Config& set(std::string_view key, const std::vector<std::string>& values);  // a list of strings
  Config& set(std::string_view key, const std::vector<Config>& values);  // a list of nested values
  // Removes `key` from an object (nothing if absent). Errors: std::invalid_argument if not an object.
  Config& erase(std::string_view key);

  // The value at `key` as T (ConfigValue: see the file comment for the types). Errors:
  // std::invalid_argument naming the key for a missing key, a null (but for T = Config), or a value
  // of another type.
  template <ConfigValue T>
  T get(std::string_view key) const;

  // Equal JSON values (objects compare key by key, numbers by value: 1 == 1.0).
  friend bool operator==(const Config& a, const Config& b);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // null only when moved from (then read as {})
  friend struct internal::ConfigAccess;
};

}  // namespace tapeflow
