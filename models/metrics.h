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
  virtual double result() const = 0;
  virtual void reset_state() = 0;
  const std::string& name() const { return name_; }

 protected:
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
  explicit Mean(std::string name = "mean") : Metric(std::move(name)) {}
  void update_state(const Tensor& values, const Tensor& sample_weight = Tensor());
  void update_state(double value, double weight = 1.0);
  double result() const override { return count_ == 0.0 ? 0.0 : total_ / count_; }
  void reset_state() override { total_ = count_ = 0.0; }

 private:
  double total_ = 0.0, count_ = 0.0;
};

// A metric of (y_true, y_pred): per-sample values averaged like Mean (Keras's MeanMetricWrapper).
class PredictionMetric : public Metric {
 public:
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = Tensor());
  double result() const override { return mean_.result(); }
  void reset_state() override { mean_.reset_state(); }
  // Per-sample values (float64 tensor of the batch's length).
  virtual Tensor values(const Tensor& y_true, const Tensor& y_pred) const = 0;

 protected:
  explicit PredictionMetric(std::string name) : Metric(std::move(name)), mean_(this->name()) {}

 private:
  Mean mean_;
};

// Fraction of predictions equal to the labels (element-wise).
// Shapes:  y_true and y_pred with the same number of elements. Ref: keras.metrics.Accuracy
class Accuracy : public PredictionMetric {
 public:
  explicit Accuracy(std::string name = "accuracy") : PredictionMetric(std::move(name)) {}
  Tensor values(const Tensor& y_true, const Tensor& y_pred) const override;
};

// Fraction of rows whose argmax (first maximum) equals the integer label.
// Shapes:  y_true [batch] or [batch, 1]; y_pred [batch, classes].
// Errors:  std::invalid_argument naming both shapes if they do not fit.
// Ref:     keras.metrics.SparseCategoricalAccuracy
class SparseCategoricalAccuracy : public PredictionMetric {
 public:
  explicit SparseCategoricalAccuracy(std::string name = "sparse_categorical_accuracy")
      : PredictionMetric(std::move(name)) {}
  Tensor values(const Tensor& y_true, const Tensor& y_pred) const override;
};

// Fraction of rows where argmax(y_true) == argmax(y_pred). Shapes: both [batch, classes].
// Ref: keras.metrics.CategoricalAccuracy
class CategoricalAccuracy : public PredictionMetric {
 public:
  explicit CategoricalAccuracy(std::string name = "categorical_accuracy") : PredictionMetric(std::move(name)) {}
  Tensor values(const Tensor& y_true, const Tensor& y_pred) const override;
};

// Mean over the last axis of ((y_pred > threshold) == y_true). Shapes: same number of elements;
// [batch, d] or [batch]. Ref: keras.metrics.BinaryAccuracy
class BinaryAccuracy : public PredictionMetric {
 public:
  explicit BinaryAccuracy(std::string name = "binary_accuracy", double threshold = 0.5)
      : PredictionMetric(std::move(name)), threshold_(threshold) {}
  Tensor values(const Tensor& y_true, const Tensor& y_pred) const override;

 private:
  double threshold_;
};

}  // namespace tapeflow::models
