// Keras losses: per-sample loss functions with Keras's reductions.
#pragma once

#include <memory>
#include <string>

#include "tape/core/config.h"
#include "tape/core/tensor.h"

namespace tapeflow::models {

// How per-sample losses combine. kSumOverBatchSize (Keras's default) divides the weighted sum by
// the number of per-sample losses; kSum sums; kNone returns them unreduced.
// Ref: keras.losses.Reduction
enum class Reduction { kSumOverBatchSize, kSum, kNone };

// Base class: call() computes per-sample losses (differentiable, recorded on tapes) and
// operator() applies the sample weights and the reduction.
// Shapes:  y_true / y_pred per loss (below); call() reduces the last axis, as Keras: [batch, d]
//          gives [batch], [n] gives one value (a scalar: sum / mean of it, kNone returns []);
//          sample_weight (optional) broadcastable to the per-sample losses.
//          When the ranks of y_true and y_pred differ by one and the longer ends in 1 they are
//          matched first (Keras's squeeze_or_expand_to_same_rank: [n] vs [n, 1] gives [n] losses).
// Errors:  std::invalid_argument naming the loss and the shapes received.
// Ref:     keras/src/losses/loss.py
class Loss {
 public:
  virtual ~Loss() = default;
  // call(y_true, y_pred) times sample_weight (cast to the losses' dtype; one with as many
  // elements as the losses is reshaped to them), then reduced: kSumOverBatchSize the mean, kSum the
  // sum (scalars), kNone unreduced. Errors: as call, and std::invalid_argument naming both shapes
  // if sample_weight does not broadcast.
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = Tensor()) const;
  // Per-sample losses, unreduced.
  virtual Tensor call(const Tensor& y_true, const Tensor& y_pred) const = 0;
  // The loss's name (Keras's snake_case default, e.g. "sparse_categorical_crossentropy").
  const std::string& name() const { return name_; }
  // How operator() reduces the per-sample losses.
  Reduction reduction() const { return reduction_; }
  // Keras's class name and config ({"reduction": "auto", "name", ...}; models/config.h reads it
  // back with deserialize_loss). Errors: std::logic_error for a class without a config.
  virtual std::string class_name() const { return "Loss"; }
  // The config: {"reduction": "auto" | "sum" | "none", "name": ...} plus the subclass's fields
  // (Keras 2's loss config). Errors: std::logic_error naming the loss and class for this base.
  virtual Config get_config() const;

 protected:
  // For subclasses: the name and reduction every loss has.
  Loss(std::string name, Reduction reduction) : name_(std::move(name)), reduction_(reduction) {}

 private:
  std::string name_;
  Reduction reduction_;
};

// Keyword arguments of the cross-entropy losses (Keras's from_logits, reduction, name).
struct CrossentropyOptions {
  bool from_logits = false;  // y_pred holds logits (unnormalised scores), not probabilities
  Reduction reduction = Reduction::kSumOverBatchSize;  // Keras's default: the mean over the losses
  // The loss's name; empty: the Keras snake_case default of the class.
  std::string name = "";
};

// Cross-entropy between integer labels and class scores.
// Shapes:  y_true [batch] or [batch, 1] int32/int64 (floats holding integers are cast);
//          y_pred [batch, classes] logits (from_logits) or probabilities.
// Facts:   probabilities are renormalised to sum 1 and clipped to [1e-7, 1 - 1e-7] before the log,
//          as Keras does; logits use the fused sparse_softmax_cross_entropy_with_logits.
// Ref:     keras.losses.SparseCategoricalCrossentropy
class SparseCategoricalCrossentropy : public Loss {
 public:
  // Default name "sparse_categorical_crossentropy".
  explicit SparseCategoricalCrossentropy(CrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string class_name() const override { return "SparseCategoricalCrossentropy"; }
  Config get_config() const override;  // + from_logits, ignore_class (null)
  // True if y_pred is read as logits.
  bool from_logits() const { return from_logits_; }

 private:
  bool from_logits_;
};

// Cross-entropy between one-hot (or soft) targets and class scores.
// Shapes:  y_true and y_pred [batch, classes].
// Ref:     keras.losses.CategoricalCrossentropy (label_smoothing not supported)
class CategoricalCrossentropy : public Loss {
 public:
  // Default name "categorical_crossentropy".
  explicit CategoricalCrossentropy(CrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string class_name() const override { return "CategoricalCrossentropy"; }
  Config get_config() const override;  // + from_logits, label_smoothing (0), axis (-1)
  // True if y_pred is read as logits.
  bool from_logits() const { return from_logits_; }

 private:
  bool from_logits_;
};

// Binary cross-entropy averaged over the last axis.
// Shapes:  y_true and y_pred the same shape, rank >= 1: [..., d] -> [...] ([n] -> one value);
//          targets in [0, 1].
// Facts:   logits use sigmoid_cross_entropy_with_logits; probabilities are clipped to [1e-7, 1 - 1e-7].
// Ref:     keras.losses.BinaryCrossentropy
class BinaryCrossentropy : public Loss {
 public:
  // Default name "binary_crossentropy".
  explicit BinaryCrossentropy(CrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string class_name() const override { return "BinaryCrossentropy"; }
  Config get_config() const override;  // + from_logits, label_smoothing (0), axis (-1)
  // True if y_pred is read as logits (sigmoid cross-entropy), else as probabilities.
  bool from_logits() const { return from_logits_; }

 private:
  bool from_logits_;
};

// Keyword arguments of MeanSquaredError (Keras's reduction and name).
struct MeanSquaredErrorOptions {
  Reduction reduction = Reduction::kSumOverBatchSize;  // Keras's default: the mean over the losses
  // The loss's name (Keras's default).
  std::string name = "mean_squared_error";
};

// Mean over the last axis of (y_pred - y_true)².
// Shapes:  y_true and y_pred broadcastable, rank >= 1: [..., d] -> [...] ([n] -> one value).
// Ref:     keras.losses.MeanSquaredError
class MeanSquaredError : public Loss {
 public:
  // Default name "mean_squared_error".
  explicit MeanSquaredError(MeanSquaredErrorOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string class_name() const override { return "MeanSquaredError"; }
  // {"reduction", "name"} (no other fields).
  Config get_config() const override;
};

// A loss by its Keras name: "sparse_categorical_crossentropy", "categorical_crossentropy",
// "binary_crossentropy" (all with from_logits = false), "mse" / "mean_squared_error".
// Errors: std::invalid_argument listing the known names.
std::shared_ptr<Loss> get_loss(const std::string& name);

}  // namespace tapeflow::models
