// Keras 3's spelling of model configs, to and from the Keras 2 spelling that the layers' own
// get_config / from_config use: one translation for every layer class, so a layer serialized once
// is read and written in the `.keras` format and in Keras 3's legacy `.h5` files for free.
//
// Facts:    from_keras3: drops the "module", "registered_name", "build_config", "compile_config"
//           and "shared_object_id" keys of serialized objects; a DTypePolicy object becomes its
//           dtype name; InputLayer's "batch_shape" becomes "batch_input_shape"; a Functional
//           layer's inbound node {"args": [...], "kwargs": {...}} whose args hold
//           {"class_name": "__keras_tensor__", "config": {"keras_history": [layer, node, tensor]}}
//           (one tensor or a list) becomes Keras 2's [[layer, node, tensor, kwargs], ...], without
//           the node's "training" (Keras 3 runs every node in the mode of the model's call when
//           that call has one, as fit / evaluate / predict do; a node's training fixes nothing);
//           Bidirectional's backward_layer goes when it only mirrors `layer` (go_backwards flipped,
//           another name), as Keras 3 always writes it. A Keras
//           2 config passes through unchanged.
//           to_keras3: adds "module" and "registered_name" to every serialized object (layers
//           "keras.layers", Sequential "keras", Functional "keras.src.models.functional" with
//           registered_name "Functional", initializers, regularizers, constraints, optimizers,
//           losses, schedules by their Keras modules), InputLayer's "batch_shape", drops the
//           recurrent layers' "time_major": false (Keras 3 refuses it), and drops
//           tf.keras 2's optimizer fields "jit_compile" and "is_legacy_optimizer" that Keras 3's
//           optimizers refuse. Functional inbound nodes are Keras 3's {"args", "kwargs"} as
//           Functional::get_config writes them.
//           check_config_keys: every key of every layer config in a (from_keras3) model config
//           must be one the built layer's own get_config() writes, or a Keras 3 key tapeflow has
//           no feature for holding its default (quantization_config null, synchronized false,
//           renorm false, optional false, lora_rank null, data_format "channels_last", ...).
//           Layers are matched by name through nested models; a Bidirectional's inner layer
//           configs are checked against its forward and backward layers.
//           Nesting: configs deeper than kMaxConfigDepth (tape/core/config.h) JSON levels are refused.
// Errors:   std::invalid_argument naming the layer (class and name) and the key, or the depth.
// Ref:      keras/src/saving/serialization_lib.py (serialize_keras_object), keras/src/models/
//           functional.py (deserialize_node), keras/src/layers/core/input_layer.py
#pragma once

#include <nlohmann/json.hpp>

#include "tape/core/internal/config_json.h"
#include "models/model.h"

namespace tapeflow::models {

// A model or layer config in Keras 3's form rewritten in the Keras 2 form (see from_keras3 above);
// a Keras 2 config comes back unchanged. Errors: std::invalid_argument beyond kMaxConfigDepth.
nlohmann::json from_keras3(const nlohmann::json& config);
// A Keras 2 model config (model_to_config) in Keras 3's form, as config.json of a `.keras` file
// holds it (see to_keras3 above). Errors: std::invalid_argument beyond kMaxConfigDepth.
nlohmann::json to_keras3(const nlohmann::json& model_config);
// The config without tf.keras 2's keys that Keras 3 refuses at their defaults (time_major: false,
// which tf.keras 2 reads as absent too), and with "module": "keras.layers" on a wrapper's inner
// layer (Bidirectional's layer / backward_layer; tf.keras 2.13+ writes it so too): what our .h5
// files write, so Keras 3 loads them.
nlohmann::json without_keras2_only_keys(const nlohmann::json& config, int depth = 0);
// The config with every Functional inbound node that tf.keras 2's list form expresses for Keras 3
// as well (a call whose tensors are all in its first argument, with plain keyword arguments such as
// training) rewritten in that form, [[layer, node, tensor, kwargs], ...], which tf.keras 2 and
// Keras 3 both read; the other nodes (tensors in further arguments or keywords: MultiHeadAttention's
// value, key and attention_mask, initial_state, mask) stay in Keras 3's {"args", "kwargs"} form,
// the only one Keras 3 reads for them (tf.keras 2 reads neither our list form for them nor Keras 3's).
// What model_to_config (.h5, JSON, TF.js) writes. Errors: std::invalid_argument beyond kMaxConfigDepth.
nlohmann::json tf_keras_nodes(const nlohmann::json& config, int depth = 0);
// The Keras 3 form of an optimizer config ({"class_name", "config"}), and of a loss config.
nlohmann::json optimizer_to_keras3(const nlohmann::json& optimizer_config);
// loss_to_keras3: module "keras.losses" added, reduction "auto" renamed "sum_over_batch_size";
// a bare loss name passes unchanged.
nlohmann::json loss_to_keras3(const nlohmann::json& loss_config);

// A Functional layer entry's inbound node in Keras 2's list form [[layer, node, tensor, kwargs], ...]:
// Keras 3's {"args": [...], "kwargs": {...}} converted (MultiHeadAttention's positional value and
// key become tf.keras 2's "value" / "key" keyword references; other layers take one positional
// argument, a tensor or a list), a list passed through. Errors: std::invalid_argument naming
// class_name for other argument counts, a repeated argument, or an argument that is not a
// __keras_tensor__ where a tensor belongs.
nlohmann::json keras2_inbound_node(const nlohmann::json& node, const std::string& class_name);

// Checks that every key of every layer config in `model_config` (Keras 2 form, from from_keras3)
// is one the matching layer of `model` (built from that config) writes in its own get_config, or a
// Keras 3 key at the default tapeflow implements; a key tapeflow would silently ignore is refused.
// Errors: std::invalid_argument naming the layer (class and name) and the key.
void check_config_keys(const nlohmann::json& model_config, const Model& model);

}  // namespace tapeflow::models
