// Keras metrics: stateful accumulators computed on plain tensors (never recorded on tapes).
#pragma once

#include <memory>
#include <string>

#include "tape/core/tensor.h"

namespace tapeflow::models {

// Base class: a running value with result() and reset_state().
// Ref: keras.metrics.Metric
class Metric {
 public:
  virtual ~Metric() = default;
  // The current value from the state accumulated since the last reset_state.
  virtual double result() const = 0;
  // Clears the accumulated state (Model::reset_metrics calls it at each epoch and evaluate start).
  virtual void reset_state() = 0;
  // The metric's key in the logs ("accuracy", "loss", ...).
  const std::string& name() const { return name_; }

 protected:
  // `name` becomes name(), the key in the logs.
  explicit Metric(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// The weighted mean of every value seen: sum(values · w) / sum(w) (0 before any update).
// Shapes:  values any shape; sample_weight (optional) broadcastable to values along leading axes
//          (same number of elements, or one weight per row of values).
// Errors:  std::invalid_argument for non-numeric values or a weight count that fits neither rule.
// Ref:     keras.metrics.Mean
class Mean : public Metric {
 public:
  // An empty mean named `name` (Keras's default name "mean").
  explicit Mean(std::string name = "mean") : Metric(std::move(name)) {}
  // Adds every element of `values`, each with its weight (1 without sample_weight).
  // Errors: std::invalid_argument naming the metric for undefined or bool values, or a
  // sample_weight that does not broadcast to values (both shapes named).
  void update_state(const Tensor& values, const Tensor& sample_weight = Tensor());
  // Adds one value with weight `weight` (Model's loss tracker adds each batch loss weighted by the
  // batch size).
  void update_state(double value, double weight = 1.0);
  // sum(value · weight) / sum(weight); 0 before any update.
  double result() const override { return count_ == 0.0 ? 0.0 : total_ / count_; }
  // Zeroes the weighted sum and the total weight.
  void reset_state() override { total_ = count_ = 0.0; }

 private:
  double total_ = 0.0, count_ = 0.0;
};

// A metric of (y_true, y_pred): per-sample values averaged like Mean (Keras's MeanMetricWrapper).
class PredictionMetric : public Metric {
 public:
  // Adds values(y_true, y_pred) to the running mean, weighted as Mean::update_state.
  // Errors: std::invalid_argument naming the metric for an undefined input, a bool y_pred, shapes
  // the metric does not take (both named) or a sample_weight that does not broadcast.
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = Tensor());
  // The weighted mean of the per-sample values since the last reset_state (0 before any update).
  double result() const override { return mean_.result(); }
  // Clears the running mean.
  void reset_state() override { mean_.reset_state(); }
  // Per-sample values (float64 tensor of the batch's length).
  virtual Tensor values(const Tensor& y_true, const Tensor& y_pred) const = 0;

 protected:
  // `name` is the key in the logs.
  explicit PredictionMetric(std::string name) : Metric(std::move(name)), mean_(this->name()) {}

 private:
  Mean mean_;
};

// Fraction of predictions equal to the labels (element-wise).
// Shapes:  y_true and y_pred with the same number of elements. Ref: keras.metrics.Accuracy
class Accuracy : public PredictionMetric {
 public:
  // `name`: the key in the logs (compile's "accuracy" / "acc" keep the name given).
  explicit Accuracy(std::string name = "accuracy") : PredictionMetric(std::move(name)) {}
  Tensor values(const Tensor& y_true, const Tensor& y_pred) const override;
};

// Fraction of rows whose argmax (first maximum) equals the integer label.
// Shapes:  y_true [batch] or [batch, 1]; y_pred [batch, classes].
// Errors:  std::invalid_argument naming both shapes if they do not fit.
// Ref:     keras.metrics.SparseCategoricalAccuracy
class SparseCategoricalAccuracy : public PredictionMetric {
 public:
  // `name`: the key in the logs (Keras's default name).
  explicit SparseCategoricalAccuracy(std::string name = "sparse_categorical_accuracy")
      : PredictionMetric(std::move(name)) {}
  Tensor values(const Tensor& y_true, const Tensor& y_pred) const override;
};

// Fraction of rows where argmax(y_true) == argmax(y_pred). Shapes: both [batch, classes].
// Ref: keras.metrics.CategoricalAccuracy
class CategoricalAccuracy : public PredictionMetric {
 public:
  // `name`: the key in the logs (Keras's default name).
  explicit CategoricalAccuracy(std::string name = "categorical_accuracy") : PredictionMetric(std::move(name)) {}
  Tensor values(const Tensor& y_true, const Tensor& y_pred) const override;
};

// Mean over the last axis of ((y_pred > threshold) == y_true). Shapes: same number of elements;
// [batch, d] or [batch]. Ref: keras.metrics.BinaryAccuracy
class BinaryAccuracy : public PredictionMetric {
 public:
  // `name`: the key in the logs; a prediction counts as 1 when it is > threshold (Keras's 0.5).
  explicit BinaryAccuracy(std::string name = "binary_accuracy", double threshold = 0.5)
      : PredictionMetric(std::move(name)), threshold_(threshold) {}
  Tensor values(const Tensor& y_true, const Tensor& y_pred) const override;

 private:
  double threshold_;
};

}  // namespace tapeflow::models
