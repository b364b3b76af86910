#include "models/model.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/runtime/logging.h"
#include "tape/runtime/recorder.h"

namespace tapeflow::models {
namespace {

// Resolves a metric name the way Keras's compile does ("accuracy" follows the loss).
std::shared_ptr<PredictionMetric> resolve_metric(const MetricSpec& spec, const Loss* loss) {
  if (spec.metric) return spec.metric;
  const std::string& n = spec.name;
  if (n == "accuracy" || n == "acc") {
    if (dynamic_cast<const SparseCategoricalCrossentropy*>(loss)) return std::make_shared<SparseCategoricalAccuracy>(n);
    if (dynamic_cast<const CategoricalCrossentropy*>(loss)) return std::make_shared<CategoricalAccuracy>(n);
    if (dynamic_cast<const BinaryCrossentropy*>(loss)) return std::make_shared<BinaryAccuracy>(n);
    return std::make_shared<Accuracy>(n);
  }
  if (n == "sparse_categorical_accuracy") return std::make_shared<SparseCategoricalAccuracy>();
  if (n == "categorical_accuracy") return std::make_shared<CategoricalAccuracy>();
  if (n == "binary_accuracy") return std::make_shared<BinaryAccuracy>();
  throw std::invalid_argument("Model::compile: unknown metric '" + n +
                              "' (known: accuracy, acc, sparse_categorical_accuracy, categorical_accuracy, "
                              "binary_accuracy, or pass a metric object)");
}

void check_xy(const char* caller, const Tensor& x, const Tensor& y) {
  if (!x.defined() || !y.defined()) throw std::invalid_argument(std::string(caller) + ": x and y must be defined");
  if (x.rank() == 0 || y.rank() == 0 || x.shape()[0] != y.shape()[0])
    throw std::invalid_argument(std::string(caller) + ": x and y must have the same number of examples (first "
                                "dimension), got x " + x.shape().to_string() + ", y " + y.shape().to_string());
}

void check_batch(const char* caller, const data::Example& batch, std::size_t inputs = 1) {
  if (batch.size() < inputs + 1)
    throw std::invalid_argument(std::string(caller) + ": expected a batch {" +
                                (inputs == 1 ? std::string("x") : "x1, ..., x" + std::to_string(inputs)) +
                                ", y}, got " + std::to_string(batch.size()) + " component(s)");
}

void check_validation_split(double split) {
  if (!(split >= 0 && split < 1))
    throw std::invalid_argument("Model::fit: validation_split must be in [0, 1), got " + std::to_string(split));
}

void check_batch_size(const char* caller, std::int64_t batch_size) {
  if (batch_size < 1)
    throw std::invalid_argument(std::string(caller) + ": batch_size must be >= 1, got " + std::to_string(batch_size));
}

// The logs of every rank averaged with weight `examples` (this rank's example count), in place.
// Returns the total count. Every rank must hold the same keys in the same order.
double average_logs(ReplicaContext& replicas, Logs& logs, double examples, const char* what) {
  std::vector<double> v;
  for (const auto& [k, x] : logs) v.push_back(x * examples);
  v.push_back(examples);
  replicas.all_reduce(v, ReduceOp::kSum, what);
  const double total = v.back();
  std::size_t i = 0;
  Logs out;
  for (const auto& [k, x] : logs) out.set(k, total > 0 ? v[i++] / total : 0.0);
  logs = out;
  return total;
}

bool distributed(const ReplicaContext* replicas) { return replicas && replicas->size() > 1; }

// Sets `*slot` for the lifetime of the guard.
class ReplicaScope {
 public:
  ReplicaScope(ReplicaContext** slot, ReplicaContext* value) : slot_(slot), old_(*slot) { *slot = value; }
  ~ReplicaScope() { *slot_ = old_; }
  ReplicaScope(const ReplicaScope&) = delete;
  ReplicaScope& operator=(const ReplicaScope&) = delete;

