// save_weights / load_weights in the TF-Keras 2 HDF5 weights layout.
//
// Layout:   root attributes layer_names (fixed-length strings, every top-level layer), backend
//           ("tensorflow"), keras_version ("2.15.0"); one group per layer with attribute
//           weight_names ("dense/kernel:0", ...; empty for layers without weights) holding one
//           dataset per weight at that name (so "dense/dense/kernel:0" from the root), row-major,
//           Dense kernel [in, out]; BatchNormalization gamma, beta, moving_mean, moving_variance.
//           The layers are the model's tracked sublayers (Sequential's stack); a layer without
//           sublayers is saved as one layer. Files are written through io::H5Writer (temporary
//           file, fsync, rename; Fletcher-32 per chunk), read through io::H5Reader.
// Facts:    load matches each weighted model layer to the file's group of the same name, else to
//           the file's weighted layer at the same position (Keras's topological loading); weights
//           inside a layer match by order. Every shape, dtype and checksum is checked before any
//           variable is assigned (all values are read into fresh tensors first), so a failed load
//           changes nothing.
// Errors:   std::runtime_error "<file>: ..." for I/O and hostile files (not HDF5, missing
//           layer_names / group / weight_names / dataset, different weighted-layer or weight
//           counts), and for a mismatch: "layer 'dense' weight 'dense/kernel:0': shape in file
//           [3, 5], model expects [4, 5]" (dtype likewise).
// Ref:      tf_keras/src/saving/legacy/hdf5_format.py (save_weights_to_hdf5_group,
//           load_weights_from_hdf5_group)
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "layers/layer.h"
#include "models/io/h5_io.h"

namespace tapeflow::models {

// Writes the weights of `model` (a model or a single layer) to the HDF5 file `path` in the layout
// above, atomically (any file name; tf.keras 2 reads it with load_weights).
// Errors: std::runtime_error naming the file for I/O.
void save_weights(const layers::Layer& model, const std::string& path);
// Reads weights in the layout above (written by save_weights or tf.keras 2's save_weights to .h5)
// into `model`'s variables, all or nothing.
// Errors: std::runtime_error "<file>: ..." as listed above; no variable changes then.
void load_weights(layers::Layer& model, const std::string& path);

// The same layout under `group` of an open file ("" = root); used by Checkpoint.
void write_keras_weights(io::H5Writer& writer, const std::string& group, const layers::Layer& model);
// Reads that layout from under `group` into `model`'s variables, all or nothing (plan_keras_weights
// then assign_weights). Errors: as load_weights.
void read_keras_weights(const io::H5Reader& reader, const std::string& group, layers::Layer& model);

// Values read and checked but not yet assigned, in reading order: read_keras_weights is
// plan_keras_weights (appends to `plan`, changes no variable; throws what read_keras_weights
// throws) then assign_weights, so a caller can check more state before anything changes.
using WeightPlan = std::vector<std::pair<Variable, Tensor>>;
// Reads and checks the layout under `group` for `model` and appends (variable, value) pairs to `plan`
// without assigning any. Errors: std::runtime_error "<file>: ..." as read_keras_weights.
void plan_keras_weights(const io::H5Reader& reader, const std::string& group, layers::Layer& model,
                        WeightPlan& plan);
// Makes every value its variable's value without copying (Variable::assign_shared: later in-place
// updates copy first while the plan or anything else still holds the tensor). All or nothing:
// Errors: std::invalid_argument, before any variable changes, if a value's shape or dtype is not
// its variable's (never for a plan made by plan_keras_weights).
void assign_weights(const WeightPlan& plan);

// A dataset as a new tensor of its shape and dtype (read in place, checksums verified), and back.
// Errors: std::runtime_error "<file>: ..." from io::H5Reader, or for a rank above 8.
Tensor read_tensor(const io::H5Reader& reader, const std::string& path);
// Writes `t` as the dataset `path` (its shape and dtype, row-major; parent groups created).
// Errors: from io::H5Writer: std::invalid_argument naming the file and dataset if it already exists,
// std::runtime_error for I/O.
void write_tensor(io::H5Writer& writer, const std::string& path, const Tensor& t);

}  // namespace tapeflow::models
