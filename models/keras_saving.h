// Keras 3's native `.keras` format, both ways: save_model / load_model pick it for paths ending in
// ".keras" (models/saving_model.h); these are the functions behind them.
//
// Layout:   a zip (stored members, as Keras writes) of
//           metadata.json  {"keras_version": "3.15.1", "date_saved": "YYYY-MM-DD@HH:MM:SS"}
//           config.json    serialize_keras_object(model): the model config in Keras 3's form
//                          (models/keras3_config.h) plus "compile_config" {"optimizer", "loss",
//                          "metrics", "loss_weights": null, ...} when compiled
//           model.weights.h5  saving_lib's H5IOStore: "vars" (the model's own, none), then for
//                          each layer of the model "layers/<snake_case(class)>[_<k>]/vars/<i>"
//                          (k counting same-class layers in layer order: dense, dense_1, ...;
//                          nested models recurse: "layers/sequential/layers/dense/vars/0"), each
//                          vars group with attribute name = the layer's name; datasets "0", "1",
//                          ... are the layer's variables in order (Dense kernel, bias;
//                          BatchNormalization gamma, beta, moving_mean, moving_variance); a
//                          recurrent layer's are its cell's ("layers/lstm/cell/vars/<i>"),
//                          Bidirectional's its two layers' ("layers/bidirectional/forward_layer/
//                          cell/vars/<i>", then backward_layer), as saving_lib walks attributes;
//                          "optimizer/vars/<i>": iteration, learning_rate (when not a schedule),
//                          then the slots in Keras's creation order (Adam m0, v0, m1, v1, ...).
// Facts:    loading builds the model from config.json (Keras 3 or Keras 2 forms), checks every
//           key of every layer config (check_config_keys), reads and checks every weight and
//           optimizer variable before assigning any, matches a layer's vars group by path and,
//           where the file's name attribute names another layer of the same container, by name;
//           then compiles with the saved optimizer, loss and metrics so fit() continues.
//           Saving writes the weights through io::H5Writer into a temporary file, then the zip in
//           memory, then publishes it atomically (io::write_zip_atomic): no partial file, ever.
// Errors:   std::runtime_error "<file>: ..." naming the problem: not a zip / truncated / damaged
//           member (CRC), a missing member, config.json that is not JSON, "config.json: <layer>:
//           unknown config key 'k'", "config.json: ... unknown layer class 'C'", a missing vars
//           group or variable, a shape that differs ("layers/dense/vars/0 (Dense 'dense' kernel):
//           shape in file [3, 4] ...").
// Ref:      keras/src/saving/saving_lib.py (save_model, load_model, _save_state, H5IOStore)
#pragma once

#include <memory>
#include <string>

#include "models/model.h"
#include "models/saving_model.h"

namespace tapeflow::models {

// The "keras_version" written to metadata.json (the Keras 3 release whose format is written).
inline constexpr const char* kKeras3Version = "3.15.1";

// Writes `model` as a Keras 3 `.keras` zip at `path` (whatever its extension), atomically;
// options.include_optimizer false leaves out "optimizer/vars" (compile_config stays).
// Errors: std::logic_error for a subclassed model without get_config(); std::runtime_error naming
// the file for I/O.
void save_keras(const Model& model, const std::string& path, const SaveModelOptions& options = {});
// Reads a `.keras` zip (written by save_keras or Keras 3) at `path`: the model from config.json,
// its weights, and with options.compile (when there is a compile_config) the compiled optimizer,
// loss and metrics with the optimizer's variables.
// Errors: std::runtime_error "<file>: ..." as listed above; nothing is returned on any error.
std::shared_ptr<Model> load_keras(const std::string& path, const LoadModelOptions& options = {});

}  // namespace tapeflow::models
