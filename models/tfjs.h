// TensorFlow.js Layers format: export_tfjs writes what tf.loadLayersModel reads; load_tfjs reads it
// back, including models saved by TensorFlow.js's own model.save.
//
// Layout:   <dir>/model.json = {"format": "layers-model", "generatedBy": "tapeflow ...",
//           "convertedBy": null, "modelTopology": {"class_name", "config", "keras_version",
//           "backend"} (the Keras config of to_json), "weightsManifest": [{"paths":
//           ["group1-shard1of2.bin", ...], "weights": [{"name": "dense/kernel", "shape": [784,
//           128], "dtype": "float32"}, ...]}]}; the shards hold the weights' little-endian float32
//           bytes back to back in model.weights order, cut into files of at most 4 MiB
//           (4,194,304 bytes, TensorFlow.js's shard size). Every file is written atomically.
// Facts:    load_tfjs accepts modelTopology in both forms TensorFlow.js reads ({"class_name",
//           "config"} and the converter's {"model_config": ...}), matches weights by name
//           ("<layer>/<weight>"), float32 only (a float64 model is refused at export: TensorFlow.js
//           has no float64), and checks every weight before assigning any.
// Errors:   std::runtime_error "<file>: ..." for I/O, JSON that does not parse, a manifest entry
//           with an unsupported dtype or quantization, shards shorter than the manifest says, and
//           a weight that is missing or has another shape (naming it); config problems as
//           "<file>: modelTopology: <layer and field>"; std::invalid_argument from export_tfjs for
//           a non-float32 weight.
// Ref:      tfjs-layers src/models.ts (loadLayersModel), tfjs-core src/io/types.ts
//           (ModelJSON, WeightsManifestConfig), tensorflowjs converter write_weights.py
#pragma once

#include <memory>
#include <string>

#include "models/model.h"

namespace tapeflow::models {

// The largest weight shard export_tfjs writes: 4 MiB, TensorFlow.js's default shard size.
inline constexpr std::size_t kTfjsShardBytes = std::size_t{4} << 20;

// Writes `model` in the TensorFlow.js Layers format (the layout above) to `directory`, creating it
// if missing: model.json and the weight shards.
// Errors: std::invalid_argument naming the weight for a weight that is not float32;
// std::logic_error for a model without a config; std::runtime_error naming the file or directory
// for I/O.
void export_tfjs(const Model& model, const std::string& directory);
// `path`: the directory or its model.json.
std::shared_ptr<Model> load_tfjs(const std::string& path);

}  // namespace tapeflow::models