 private:
  ReplicaContext** slot_;
  ReplicaContext* old_;
};

std::string format_logs(const Logs& logs) {
  std::string s;
  for (const auto& [k, v] : logs) s += fmt::format(" - {}: {:.4f}", k, v);
  return s;
}

}  // namespace

std::string batch_shape_string(const Shape& shape) {
  std::string s = "(";
  for (int i = 0; i < shape.rank(); ++i) {
    if (i > 0) s += ", ";
    s += i == 0 ? "None" : std::to_string(shape[i]);
  }
  return s + (shape.rank() == 1 ? ",)" : ")");
}

Model::Model(std::string name, std::string class_name, std::optional<DType> dtype)
    : Layer(std::move(class_name), std::move(name), std::nullopt, dtype) {
  set_autocast(dtype.has_value());
}

Model::~Model() = default;

Tensor Model::call(const Tensor&, bool) {
  throw std::logic_error(describe() + ": call() is not implemented; subclasses of Model must override call()");
}

void Model::build(const Shape& input_shape) {
  build_input_shape_ = input_shape;
  Layer::build(input_shape);
}

void Model::compile(CompileOptions options) {
  if (!options.optimizer) throw std::invalid_argument("Model::compile: no optimizer given");
  if (!options.loss.loss) throw std::invalid_argument("Model::compile: no loss given");
  std::vector<std::shared_ptr<PredictionMetric>> metrics;
  for (const MetricSpec& m : options.metrics) metrics.push_back(resolve_metric(m, options.loss.loss.get()));
  optimizer_ = std::move(options.optimizer);
  loss_ = std::move(options.loss.loss);
  metrics_ = std::move(metrics);
  compiled_ = true;
}

void Model::require_compiled(const char* caller) const {
  if (!compiled_)
    throw std::logic_error(describe() + ": " + caller + " needs a compiled model (call compile first)");
}

Tensor Model::compute_loss(const Tensor& y, const Tensor& y_pred) {
  if (!loss_) throw std::logic_error(describe() + ": compute_loss without a compiled loss");
  Tensor total = (*loss_)(y, y_pred);
  for (const Tensor& l : losses()) total = total + l;
  return total;
}

Logs Model::compute_metrics(const Tensor& y, const Tensor& y_pred, const Tensor& loss, std::int64_t batch_size) {
  loss_tracker_.update_state(loss.item(), static_cast<double>(batch_size));
  for (const auto& m : metrics_) m->update_state(y, y_pred);
  return get_metrics_result();
}

Logs Model::get_metrics_result() const {
  Logs logs;
  logs.set("loss", loss_tracker_.result());
  for (const auto& m : metrics_) logs.set(m->name(), m->result());
  return logs;
}

void Model::reset_metrics() {
  loss_tracker_.reset_state();
  for (const auto& m : metrics_) m->reset_state();
}

Tensor Model::forward(const data::Example& batch, bool training) {
  const std::size_t n = input_count();
  if (n == 1) return (*this)(batch[0], training);
  return (*this)(std::vector<Tensor>(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(n)), training);
}

Logs Model::train_step(const data::Example& batch) {
  check_batch("Model::train_step", batch, input_count());
  const Tensor& x = batch[0];
  const Tensor& y = batch[input_count()];
  Tensor y_pred, loss;
  std::vector<Variable> vars;
  std::vector<std::optional<Tensor>> grads;
  {
    GradientTape tape;
    y_pred = forward(batch, /*training=*/true);
    loss = compute_loss(y, y_pred);
    vars = trainable_variables();  // after the call: the first call builds the weights
    grads = replica_context_ ? replica_context_->gradient(tape, loss, vars) : tape.gradient(loss, vars);
  }
  optimizer_->apply_gradients(grads, vars);
  return compute_metrics(y, y_pred, loss, x.rank() > 0 ? x.shape()[0] : 1);
}

Logs Model::test_step(const data::Example& batch) {
  check_batch("Model::test_step", batch, input_count());
  RecordingPause pause;
  const Tensor& y = batch[input_count()];
  const Tensor y_pred = forward(batch, /*training=*/false);
  const Tensor loss = compute_loss(y, y_pred);
  return compute_metrics(y, y_pred, loss, batch[0].rank() > 0 ? batch[0].shape()[0] : 1);
}

History Model::fit(const Tensor& x, const Tensor& y, const FitOptions& options) {
  check_xy("Model::fit", x, y);
  check_batch_size("Model::fit", options.batch_size);
  check_validation_split(options.validation_split);
  if (x.shape()[0] == 0)  // would fail later as "Dataset::shuffle: buffer_size must be >= 1, got 0"
    throw std::invalid_argument("Model::fit: x has no examples (shape " + x.shape().to_string() + ")");
  if (options.validation_split > 0 && options.validation_data.empty() && !options.validation_dataset) {
    // Keras's train_validation_split: the first floor(n * (1 - split)) examples train, the rest validate.
    const std::int64_t total = x.shape()[0];
    const auto keep = static_cast<std::int64_t>(std::floor(static_cast<double>(total) * (1.0 - options.validation_split)));
    if (keep == 0 || keep == total)
      throw std::invalid_argument("Model::fit: validation_split=" + std::to_string(options.validation_split) +
                                  " cannot split " + std::to_string(total) + " examples into a training and a validation set");
    const std::vector<Tensor> xs = split(x, {keep, total - keep}, 0), ys = split(y, {keep, total - keep}, 0);
    FitOptions rest = options;
    rest.validation_split = 0;
    rest.validation_data = {xs[1], ys[1]};
    return fit(xs[0], ys[0], rest);
  }
  const std::int64_t n = x.shape()[0];
  data::Dataset ds = data::Dataset::from_tensor_slices({x, y});
  // Epoch e is shuffle pass e, so a run resumed at initial_epoch sees the batches an uninterrupted run sees.
  if (options.shuffle) ds = ds.shuffle(n, options.seed, true, static_cast<std::uint64_t>(std::max(0, options.initial_epoch)));
  ReplicaContext* replicas = options.replica_context.get();
  if (!distributed(replicas)) return fit(ds.batch(options.batch_size).prefetch(2), options);
  // Same shuffled order on every rank; rank r keeps examples r, r + N, ... of each pass, so the
  // ranks' k-th batches together are the k-th global batch.
  const std::int64_t ranks = replicas->size();
  const std::int64_t local = options.batch_size / ranks;
  if (local < 1)
    throw std::invalid_argument("Model::fit: batch_size (the global batch) must be >= the number of replicas, got " +
                                std::to_string(options.batch_size) + " for " + std::to_string(ranks) + " replicas");
  if (options.batch_size % ranks != 0 && replicas->rank() == 0)
    logger()->warn("Model::fit: batch_size {} is not a multiple of {} replicas: each takes {}, the global batch is {}",
                   options.batch_size, ranks, local, local * ranks);
  const std::int64_t steps = n / (local * ranks);
  if (steps == 0)
    throw std::invalid_argument("Model::fit: " + std::to_string(n) + " examples are fewer than one global batch of " +
                                std::to_string(local * ranks) + " across " + std::to_string(ranks) + " replicas");
  ds = ds.shard(ranks, replicas->rank()).batch(local).take(steps);  // the uneven tail is dropped
  return fit(ds.prefetch(2), options);
}

History Model::fit(const data::Dataset& dataset, const FitOptions& options) {
  require_compiled("fit");
  check_validation_split(options.validation_split);
  if (options.validation_split > 0)
    throw std::invalid_argument("Model::fit: validation_split works with fit(x, y) only; give a dataset validation_dataset");
  if (options.epochs < 0)
    throw std::invalid_argument("Model::fit: epochs must be >= 0, got " + std::to_string(options.epochs));
  if (dataset.cardinality() == data::kInfiniteCardinality && options.steps_per_epoch < 1)
    throw std::invalid_argument("Model::fit: the dataset is infinite; set steps_per_epoch");
  ReplicaContext* replicas = options.replica_context.get();
  const bool multi = distributed(replicas);
  const bool chief = !multi || replicas->rank() == 0;  // runs callbacks and logs
  std::optional<data::Dataset> validation = options.validation_dataset;
  if (!options.validation_data.empty()) {
    if (options.validation_data.size() != 2)
      throw std::invalid_argument("Model::fit: validation_data must be {x_val, y_val}, got " +
                                  std::to_string(options.validation_data.size()) + " tensor(s)");
    check_xy("Model::fit (validation_data)", options.validation_data[0], options.validation_data[1]);
    check_batch_size("Model::fit", options.batch_size);
    data::Dataset v = data::Dataset::from_tensor_slices(options.validation_data);
    if (multi) v = v.shard(replicas->size(), replicas->rank());
    validation = v.batch(options.batch_size);
  }
  // Batches per epoch: steps_per_epoch, else one pass; replicas agree on the smallest.
  std::int64_t steps_per_epoch = options.steps_per_epoch;
  const bool continue_pass = options.steps_per_epoch > 0;  // an epoch continues the previous pass (Keras)
  if (multi) {
    const std::int64_t mine = continue_pass ? options.steps_per_epoch : dataset.cardinality();
    if (mine < 0)
      throw std::invalid_argument("Model::fit: with " + std::to_string(replicas->size()) +
                                  " replicas the number of batches per epoch must be known: set steps_per_epoch");
    std::vector<double> lo{static_cast<double>(mine)}, hi{static_cast<double>(mine)};
    replicas->all_reduce(lo, ReduceOp::kMin, "fit: batches per epoch (min)");
    replicas->all_reduce(hi, ReduceOp::kMax, "fit: batches per epoch (max)");
    if (lo[0] != hi[0] && chief)
      logger()->warn("Model::fit: the replicas have {} to {} batches per epoch; each runs {} (the rest is dropped)",
                     lo[0], hi[0], lo[0]);
    steps_per_epoch = static_cast<std::int64_t>(lo[0]);
  }
  ReplicaScope scope(&replica_context_, replicas);

  auto history = std::make_shared<History>();
  std::vector<std::shared_ptr<Callback>> callbacks;
  if (chief) callbacks = options.callbacks;  // rank 0 only: checkpoints, CSV files, early stopping
  if (options.verbose > 0 && chief) {  // Keras's ProgbarLogger, first so its epoch line ends before others print
    const std::int64_t steps = steps_per_epoch > 0 ? steps_per_epoch : dataset.cardinality();
    callbacks.insert(callbacks.begin(), std::make_shared<ProgbarLogger>(ProgbarLoggerOptions{
        .verbose = std::min(options.verbose, 2), .epochs = options.epochs, .steps = steps >= 0 ? steps : -1}));
  }
  callbacks.push_back(history);  // last: it records what the other callbacks added to the logs
  for (auto& cb : callbacks) cb->set_model(this);
  stop_training_ = false;
  for (auto& cb : callbacks) cb->on_train_begin({});
  // Rank 0's stop_training and constant learning rate, on every rank.
  auto sync_control = [&](const char* what) {
    if (!multi) return;
    const bool constant_lr = !optimizer_->learning_rate().is_schedule();
    std::vector<double> v{stop_training_ ? 1.0 : 0.0, constant_lr ? optimizer_->current_learning_rate() : 0.0};
    replicas->broadcast(v, 0, what);
    stop_training_ = v[0] != 0.0;
    if (constant_lr) optimizer_->set_learning_rate(v[1]);
  };

  std::optional<data::Dataset::Iterator> it;
  Logs last_logs;
  for (int epoch = options.initial_epoch; epoch < options.epochs && !stop_training_; ++epoch) {
    reset_metrics();
    for (auto& cb : callbacks) cb->on_epoch_begin(epoch, {});
    sync_control("fit: epoch begin (stop_training, learning rate)");
    if (stop_training_) break;
    const auto t0 = std::chrono::steady_clock::now();
    if (!continue_pass || !it) it.emplace(dataset.make_iterator());
    std::int64_t step = 0;
    double examples = 0;
    Logs epoch_logs;  // what the last train_step returned (running means), as Keras
    while (steps_per_epoch < 1 || step < steps_per_epoch) {
      std::optional<data::Example> batch = it->next();
      if (multi) {  // nobody steps alone: every rank has a batch and nobody stopped
        std::vector<double> v{batch ? 0.0 : 1.0, stop_training_ ? 1.0 : 0.0};
        replicas->all_reduce(v, ReduceOp::kMax, "fit: step agreement (batch present, stop_training)");
        if (v[0] != 0.0 && batch) batch.reset();
        if (v[1] != 0.0) stop_training_ = true;
        if (stop_training_ && batch) break;
      }
      if (!batch) {
        if (continue_pass) it.reset();
        break;
      }
      for (auto& cb : callbacks) cb->on_train_batch_begin(step, {});
      epoch_logs = train_step(*batch);
      examples += (*batch)[0].rank() > 0 ? static_cast<double>((*batch)[0].shape()[0]) : 1.0;
      for (auto& cb : callbacks) cb->on_train_batch_end(step, epoch_logs);
      ++step;
      if (stop_training_ && !multi) break;
    }
    if (step == 0) {
      if (chief) logger()->warn("Model::fit: the input ran out of data at epoch {}; training stops", epoch + 1);
      break;
    }
    if (multi) average_logs(*replicas, epoch_logs, examples, "fit: epoch logs");
    if (validation) {
      const Logs val = run_evaluation(*validation, "fit (validation)", replicas);
      for (const auto& [k, v] : val) epoch_logs.set("val_" + k, v);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& cb : callbacks) cb->on_epoch_end(epoch, epoch_logs);
    sync_control("fit: epoch end (stop_training, learning rate)");
    if (options.verbose > 1 && chief)  // with verbose 1 the progress bar's last line says it
      logger()->info("Epoch {}/{} - {} steps - {:.2f}s {:.2f}ms/step{}", epoch + 1, options.epochs, step, seconds,
                     1e3 * seconds / static_cast<double>(step), format_logs(epoch_logs));
    last_logs = epoch_logs;
  }
  for (auto& cb : callbacks) cb->on_train_end(last_logs);
  for (auto& cb : callbacks) cb->set_model(nullptr);
  // One model everywhere: rank 0's (its callbacks may have restored weights; BN statistics were local).
  if (multi) replicas->broadcast_variables(variables(), 0);
  return *history;
}

Logs Model::run_evaluation(const data::Dataset& batches, const char* caller, ReplicaContext* replicas) {
  require_compiled(caller);
  reset_metrics();
  double examples = 0;
  data::Dataset::Iterator it = batches.make_iterator();
  while (std::optional<data::Example> batch = it.next()) {
    test_step(*batch);
    examples += (*batch)[0].rank() > 0 ? static_cast<double>((*batch)[0].shape()[0]) : 1.0;
  }
  Logs logs = get_metrics_result();
  if (distributed(replicas)) examples = average_logs(*replicas, logs, examples, caller);
  if (examples == 0) throw std::invalid_argument(describe() + ": " + caller + ": the dataset is empty");
  return logs;
}

Logs Model::evaluate(const Tensor& x, const Tensor& y, const EvaluateOptions& options) {
  check_xy("Model::evaluate", x, y);
  check_batch_size("Model::evaluate", options.batch_size);
  data::Dataset ds = data::Dataset::from_tensor_slices({x, y});
  if (distributed(options.replica_context.get()))
    ds = ds.shard(options.replica_context->size(), options.replica_context->rank());
  return evaluate(ds.batch(options.batch_size), options);
}

Logs Model::evaluate(const data::Dataset& dataset, const EvaluateOptions& options) {
  if (dataset.cardinality() == data::kInfiniteCardinality)
    throw std::invalid_argument("Model::evaluate: the dataset is infinite");
  const auto t0 = std::chrono::steady_clock::now();
  ReplicaContext* replicas = options.replica_context.get();
  Logs logs = run_evaluation(dataset, "evaluate", replicas);
  if (options.verbose > 0 && (!distributed(replicas) || replicas->rank() == 0))
    logger()->info("evaluate - {:.2f}s{}", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                   format_logs(logs));
  return logs;
}

Tensor Model::predict(const Tensor& x, const EvaluateOptions& options) {
  if (!x.defined() || x.rank() == 0)
    throw std::invalid_argument("Model::predict: x must have a batch dimension, got " +
                                (x.defined() ? x.shape().to_string() : std::string("undefined")));
  check_batch_size("Model::predict", options.batch_size);
  RecordingPause pause;
  std::vector<Tensor> outputs;
  for (const data::Example& b : data::Dataset::from_tensor_slices({x}).batch(options.batch_size))
    outputs.push_back((*this)(b[0], /*training=*/false));
  if (outputs.empty()) {  // no examples: run one to learn the output shape, then drop it
    Shape one = x.shape();
    one[0] = 1;
    Tensor y = (*this)(zeros(one, x.dtype()), false);
    Shape s = y.shape();
    s[0] = 0;
    return Tensor::empty(s, y.dtype());
  }
  if (outputs.size() == 1) return outputs[0];
  Shape shape = outputs[0].shape();
  shape[0] = x.shape()[0];
  Tensor out = Tensor::empty(shape, outputs[0].dtype());
  char* dst = static_cast<char*>(out.mutable_raw_data());
  for (const Tensor& o : outputs) {
    std::memcpy(dst, o.raw_data(), o.nbytes());
    dst += o.nbytes();
  }
  return out;
}

}  // namespace tapeflow::models
