#include "models/internal/keras3_config.h"
#include "tape/core/internal/config_json.h"

#include <functional>
#include <map>
#include <stdexcept>
#include <string>

#include "layers/rnn/bidirectional.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"

namespace tapeflow::models {
using nlohmann::json;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

void check_depth(int depth) {
  if (depth > kMaxConfigDepth)
    throw std::invalid_argument("model config nests deeper than " + std::to_string(kMaxConfigDepth) + " levels");
}

bool is_serialized_object(const json& j) {
  return j.is_object() && j.contains("class_name") && j["class_name"].is_string() && j.contains("config");
}

// {"class_name": "__keras_tensor__", "config": {"keras_history": [l, n, t]}} -> [l, n, t, kwargs].
json history_ref(const json& t, const json& kwargs) {
  if (!t.is_object() || t.value("class_name", "") != "__keras_tensor__" || !t.contains("config") ||
      !t["config"].is_object() || !t["config"].contains("keras_history"))
    throw std::invalid_argument("inbound node argument is not a Keras tensor: " + t.dump().substr(0, 200));
  json ref = t["config"]["keras_history"];
  if (!ref.is_array() || ref.size() != 3)
    throw std::invalid_argument("inbound node keras_history is not [layer, node, tensor]: " + ref.dump().substr(0, 200));
  ref.push_back(kwargs);
  return ref;
}

// A Keras 3 call argument: a __keras_tensor__ becomes Keras 2's [layer, node, tensor]; others stay.
json keras2_argument(const json& v, int depth = 0) {
  check_depth(depth);
  if (v.is_object() && v.value("class_name", "") == "__keras_tensor__") {
    json ref = history_ref(v, json::object());
    ref.erase(3);
    return ref;
  }
  if (v.is_array()) {  // a list of tensors (initial_state)
    json out = json::array();
    for (const json& e : v) out.push_back(keras2_argument(e, depth + 1));
    return out;
  }
  return v;
}

bool holds_keras_tensor(const json& v, int depth = 0) {
  check_depth(depth);
  if (v.is_object() && v.value("class_name", "") == "__keras_tensor__") return true;
  if (v.is_array() || v.is_object())
    for (const json& e : v)
      if (holds_keras_tensor(e, depth + 1)) return true;
  return false;
}

}  // namespace

json keras2_inbound_node(const json& node, const std::string& class_name) {
  if (!node.is_object() || !node.contains("args")) return node;  // Keras 2's list form
  const json& args = node["args"];
  json kwargs = json::object();
  if (node.contains("kwargs") && node["kwargs"].is_object())
    for (const auto& [k, v] : node["kwargs"].items()) kwargs[k] = keras2_argument(v);
  const bool mha = class_name == "MultiHeadAttention";
  const bool op = class_name == "NotEqual";  // Keras 3's not_equal(x1, x2) with a constant x2
  const std::size_t most = mha ? 3 : op ? 2 : 1;  // MultiHeadAttention(query, value, key)
  if (!args.is_array() || args.empty() || args.size() > most)
    throw std::invalid_argument(class_name + ": inbound node with " + std::to_string(args.is_array() ? args.size() : 0) +
                                " positional arguments (" +
                                (mha  ? "MultiHeadAttention takes query, value and key"
                                 : op ? "NotEqual takes x1 and a constant x2"
                                      : "tapeflow layers take one tensor or one list") +
                                ")");
  if (mha && args.size() == 1)
    throw std::invalid_argument(class_name + ": inbound node without the value argument");
  // tf.keras 2's form: arguments beside the first as keywords (value, key; NotEqual's x2), tensors
  // as references.
  for (std::size_t i = 1; i < args.size(); ++i) {
    const char* k = op ? "x2" : i == 1 ? "value" : "key";
    if (kwargs.contains(k)) throw std::invalid_argument(class_name + ": inbound node gives '" + k + "' twice");
    kwargs[k] = keras2_argument(args[i]);
  }
  json refs = json::array();
  if (args[0].is_array())
    for (const json& t : args[0]) refs.push_back(history_ref(t, json::object()));
  else
    refs.push_back(history_ref(args[0], json::object()));
  if (refs.empty()) throw std::invalid_argument(class_name + ": inbound node with an empty list of tensors");
  if (!kwargs.empty()) refs[0][3] = kwargs;  // refused by Functional::from_config unless it knows them
  return refs;
}

