// Model: a Layer that trains — compile, fit, evaluate, predict, overridable train_step, summary.
//
// Facts:    Subclass it like keras.Model: create sublayers in the constructor with track_layer(),
//           override call(inputs, training); override train_step / test_step for custom loops.
//           fit(x, y) slices x and y along the first axis into a Dataset, shuffled each epoch
//           (seeded by FitOptions::seed: the same seed gives the same batches; epoch e is shuffle
//           pass e, so a fit resumed with initial_epoch = e continues the data order), batched with a
//           row memcpy and prefetched by a background task. Per-epoch logs: "loss" (the example-
//           weighted mean of the batch losses), then each metric — i.e. the logs returned by the
//           epoch's last train_step — then "val_loss" and "val_<metric>" from test_step.
//           verbose (as Keras): 0 silent; 1 "Epoch 3/10" and a progress bar on stdout
//           ("469/469 [======>....] - ETA: 3s - loss: 0.4267 - accuracy: 0.8445", ProgbarLogger),
//           for terminals; 2 (for logs) one spdlog line per epoch
//           "Epoch 3/10 - 469 steps - 1.21s 2.6ms/step - loss: 0.3512 - accuracy: 0.8721 - val_..."
//           and a line every 5 s during the epoch.
// Replicas: given FitOptions/EvaluateOptions::replica_context with size() N > 1 (distribute::Context
//           over MPI), fit and evaluate run data-parallel (Horovod's design):
//           - fit(x, y): every rank shuffles the whole set with the same seed, keeps its shard
//             (Dataset::shard(N, rank): example i of the pass goes to rank i % N) and batches it
//             by batch_size / N, so the ranks' batches of one step together form the global batch
//             of batch_size examples that one process would see (batch_size must be >= N; if N
//             does not divide it the global batch is N · floor(batch_size / N), warned). Each
//             epoch runs floor(n / global batch) steps on every rank: the uneven tail (fewer than
//             one global batch, different examples each epoch) is dropped.
//           - fit(dataset): the dataset is this rank's (shard it yourself); the ranks agree up front
//             on the smallest number of batches per epoch and each runs that many (the rest of a
//             longer rank's pass is dropped, warned). Before every step the ranks also agree that
//             each has a batch and nobody stopped, so uneven data never deadlocks.
//           - train_step averages the gradients across ranks (ReplicaContext::gradient), so every
//             rank applies the same update; BatchNormalization's moving statistics stay local to
//             each rank (Horovod's default) until the end of fit, when rank 0's variables (all of
//             them, moving statistics included) are broadcast to every rank.
//           - the logs (loss, metrics, val_*) are averaged across ranks, weighted by examples, so
//             they equal what one process would report on the same examples; callbacks and the
//             epoch log line run on rank 0 only; rank 0's stop_training and constant learning
//             rate (LearningRateScheduler) are broadcast at each epoch's start and end.
//           - evaluate(x, y) shards the examples (no example dropped) and averages the logs.
//           With N = 1 everything behaves as without a context.
// Errors:   std::logic_error for fit/evaluate before compile (or without a loss), and for a call()
//           that a subclass did not override; std::invalid_argument for bad options (epochs < 0,
//           batch_size < 1), x and y of different lengths, or a dataset whose examples are not {x, y}.
// Ref:      keras/src/trainers/trainer.py, keras/src/backend/tensorflow/trainer.py
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "data/dataset.h"
#include "layers/layer.h"
#include "models/callbacks.h"
#include "models/logs.h"
#include "models/losses.h"
#include "models/metrics.h"
#include "models/replica_context.h"
#include "optimizers/optimizer.h"

