// Layer, initializer, regularizer and activation configs in Keras's JSON form, and the registry
// of layer classes by name (Keras's serialize / deserialize / register_keras_serializable).
//
// Facts:    serialize(layer) = {"class_name": layer.class_name(), "config": layer.get_config()}.
//           deserialize() looks the class name up in the registry: every built-in layer is
//           registered on first use (explicitly, no static initialisers); users add their own
//           classes with register_layer_class (models/ adds Sequential and Functional).
//           Initializers: Keras 2's {"class_name": "GlorotUniform", "config": {"seed": null}} (also
//           read: VarianceScaling with scale / mode / distribution, as TensorFlow.js writes
//           Glorot and He initializers). Regularizers: Dense's kernel_regularizer_l2 is
//           {"class_name": "L1L2", "config": {"l1": 0, "l2": ...}} (Keras's L1L2; TensorFlow.js has
//           no "L2" class); Keras's {"class_name": "L2", "config": {"l2": ...}} is read too.
//           Unknown config fields are ignored (Keras ignores many); fields for features tapeflow
//           lacks (constraints, activity regularizers, noise_shape...) must be null or absent.
// Errors:   std::invalid_argument naming the layer (class and name) and the field for a missing
//           or mistyped field, an unsupported feature, an unknown class name (listing the
//           registered ones), an unknown initializer / activation; std::invalid_argument for
//           registering a class name twice or an empty factory.
// Ref:      keras/src/saving/serialization_lib.py, keras.saving.register_keras_serializable,
//           tf_keras/src/layers/serialization.py
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "tape/core/config.h"

namespace tapeflow::layers {

// Makes a layer from the "config" object of its class.
using LayerFactory = std::function<std::shared_ptr<Layer>(const Config& config)>;

// Registers a layer class for deserialize(). Errors: std::invalid_argument for an empty name or
// factory, or a name already registered.
void register_layer_class(const std::string& class_name, LayerFactory factory);
// Whether deserialize() knows `class_name` (built-in or registered). Thread-safe.
bool is_layer_class_registered(const std::string& class_name);
// Registered class names, sorted.
std::vector<std::string> registered_layer_classes();

// {"class_name", "config"} of a layer. Errors: what layer.get_config() throws.
Config serialize(const Layer& layer);
// A new layer from {"class_name", "config"}. Errors: std::invalid_argument (see the header).
std::shared_ptr<Layer> deserialize(const Config& layer_config);

// Typed access to one layer's config with errors that name the layer and the field (what a custom
// layer's factory uses to read its get_config(); see examples/custom_layer.cc).
class ConfigReader {
 public:
  // `class_name` names the layer in errors ("Dense 'dense_3'" once the name is known); the reader
  // keeps its own copy of `config`. Errors: std::invalid_argument naming the class for a config
  // that is not an object.
  ConfigReader(Config config, std::string class_name);
  // The config object being read.
  const Config& config() const { return config_; }
  bool has(const std::string& key) const;  // present and not null
  std::string name() const;                // "" when absent (an automatic name)
  bool trainable() const;                  // true when absent
  std::optional<DType> dtype() const;      // empty when absent (float32, or the model's dtype)
  // The field as a number; `fallback` when null or absent. Errors (fail()): missing without a
  // fallback, not a number.
  double number(const std::string& key, std::optional<double> fallback = std::nullopt) const;
  // The field as an exact int64 (integral floats within range accepted); `fallback` when null or
  // absent. Errors (fail()): missing without a fallback, not an integer or out of int64's range.
  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback = std::nullopt) const;
  // The field as true/false; `fallback` when null or absent. Errors (fail()): missing without a
  // fallback, not a JSON boolean.
  bool boolean(const std::string& key, std::optional<bool> fallback = std::nullopt) const;
  // The field as a string; `fallback` when null or absent. Errors (fail()): missing without a
  // fallback, not a string.
  std::string string(const std::string& key, std::optional<std::string> fallback = std::nullopt) const;
  // The field as a list of integers ([3, 3]). Errors (fail()): missing, not a list of integers.
  std::vector<std::int64_t> integers(const std::string& key) const;
  // The field as a seed; empty when null or absent. Errors (fail()): not an integer, negative.
  std::optional<std::uint64_t> seed(const std::string& key) const;
  // The field as an initializer (deserialize_initializer); initializers::get(fallback) when null or
  // absent. Errors: std::invalid_argument naming the layer and the field.
  Initializer initializer(const std::string& key, const std::string& fallback) const;
  // The l2 factor of a regularizer field (0 when null or absent).
  double l2_regularizer(const std::string& key) const;
  // Errors unless the field is null or absent ("<layer>: config field 'x': not supported by tapeflow").
  void require_null(const std::string& key) const;
  // Applies the config's "trainable" to a newly made layer and returns it.
  template <class L>
  std::shared_ptr<L> finish(std::shared_ptr<L> layer) const {
    if (!trainable()) layer->set_trainable(false);
    return layer;
  }
  // Throws std::invalid_argument "<layer>: config field '<key>': <problem>".
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;

 private:
  Config config_;
  std::string where_;
};

}  // namespace tapeflow::layers