namespace {

json from(const json& j, int depth) {
  check_depth(depth);
  if (j.is_array()) {
    json out = json::array();
    for (const json& e : j) out.push_back(from(e, depth + 1));
    return out;
  }
  if (!j.is_object()) return j;
  if (is_serialized_object(j) && j["class_name"] == "DTypePolicy" && j["config"].is_object() &&
      j["config"].contains("name"))
    return j["config"]["name"];
  json out = json::object();
  for (const auto& [key, value] : j.items()) {
    if (key == "module" || key == "registered_name" || key == "build_config" || key == "compile_config" ||
        key == "shared_object_id")
      continue;
    if (key == "inbound_nodes" && value.is_array()) {
      json nodes = json::array();
      const std::string cls = j.value("class_name", std::string());
      for (json n : value) {
        // Keras 3 runs a node in the training mode of the model's call whenever that call has one
        // (fit, evaluate and predict always do; keras/src/models/functional.py, operation_fn), so
        // the "training" a Keras 3 node records (written false on many calls made without it) fixes
        // nothing, unlike tf.keras 2's (and tapeflow's CallFlags::training): dropped.
        if (n.is_object() && n.contains("kwargs") && n["kwargs"].is_object() && n["kwargs"].contains("training")) {
          const json& t = n["kwargs"]["training"];
          if (!t.is_boolean() && !t.is_null())
            throw std::invalid_argument(cls + ": inbound node call argument 'training': " + t.dump().substr(0, 120) +
                                        " is not true, false or null");
          n["kwargs"].erase("training");
        }
        nodes.push_back(keras2_inbound_node(n, cls));
      }
      out[key] = nodes;
      continue;
    }
    out[key] = from(value, depth + 1);
  }
  // Keras 3's Bidirectional always writes backward_layer; when it is just the mirror of `layer`
  // (same class and config but the name and go_backwards), it says nothing Bidirectional's default
  // does not, so it goes (any other backward_layer stays, for the layer to refuse by name).
  if (out.value("class_name", "") == "Bidirectional" && out.contains("config") && out["config"].is_object()) {
    json& c = out["config"];
    if (c.contains("layer") && c.contains("backward_layer") && is_serialized_object(c["layer"]) &&
        is_serialized_object(c["backward_layer"]) && c["layer"]["class_name"] == c["backward_layer"]["class_name"] &&
        c["layer"]["config"].is_object() && c["backward_layer"]["config"].is_object()) {
      json f = c["layer"]["config"], b = c["backward_layer"]["config"];
      const bool flipped = f.value("go_backwards", false) != b.value("go_backwards", false);
      for (const char* k : {"name", "go_backwards"}) {
        f.erase(k);
        b.erase(k);
      }
      if (flipped && f == b) c.erase("backward_layer");
    }
  }
  if (out.value("class_name", "") == "InputLayer" && out.contains("config") && out["config"].is_object()) {
    json& c = out["config"];
    if (c.contains("batch_shape") && !c.contains("batch_input_shape")) {
      c["batch_input_shape"] = c["batch_shape"];
      c.erase("batch_shape");
    }
  }
  return out;
}

json with_module(json j, const char* module, const json& registered_name = nullptr) {
  json out = {{"module", module}, {"class_name", j["class_name"]}, {"config", j["config"]},
              {"registered_name", registered_name}};
  for (const auto& [key, value] : j.items())
    if (!out.contains(key)) out[key] = value;
  return out;
}

json layer_to(const json& j, int depth);

// The config of a layer: its serialized pieces get their modules.
json layer_config_to(const json& c, int depth) {
  check_depth(depth);
  if (!c.is_object()) return c;
  json out = json::object();
  for (const auto& [key, value] : c.items()) {
    if (key == "time_major" && value == false) continue;  // tf.keras 2's, refused by Keras 3's RNNs
    if (key == "layers" && value.is_array()) {
      json list = json::array();
      for (const json& l : value) list.push_back(layer_to(l, depth + 1));
      out[key] = list;
    } else if (is_serialized_object(value) && ends_with(key, "_initializer")) {
      out[key] = with_module(value, "keras.initializers");
    } else if (is_serialized_object(value) && ends_with(key, "_regularizer")) {
      out[key] = with_module(value, "keras.regularizers");
    } else if (is_serialized_object(value) && ends_with(key, "_constraint")) {
      out[key] = with_module(value, "keras.constraints");
    } else if (is_serialized_object(value) && key == "layer") {  // a wrapper's inner layer
      out[key] = layer_to(value, depth + 1);
    } else {
      out[key] = value;
    }
  }
  return out;
}

json layer_to(const json& j, int depth) {
  check_depth(depth);
  if (!is_serialized_object(j)) return j;
  const std::string cls = j["class_name"].get<std::string>();
  json copy = j;
  copy["config"] = layer_config_to(j["config"], depth + 1);
  if (cls == "InputLayer" && copy["config"].is_object() && copy["config"].contains("batch_input_shape")) {
    copy["config"]["batch_shape"] = copy["config"]["batch_input_shape"];
    copy["config"].erase("batch_input_shape");
  }
  if (cls == "Sequential") return with_module(copy, "keras");
  if (cls == "NotEqual") return with_module(copy, "keras.src.ops.numpy", "NotEqual");  // an op, not a layer
  if (cls == "Functional" || cls == "Model") {
    copy["class_name"] = "Functional";
    return with_module(copy, "keras.src.models.functional", "Functional");
  }
  return with_module(copy, "keras.layers");
}

// Keras 3 keys that tapeflow's layers do not write, accepted only with the value that means "no
// such feature" (any value for the informational ones).
bool keras3_default(const std::string& key, const json& v) {
  static const std::map<std::string, json> defaults = {
      {"quantization_config", nullptr}, {"synchronized", false}, {"renorm", false},
      {"renorm_clipping", nullptr},     {"optional", false},     {"lora_rank", nullptr},
      {"lora_alpha", nullptr},          {"activity_regularizer", nullptr},
      {"kernel_constraint", nullptr},   {"bias_constraint", nullptr},
      {"beta_constraint", nullptr},     {"gamma_constraint", nullptr},
      {"noise_shape", nullptr},         {"seed", nullptr},       {"groups", 1},
      {"output_padding", nullptr},      {"data_format", "channels_last"},
      {"sparse", false},                {"ragged", false},       {"trainable", true},
      {"use_gate", false},              {"sliding_window", nullptr}};  // MultiHeadAttention's
  static const char* informational[] = {"renorm_momentum", "build_input_shape", "dtype", "name"};
  for (const char* k : informational)
    if (key == k) return true;
  const auto it = defaults.find(key);
  return it != defaults.end() && it->second == v;
}

void collect_layers(const layers::Layer& layer, std::map<std::string, const layers::Layer*>& by_name) {
  by_name.emplace(layer.name(), &layer);
  for (const auto& l : layer.layers()) collect_layers(*l, by_name);
}

// The keys of one layer config `j` against the built `layer`'s own get_config(), and a wrapper's
// inner layer configs (Bidirectional's layer / backward_layer) against its inner layers.
void check_layer_keys(const json& j, const layers::Layer& layer, int depth) {
  check_depth(depth);
  if (!is_serialized_object(j) || !j["config"].is_object()) return;
  const json& c = j["config"];
  const std::string cls = j["class_name"].get<std::string>();
  const std::string name = c.value("name", j.value("name", std::string()));
  const json ours = json_of(layer.get_config());
  for (const auto& [key, value] : c.items())
    if (!ours.contains(key) && !keras3_default(key, value))
      throw std::invalid_argument(cls + " '" + name + "': unknown config key '" + key + "' = " +
                                  value.dump().substr(0, 100) +
                                  (ours.is_object() ? " (tapeflow's " + cls + " does not have it)" : ""));
  if (const auto* bi = dynamic_cast<const layers::Bidirectional*>(&layer); bi != nullptr) {
    if (c.contains("layer") && bi->forward_layer()) check_layer_keys(c["layer"], *bi->forward_layer(), depth + 1);
    if (c.contains("backward_layer") && bi->backward_layer())
      check_layer_keys(c["backward_layer"], *bi->backward_layer(), depth + 1);
  }
}

void check_keys(const json& j, const std::map<std::string, const layers::Layer*>& by_name, int depth) {
  check_depth(depth);
  if (!is_serialized_object(j) || !j["config"].is_object()) return;
  const json& c = j["config"];
  const std::string name = c.value("name", j.value("name", std::string()));
  if (const auto it = by_name.find(name); it != by_name.end()) check_layer_keys(j, *it->second, depth);
  if (c.contains("layers") && c["layers"].is_array())
    for (const json& l : c["layers"]) check_keys(l, by_name, depth + 1);
}

}  // namespace