namespace tapeflow::models {

// A metric given by Keras name ("accuracy"/"acc", "sparse_categorical_accuracy",
// "categorical_accuracy", "binary_accuracy") or as an object. "accuracy" follows the loss as in
// Keras: sparse categorical for SparseCategoricalCrossentropy, categorical for
// CategoricalCrossentropy, binary for BinaryCrossentropy, else element-wise Accuracy.
struct MetricSpec {
  // A metric by Keras name, resolved by compile (against the compiled loss for "accuracy").
  // Errors: std::invalid_argument from compile for an unknown name, listing the known ones.
  MetricSpec(const char* name) : name(name) {}                                   // NOLINT
  // A metric by Keras name, as MetricSpec(const char*).
  MetricSpec(std::string name) : name(std::move(name)) {}                        // NOLINT
  // A metric object, used as given (its name() is its key in the logs).
  MetricSpec(std::shared_ptr<PredictionMetric> metric) : metric(std::move(metric)) {}  // NOLINT
  std::string name;                          // the Keras name ("" when given as an object)
  std::shared_ptr<PredictionMetric> metric;  // the metric object (null when given by name)
};

// A loss given by Keras name (see get_loss) or as an object.
struct LossSpec {
  LossSpec() = default;
  // A loss by Keras name, looked up at once with get_loss (from_logits = false).
  // Errors: std::invalid_argument from get_loss for an unknown name, listing the known ones.
  LossSpec(const char* name) : loss(get_loss(name)) {}                // NOLINT
  // A loss by Keras name, as LossSpec(const char*).
  LossSpec(const std::string& name) : loss(get_loss(name)) {}         // NOLINT
  // A loss object, shared as given.
  LossSpec(std::shared_ptr<Loss> loss) : loss(std::move(loss)) {}      // NOLINT
  // A loss object of a Loss subclass (std::make_shared<MeanSquaredError>()), shared as given.
  template <class L>
    requires std::is_base_of_v<Loss, L>
  LossSpec(std::shared_ptr<L> loss) : loss(std::move(loss)) {}        // NOLINT
  std::shared_ptr<Loss> loss;  // the loss (null when default-constructed: compile then throws)
};

// Keyword arguments of Model.compile.
struct CompileOptions {
  // The optimizer train_step applies the gradients with. Required (Keras defaults to "rmsprop";
  // here compile throws std::invalid_argument without one).
  std::shared_ptr<optimizers::Optimizer> optimizer = nullptr;
  // The loss, by Keras name or object. Required: compile throws std::invalid_argument without one.
  LossSpec loss = {};
  // Metrics reported in the logs after "loss", in this order; default none (as Keras).
  std::vector<MetricSpec> metrics = {};
};

// Keyword arguments of Model.fit, in the order of Keras's fit(x, y, batch_size, epochs, verbose,
// callbacks, validation_split, validation_data, shuffle, initial_epoch, steps_per_epoch), so
// `model.fit(x, y, {.batch_size = 64, .epochs = 2})` reads as in Python; tapeflow's own options
// (validation_dataset, seed, replica_context) follow their Keras neighbours or come last.
struct FitOptions {
  std::int64_t batch_size = 32;        // used with x, y (a Dataset is already batched)
  int epochs = 1;                      // train until this epoch index (as Keras: an absolute count,
                                       // so epochs - initial_epoch epochs run); >= 0
  int verbose = 1;                     // 0 silent, 1 progress bar (one line per epoch when stdout is
                                       // not a terminal), 2 a line per epoch and every 5 s
  // Called as Keras calls them: on_train_begin/end, on_epoch_begin/end (with the epoch's logs),
  // on_train_batch_begin/end. Ref: keras.callbacks.Callback
  std::vector<std::shared_ptr<Callback>> callbacks = {};
  // With x, y: the last fraction of the examples (before shuffling) is held out and evaluated after
  // each epoch as val_*, as Keras does; 0 = none. Ignored when validation_data/validation_dataset is
  // given (as Keras). Errors: std::invalid_argument outside [0, 1), with fit(dataset), or when the
  // split leaves no training or no validation example.
  double validation_split = 0.0;
  std::vector<Tensor> validation_data = {};  // {x_val, y_val}, evaluated after each epoch
  std::optional<data::Dataset> validation_dataset = std::nullopt;  // or a batched dataset of {x, y}
  bool shuffle = true;                 // with x, y: a full reshuffle every epoch
  int initial_epoch = 0;               // epoch to start at (to resume a run; also the shuffle pass)
  std::int64_t steps_per_epoch = -1;   // with an infinite (repeated) dataset: batches per epoch
  std::uint64_t seed = 0;              // shuffle seed
  // Data-parallel training across the context's ranks (see "Replicas" above); null: this process only.
  std::shared_ptr<ReplicaContext> replica_context = nullptr;
};

// Keyword arguments of Model.evaluate / Model.predict.
struct EvaluateOptions {
  std::int64_t batch_size = 32;        // with x, y and for predict (a Dataset is already batched); >= 1
  int verbose = 0;                     // evaluate: > 0 logs one line "evaluate - 0.12s - loss: ..."
                                       // (rank 0 only); predict ignores it. Keras's default is "auto"
  // evaluate only: each rank evaluates its shard, the logs are averaged (predict ignores it).
  std::shared_ptr<ReplicaContext> replica_context = nullptr;
};

// keras.Model: a Layer that compiles, trains (fit), evaluates and predicts; subclass it and override
// call, or build one as Sequential / Functional. The file comment gives fit's logs, verbose levels,
// data-parallel behaviour and errors.
// Ref: keras.Model
class Model : public layers::Layer {
 public:
  ~Model() override;

