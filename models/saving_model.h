// save_model / load_model: a whole model (architecture, weights, compile state, optimizer state) in
// one HDF5 file with Keras 2's full-model layout.
//
// Layout:   root attributes model_config (to_json's {"class_name", "config"}), keras_version
//           ("2.15.0"), backend ("tensorflow"), training_config (when compiled: {"loss",
//           "metrics", "weighted_metrics": null, "loss_weights": null, "optimizer_config": without
//           tf.keras 2.15's jit_compile / is_legacy_optimizer, which Keras 3 refuses; loss reduction
//           "sum_over_batch_size" for "auto", which Keras 3 refuses});
//           model_weights/  the save_weights layout (models/saving.h);
//           optimizer_weights/  attribute weight_names and one dataset per name, in the order
//           and with the names tf.keras 2.15 writes (optimizers/serialization.h keras_weights:
//           "iteration:0", "m/dense/kernel:0", "v/dense/kernel:0", ...), for the model's trainable
//           variables. Written through io::H5Writer: a temporary file, fsync, rename (a crash
//           leaves the old file or the new one); Fletcher-32 checksums on every chunk.
// Facts:    load_model rebuilds the model from model_config (no defining code needed), reads
//           and checks every weight and optimizer value, then assigns them all at once and compiles
//           the model with the saved loss, metrics and optimizer (its slots restored), so fit()
//           continues exactly where the saved model stopped. Nothing is returned on any error.
//           Layers' private generators (Dropout masks) are not saved.
// Errors:   std::runtime_error "<file>: ..." for I/O and missing or hostile parts (no
//           model_config, JSON that does not parse, a missing group or dataset, an optimizer weight
//           count or shape that does not match: naming the weight); config problems (unknown
//           classes, bad fields) as std::runtime_error "<file>: model_config: <layer and field>";
//           std::logic_error from save_model for a subclassed model without get_config().
// Ref:      tf_keras/src/saving/legacy/hdf5_format.py (save_model_to_hdf5, load_model_from_hdf5)
#pragma once

#include <memory>
#include <string>

#include "models/model.h"

namespace tapeflow::models {

// Keyword arguments of keras.models.save_model.
struct SaveModelOptions {
  // Also save the optimizer's variables (Keras's default true); false: a compiled model still saves
  // its compile config, so load_model compiles it with a fresh optimizer.
  bool include_optimizer = true;
};

// Keyword arguments of keras.models.load_model.
struct LoadModelOptions {
  bool compile = true;  // false: architecture and weights only
};

// Saves `model` whole to `path`: Keras 3's `.keras` zip (save_keras, models/keras_saving.h) when the
// path ends in ".keras", else the Keras 2 HDF5 layout above (".h5" or any other name), atomically.
// Errors: std::logic_error for a subclassed model without get_config(); std::runtime_error naming
// the file for I/O.
void save_model(const Model& model, const std::string& path, const SaveModelOptions& options = {});
// Loads a model that save_model, tf.keras 2 (.h5) or Keras 3 (.keras, or its legacy .h5) saved:
// the architecture from its config, the weights, and (with options.compile, when the file has a
// training config) the compiled loss, metrics and optimizer with its restored state.
// Errors: std::runtime_error "<file>: ..." as listed above (nothing is returned or changed).
std::shared_ptr<Model> load_model(const std::string& path, const LoadModelOptions& options = {});

}  // namespace tapeflow::models