json from_keras3(const json& config) { return from(config, 0); }

json to_keras3(const json& model_config) { return layer_to(model_config, 0); }

namespace {

// A copy of `config`, arrays and objects walked; `entry(object, key, value, depth, out)` may write
// out[key] itself (returning true) or leave the entry to the plain walk (false).
using EntryRewrite = std::function<bool(const json&, const std::string&, const json&, int, json&)>;
json rewrite_entries(const json& config, int depth, const EntryRewrite& entry) {
  check_depth(depth);
  if (config.is_array()) {
    json out = json::array();
    for (const json& e : config) out.push_back(rewrite_entries(e, depth + 1, entry));
    return out;
  }
  if (!config.is_object()) return config;
  json out = json::object();
  for (const auto& [key, value] : config.items())
    if (!entry(config, key, value, depth, out)) out[key] = rewrite_entries(value, depth + 1, entry);
  return out;
}

}  // namespace

json without_keras2_only_keys(const json& config, int depth) {
  return rewrite_entries(config, depth, [](const json&, const std::string& key, const json& value, int d, json& out) {
    if (key == "time_major" && value == false) return true;
    // A wrapper's inner layer (Bidirectional's layer / backward_layer) with its module: Keras 3's
    // legacy .h5 loader deserializes it through serialization_lib, which cannot find "GRU" without one.
    if ((key == "layer" || key == "backward_layer") && is_serialized_object(value) && !value.contains("module")) {
      out[key] = with_module(without_keras2_only_keys(value, d + 1), "keras.layers");
      return true;
    }
    return false;
  });
}