  // Errors: std::invalid_argument for a missing optimizer or loss, or an unknown metric name.
  void compile(CompileOptions options);
  // True once compile has succeeded (fit and evaluate need it).
  bool compiled() const { return compiled_; }

  // Trains for options.epochs epochs; returns the per-epoch logs.
  History fit(const Tensor& x, const Tensor& y, const FitOptions& options = {});
  // Trains on a dataset of {x, y} batches (each epoch is one pass, or steps_per_epoch batches).
  History fit(const data::Dataset& dataset, const FitOptions& options = {});

  // Loss (including layer losses) and metrics in inference mode, averaged over examples.
  Logs evaluate(const Tensor& x, const Tensor& y, const EvaluateOptions& options = {});
  // The same over a dataset of {x, y} batches, one pass (options.batch_size unused).
  // Errors: std::logic_error before compile; std::invalid_argument for an infinite or empty dataset.
  Logs evaluate(const data::Dataset& dataset, const EvaluateOptions& options = {});
  // Outputs in inference mode, computed batch by batch and concatenated. Shapes: [n, ...] -> [n, ...].
  Tensor predict(const Tensor& x, const EvaluateOptions& options = {});

  // One training step on a batch {x, y}: tape -> loss (+ layer losses) -> gradient (averaged
  // across ranks inside a data-parallel fit) -> optimizer.apply_gradients; updates the metrics
  // and returns their current values.
  virtual Logs train_step(const data::Example& batch);
  // One evaluation step on {x, y}: forward in inference mode, loss, metrics.
  virtual Logs test_step(const data::Example& batch);

  // The compiled loss of y_pred plus the sum of the model's layer losses (a scalar on the tape).
  Tensor compute_loss(const Tensor& y, const Tensor& y_pred);
  // Updates the loss tracker (weighted by the batch size) and every metric; returns the results.
  Logs compute_metrics(const Tensor& y, const Tensor& y_pred, const Tensor& loss, std::int64_t batch_size);
  // Current results of the loss tracker and metrics; reset_metrics() zeroes them.
  Logs get_metrics_result() const;
  // Resets the loss tracker and every metric (fit does it at each epoch start, evaluate per call).
  void reset_metrics();

  // A Keras-style table: "Model: "<name>"", one row per layer "name (Type)  output shape  params",
  // then total, trainable and non-trainable parameter counts with their float32 size.
  // Output shapes show the batch as None; they need a built model ("?" otherwise).
  std::string summary() const;

