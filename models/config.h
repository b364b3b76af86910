// Whole-model configs: model.to_json(), model_from_json(), and loss configs.
//
// Facts:    to_json(model) = {"class_name": "Sequential" | "Functional", "config": ...,
//           "keras_version": "2.15.0", "backend": "tensorflow"} (Keras 2's model.to_json()).
//           model_from_config / model_from_json accept "Sequential", "Functional" and "Model"
//           (the name older Keras and TensorFlow.js use for functional models) and return a
//           built model with fresh weights (load weights next). Sequential and Functional are
//           also registered as layer classes, so nested models deserialize.
//           Losses: serialize_loss gives {"class_name": "SparseCategoricalCrossentropy",
//           "config": {"reduction": "auto", "name", "from_logits", ...}}; deserialize_loss also
//           takes Keras's string names ("sparse_categorical_crossentropy", "mse", ...).
// Errors:   std::invalid_argument for JSON that does not parse (with the parser's position), that
//           nests deeper than kMaxConfigDepth (tape/core/config.h) or that is not a model
//           config, and whatever layer deserialization throws (naming the layer and the field);
//           std::logic_error from to_json for a subclassed model without a config.
// Ref:      keras.models.model_from_json, Model.to_json, keras.losses.serialize / deserialize
#pragma once

#include <memory>
#include <string>

#include "models/losses.h"
#include "models/model.h"
#include "tape/core/config.h"

namespace tapeflow::models {

// The "keras_version" to_json writes (the Keras 2 release whose model JSON tapeflow writes).
inline constexpr const char* kKerasVersion = "2.15.0";

// Registers Sequential and Functional with layers::register_layer_class (idempotent; done by the
// functions below before they deserialize).
void register_model_classes();

// Keras 2's model_to_config: {"class_name", "config"} with Functional inbound nodes in tf.keras 2's
// list form wherever Keras 3 reads that form as well (models/keras3_config.h, tf_keras_nodes): what
// .h5 files, to_json and export_tfjs write. Errors: std::logic_error for a model without a config.
Config model_to_config(const Model& model);
// Keras 2's model.to_json(): model_to_config plus "keras_version" (kKerasVersion) and "backend"
// ("tensorflow"); indent as Config::to_json_string (-1: one line).
// Errors: std::logic_error for a subclassed model (or layer) without a config.
std::string to_json(const Model& model, int indent = -1);
// keras.models.model_from_config: a built model with fresh weights from {"class_name", "config"}
// ("Sequential", "Functional", "Model" or a registered model class).
// Errors: std::invalid_argument for JSON nested deeper than kMaxConfigDepth, no class_name, an
// unknown class, a class that is a layer and not a model, or a bad layer config (naming the
// layer and the field).
std::shared_ptr<Model> model_from_config(const Config& config);
// keras.models.model_from_json: parses json_text, then model_from_config.
// Errors: std::invalid_argument for text that does not parse (the parser's message and position),
// and what model_from_config throws.
std::shared_ptr<Model> model_from_json(const std::string& json_text);

// keras.losses.serialize: {"class_name": loss.class_name(), "config": loss.get_config()}.
// Errors: std::logic_error (from Loss::get_config) for a loss class without a config.
Config serialize_loss(const Loss& loss);
// keras.losses.deserialize: a loss from a Keras name ("mse", ...; see get_loss in models/losses.h)
// or {"class_name", "config"} of
// SparseCategoricalCrossentropy, CategoricalCrossentropy, BinaryCrossentropy or MeanSquaredError
// (reduction "auto" / "sum_over_batch_size" / "sum" / "none").
// Errors: std::invalid_argument for an unknown name or class, a bad field, or what tapeflow does
// not support (label_smoothing != 0, axis != -1, a non-null ignore_class).
std::shared_ptr<Loss> deserialize_loss(const Config& config);

}  // namespace tapeflow::models
