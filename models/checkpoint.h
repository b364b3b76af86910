// Checkpoint (model + optimizer + counters + RNG state + traced functions in one HDF5 file) and
// CheckpointManager (numbered checkpoints in a directory with an atomically updated index).
//
// Layout:   root attributes format "tapeflow-checkpoint", format_version 1, config (optional text);
//           model_weights/   the Keras weights layout of models/saving.h;
//           optimizer_weights/  attributes weight_names (optimizer.variables() names: iterations,
//                            then slots), optimizer (its name), learning_rate_schedule (schedule
//                            name or "constant"); one dataset per name;
//           variables/<name>, counters/<name> (int64 scalar, never negative), generators/<name> (int64 [6], the
//           Generator state bits); functions/<name>: attribute program (FunctionGraph text) and
//           datasets constants/<i>.
// Facts:    write() goes through io::H5Writer (temporary file + fsync + rename, Fletcher-32 per
//           chunk), so a crash leaves the old file or the new one. write() and read() first build
//           the optimizer's slots for the model's trainable variables. read() checks everything it
//           restores (shapes, dtypes, counts) before assigning anything, restores optimizer weights by order
//           (as Keras), and registers every saved function (register_function) so call_function
//           and tape.gradient use its saved custom gradient. Entries in the file that nothing
//           tracks are ignored; a tracked entry missing from the file is an error. Learning-rate
//           schedules are pure functions of `iterations`, so restoring iterations restores them.
//           The training generators of the model's layers (Layer::training_generator: Dropout
//           masks) are tracked as generators/model_rng.<i> (i-th such layer, depth first), so a
//           resumed run draws the same masks.
// Errors:   std::runtime_error "<file>: <problem>" for I/O, hostile or mismatched files (missing
//           group/attribute/dataset, wrong shape or dtype naming the variable and both shapes,
//           a different schedule, an unknown op in a saved function, a negative counter, a
//           function that would call itself, a variable-length string attribute); std::invalid_argument
//           for a bad tracking name or a duplicate.
// Ref:      tf.train.Checkpoint, tf.train.CheckpointManager
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "optimizers/optimizer.h"
#include "tape/core/random.h"
#include "tape/function/function.h"
#include "tape/runtime/variable.h"

namespace tapeflow::models {

// What a Checkpoint saves besides the extra state tracked later (tf.train.Checkpoint(model=...,
// optimizer=...)); either may be null.
struct CheckpointOptions {
  // The model whose weights go to model_weights/ (and whose layers' training generators are tracked).
  std::shared_ptr<layers::Layer> model;
  // The optimizer whose variables (iterations, then slots) go to optimizer_weights/.
  std::shared_ptr<optimizers::Optimizer> optimizer;
};

// Saves and restores a model, an optimizer and tracked extra state (variables, counters, random
// generators, traced functions) as one HDF5 file; the layout, guarantees and errors are in the file
// comment above. Ref: tf.train.Checkpoint
class Checkpoint {
 public:
  // Tracks options.model's layer training generators as "model_rng.<i>" (track_layer_generators).
  explicit Checkpoint(CheckpointOptions options = {});

  // Extra state. Names: [A-Za-z0-9_.-]+, unique per kind. Pointers are not owned and must outlive
  // the checkpoint's write()/read() calls.
  // Errors: std::invalid_argument for a bad or duplicate name or an undefined variable.
  void track_variable(const std::string& name, const Variable& variable);
  // Saves *counter as counters/<name> (an int64 scalar) and restores it; a negative value in the file
  // is an error. Errors: std::invalid_argument for a bad or duplicate name or a null pointer.
  void track_counter(const std::string& name, std::int64_t* counter);
  // Saves the generator's state as generators/<name> and restores it, so draws continue as in the
  // saved run. Errors: std::invalid_argument for a bad or duplicate name or a null pointer.
  void track_generator(const std::string& name, Generator* generator);
  // Tracks the training generator of every layer in `model`'s tree (depth first, the model itself
  // first) that has one, as "<prefix>.<i>". Returns how many.
  std::size_t track_layer_generators(const std::string& prefix, layers::Layer& model);
  // Saves a traced function (with its gradient when traced with trace_custom_gradient).
  void add_function(const FunctionGraph& function);
  // Free text saved as the root attribute "config" (apps store the flags a run was trained with,
  // so a reuse or resume with other flags can be detected). Errors: std::invalid_argument for a NUL.
  void set_config(std::string config);
  // The "config" of the file the last read() restored ("" if it had none).
  const std::string& loaded_config() const { return loaded_config_; }

