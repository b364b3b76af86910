// Keras losses: per-sample loss functions with Keras's reductions.
#pragma once

#include <memory>
#include <string>

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
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = Tensor()) const;
  // Per-sample losses, unreduced.
  virtual Tensor call(const Tensor& y_true, const Tensor& y_pred) const = 0;
  const std::string& name() const { return name_; }
  Reduction reduction() const { return reduction_; }

 protected:
  Loss(std::string name, Reduction reduction) : name_(std::move(name)), reduction_(reduction) {}

 private:
  std::string name_;
  Reduction reduction_;
};

struct CrossentropyOptions {
  bool from_logits = false;
  Reduction reduction = Reduction::kSumOverBatchSize;
  std::string name = "";  // empty: the Keras snake_case default
};

// Cross-entropy between integer labels and class scores.
// Shapes:  y_true [batch] or [batch, 1] int32/int64 (floats holding integers are cast);
//          y_pred [batch, classes] logits (from_logits) or probabilities.
// Facts:   probabilities are renormalised to sum 1 and clipped to [1e-7, 1 - 1e-7] before the log,
//          as Keras does; logits use the fused sparse_softmax_cross_entropy_with_logits.
// Ref:     keras.losses.SparseCategoricalCrossentropy
class SparseCategoricalCrossentropy : public Loss {
 public:
  explicit SparseCategoricalCrossentropy(CrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;

 private:
  bool from_logits_;
};

// Cross-entropy between one-hot (or soft) targets and class scores.
// Shapes:  y_true and y_pred [batch, classes].
// Ref:     keras.losses.CategoricalCrossentropy (label_smoothing not supported)
class CategoricalCrossentropy : public Loss {
 public:
  explicit CategoricalCrossentropy(CrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;

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
  explicit BinaryCrossentropy(CrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;

 private:
  bool from_logits_;
};

struct MeanSquaredErrorOptions {
  Reduction reduction = Reduction::kSumOverBatchSize;
  std::string name = "mean_squared_error";
};

// Mean over the last axis of (y_pred - y_true)².
// Shapes:  y_true and y_pred broadcastable, rank >= 1: [..., d] -> [...] ([n] -> one value).
// Ref:     keras.losses.MeanSquaredError
class MeanSquaredError : public Loss {
 public:
  explicit MeanSquaredError(MeanSquaredErrorOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
};

// A loss by its Keras name: "sparse_categorical_crossentropy", "categorical_crossentropy",
// "binary_crossentropy" (all with from_logits = false), "mse" / "mean_squared_error".
// Errors: std::invalid_argument listing the known names.
std::shared_ptr<Loss> get_loss(const std::string& name);

}  // namespace tapeflow::models