json tf_keras_nodes(const json& config, int depth) {
  return rewrite_entries(config, depth, [](const json& object, const std::string& key, const json& value, int, json& out) {
    if (key != "inbound_nodes" || !value.is_array()) return false;
    const std::string cls = object.value("class_name", std::string());
    json nodes = json::array();
    for (const json& n : value) {
      // Only the first argument's tensors, plain keywords: tf.keras 2's list form says the same to
      // Keras 3 (its "legacy case" calls the layer on that argument with those keywords).
      const bool listable = n.is_object() && n.contains("args") && n["args"].is_array() && n["args"].size() == 1 &&
                            !holds_keras_tensor(n.value("kwargs", json::object()));
      nodes.push_back(listable ? keras2_inbound_node(n, cls) : n);
    }
    out[key] = nodes;
    return true;
  });
}

json optimizer_to_keras3(const json& optimizer_config) {
  json o = optimizer_config;
  if (o.contains("config") && o["config"].is_object()) {
    json& c = o["config"];
    c.erase("jit_compile");
    c.erase("is_legacy_optimizer");
    if (is_serialized_object(c.value("learning_rate", json())))
      c["learning_rate"] = with_module(c["learning_rate"], "keras.optimizers.schedules");
  }
  return with_module(o, "keras.optimizers");
}

json loss_to_keras3(const json& loss_config) {
  if (!is_serialized_object(loss_config)) return loss_config;
  json l = loss_config;
  if (l["config"].is_object() && l["config"].value("reduction", "") == "auto")
    l["config"]["reduction"] = "sum_over_batch_size";  // Keras 3's name for tf.keras's "auto"
  return with_module(l, "keras.losses");
}

void check_config_keys(const json& model_config, const Model& model) {
  std::map<std::string, const layers::Layer*> by_name;
  collect_layers(model, by_name);
  check_keys(model_config, by_name, 0);
}

}  // namespace tapeflow::models