  // Writes everything tracked to `path` (the layout above), atomically: temporary file, fsync,
  // rename. Errors: std::runtime_error naming the file for I/O.
  void write(const std::string& path) const;
  // Restores everything tracked from a file write() made; checks all of it before assigning anything.
  // Errors: std::runtime_error "<file>: <problem>" for a file that is not a tapeflow checkpoint (or
  // of another format_version), a tracked entry missing, a shape, dtype or count mismatch, a
  // different optimizer schedule, a bad saved function, or I/O.
  void read(const std::string& path);
  // Names of the functions registered by the last read().
  const std::vector<std::string>& loaded_functions() const { return loaded_functions_; }

 private:
  CheckpointOptions options_;
  std::vector<std::pair<std::string, Variable>> variables_;
  std::vector<std::pair<std::string, std::int64_t*>> counters_;
  std::vector<std::pair<std::string, Generator*>> generators_;
  std::vector<FunctionGraph> functions_;
  std::vector<std::string> loaded_functions_;
  std::string config_, loaded_config_;
};

// Keeps the newest `max_to_keep` checkpoints "<directory>/ckpt-<n>.h5" and an index file
// "<directory>/checkpoint" listing them (oldest first), replaced atomically after each save.
// Facts:    the checkpoint files themselves are the truth: the constructor lists every
//           "ckpt-<n>.h5" in the directory (a save killed between its rename and the index update,
//           or an index that is missing or damaged, loses nothing) and numbers new saves after the
//           largest n found (and after the index's "next"), so a save never overwrites an existing
//           file. save() writes the new file (atomically), then the index, then deletes the oldest
//           files beyond max_to_keep. restore() reads the newest file and falls back to older ones
//           when a file cannot be read (logging a warning per file). The constructor creates the
//           directory and removes temporary files of dead writers. A damaged index is logged and
//           ignored.
// Errors:   std::invalid_argument for a null checkpoint or max_to_keep < 1; std::runtime_error for
//           I/O (naming the directory), and from restore() when files exist but none can be read
//           (naming each file and its problem; the files are left alone).
class CheckpointManager {
 public:
  // Manages `checkpoint`'s files in `directory` (created if missing), keeping the newest
  // max_to_keep of them (tf.train.CheckpointManager's argument; it has no default there, 5 here).
  // Errors: std::invalid_argument for a null checkpoint or max_to_keep < 1; std::runtime_error naming
  // the directory if it cannot be created or listed, or is not a directory.
  CheckpointManager(std::shared_ptr<Checkpoint> checkpoint, std::string directory, int max_to_keep = 5);
  // Saves a new checkpoint; returns its path.
  std::string save();
  // The newest checkpoint's path, if any.
  std::optional<std::string> latest_checkpoint() const;
  // Paths of the kept checkpoints, oldest first.
  std::vector<std::string> checkpoints() const;
  // Restores the newest readable checkpoint; returns its path (nullopt when there is none: nothing
  // changes).
  std::optional<std::string> restore();
  // The checkpoint directory given to the constructor.
  const std::string& directory() const { return directory_; }

 private:
  void read_index();
  void write_index() const;
  std::shared_ptr<Checkpoint> checkpoint_;
  std::string directory_;
  int max_to_keep_;
  std::int64_t next_ = 1;
  std::vector<std::string> kept_;  // file names, oldest first
};

}  // namespace tapeflow::models