  // Writes / reads the weights in the TF-Keras 2 HDF5 layout (thin wrappers over models/saving.h,
  // defined in models/saving.cc). Errors: std::runtime_error naming the file and the problem.
  void save_weights(const std::string& path) const;
  // Reads weights saved by save_weights (or TF-Keras 2's model.save_weights to .h5) into this
  // model's variables, all or nothing (models/saving.h: matching by layer name, then position).
  // Errors: std::runtime_error naming the file and the problem (a shape or dtype mismatch names
  // the layer and the weight); the variables are unchanged then.
  void load_weights(const std::string& path);

  // The compiled optimizer (null before compile).
  const std::shared_ptr<optimizers::Optimizer>& optimizer() const { return optimizer_; }
  // The compiled loss (null before compile).
  const std::shared_ptr<Loss>& loss() const { return loss_; }
  // The compiled metrics in compile order, names resolved to objects (without the loss tracker).
  const std::vector<std::shared_ptr<PredictionMetric>>& metrics() const { return metrics_; }
  // Keras's model.stop_training: set (by a callback) to end fit; fit clears it when it starts.
  bool stop_training() const { return stop_training_; }
  // The replica context of the running fit (null outside fit or without one); custom train_steps
  // reduce their gradients with replica_context()->gradient(tape, loss, vars).
  ReplicaContext* replica_context() const { return replica_context_; }
  // true: fit finishes the current batch, runs that epoch's validation and on_epoch_end, and stops
  // (as Keras's model.stop_training = True; EarlyStopping and TerminateOnNaN use it).
  void set_stop_training(bool stop) { stop_training_ = stop; }

  // The forward pass; subclasses override it (Keras's call(inputs, training)).
  // Errors: std::logic_error naming the model if a subclass did not override it.
  Tensor call(const Tensor& inputs, bool training) override;
  // Records the input shape (for summary) and marks the model built.
  void build(const Shape& input_shape) override;

 protected:
  // dtype: Keras's `dtype` argument. Set, the model casts floating inputs to it and layers it
  // tracks unbuilt without a dtype of their own compute in it; empty, inputs reach the layers as
  // given and each layer casts to its own dtype.
  explicit Model(std::string name = "", std::string class_name = "Model", std::optional<DType> dtype = std::nullopt);
  // Output shapes per row of summary() (default: the input shape the model was built with run
  // through each tracked layer's compute_output_shape, when known).
  virtual std::vector<std::string> summary_output_shapes() const;
  // Keras's "Connected to" entries per row of summary(), one line each (empty: no such column).
  virtual std::vector<std::string> summary_connections() const { return {}; }
  // How many leading components of a batch are inputs (the rest start with y); train_step and
  // test_step pass several to call(std::vector<Tensor>).
  virtual std::size_t input_count() const { return 1; }
  // The input shape of the first call (empty before).
  const std::optional<Shape>& build_input_shape() const { return build_input_shape_; }

 private:
  // Runs test_step over `batches`; with a replica context of size > 1 the logs are averaged across
  // ranks (a rank may have no batch).
  Logs run_evaluation(const data::Dataset& batches, const char* caller, ReplicaContext* replicas);
  // The forward pass on the input components of a batch.
  Tensor forward(const data::Example& batch, bool training);
  void require_compiled(const char* caller) const;

  bool compiled_ = false;
  bool stop_training_ = false;
  std::shared_ptr<optimizers::Optimizer> optimizer_;
  std::shared_ptr<Loss> loss_;
  std::vector<std::shared_ptr<PredictionMetric>> metrics_;
  Mean loss_tracker_{"loss"};
  std::optional<Shape> build_input_shape_;
  ReplicaContext* replica_context_ = nullptr;
};

// "(None, 256)": a shape with its first dimension shown as None (Keras's batch dimension).
std::string batch_shape_string(const Shape& shape);

}  // namespace tapeflow::models
