#include "models/losses.h"

#include <stdexcept>

#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/nn_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::models {
namespace {

constexpr double kEpsilon = 1e-7;  // keras.config.epsilon()

std::string shapes(const Tensor& y_true, const Tensor& y_pred) {
  return "y_true " + y_true.shape().to_string() + ", y_pred " + y_pred.shape().to_string();
}

void check_defined(const std::string& loss, const Tensor& y_true, const Tensor& y_pred) {
  if (!y_true.defined() || !y_pred.defined())
    throw std::invalid_argument(loss + ": y_true and y_pred must be defined tensors");
  if (!is_floating(y_pred.dtype()))
    throw std::invalid_argument(loss + ": y_pred must be float32 or float64, got " + dtype_name(y_pred.dtype()));
}

// Keras's squeeze_or_expand_to_same_rank(y_true, y_pred): when the ranks differ by one and the
// higher-rank tensor ends in 1, the lower one gains that axis if it has rank 1, else the higher
// one loses it. Any other difference is left to broadcasting (or the loss's own shape check).
std::pair<Tensor, Tensor> squeeze_or_expand_to_same_rank(const Tensor& x1, const Tensor& x2) {
  Tensor a = x1, b = x2;
  const int ra = a.rank(), rb = b.rank();
  if (ra == rb + 1 && a.shape().dim(-1) == 1) {
    if (rb == 1) b = expand_dims(b, -1);
    else a = squeeze(a, {-1});
  } else if (rb == ra + 1 && b.shape().dim(-1) == 1) {
    if (ra == 1) a = expand_dims(a, -1);
    else b = squeeze(b, {-1});
  }
  return {a, b};
}

// y_true (cast to y_pred's dtype) and y_pred with ranks matched as Keras does, for losses that
// average over the last axis: any rank >= 1 works ([n] gives one value, [batch, d] gives [batch]).
// same_shape: the inputs must then have equal shapes (binary cross-entropy), else they broadcast.
std::pair<Tensor, Tensor> last_axis_inputs(const std::string& loss, const Tensor& y_true, const Tensor& y_pred,
                                           bool same_shape) {
  check_defined(loss, y_true, y_pred);
  Tensor t = y_true.dtype() == y_pred.dtype() ? y_true : cast(y_true, y_pred.dtype());
  auto [tt, p] = squeeze_or_expand_to_same_rank(t, y_pred);
  if (same_shape && tt.shape() != p.shape())
    throw std::invalid_argument(loss + ": y_true and y_pred must have the same shape, " + shapes(y_true, y_pred));
  Shape out;
  try {
    out = broadcast_shapes(tt.shape(), p.shape(), loss.c_str());
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(loss + ": y_true and y_pred do not broadcast, " + shapes(y_true, y_pred));
  }
  if (out.rank() == 0)
    throw std::invalid_argument(loss + ": y_true and y_pred must have rank >= 1 (the last axis is averaged), " +
                                shapes(y_true, y_pred));
  return {tt, p};
}

std::string default_name(const std::string& given, const char* keras) { return given.empty() ? keras : given; }

}  // namespace

Tensor Loss::operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) const {
  Tensor losses = call(y_true, y_pred);
  if (sample_weight.defined()) {
    Tensor w = sample_weight.dtype() == losses.dtype() ? sample_weight : cast(sample_weight, losses.dtype());
    if (w.num_elements() == losses.num_elements() && w.shape() != losses.shape()) w = reshape(w, losses.shape());
    losses = losses * w;  // broadcasting errors name the shapes
  }
  switch (reduction_) {
    case Reduction::kNone: return losses;
    case Reduction::kSum: return reduce_sum(losses);
    case Reduction::kSumOverBatchSize: return reduce_mean(losses);  // sum / number of losses
  }
  return losses;
}

SparseCategoricalCrossentropy::SparseCategoricalCrossentropy(CrossentropyOptions o)
    : Loss(default_name(o.name, "sparse_categorical_crossentropy"), o.reduction), from_logits_(o.from_logits) {}

Tensor SparseCategoricalCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  check_defined(name(), y_true, y_pred);
  if (y_pred.rank() < 1)
    throw std::invalid_argument(name() + ": y_pred must be [batch, classes], " + shapes(y_true, y_pred));
  Tensor labels = y_true;
  // Keras squeezes a trailing 1 of y_true ([batch, 1] labels).
  if (labels.rank() == y_pred.rank() && labels.rank() >= 1 && labels.shape().dim(-1) == 1) {
    Shape s(labels.shape().begin(), labels.shape().end() - 1);
    labels = reshape(labels, s);
  }
  if (!is_integer(labels.dtype())) labels = cast(labels, DType::kInt64);
  Shape expected(y_pred.shape().begin(), y_pred.shape().end() - 1);
  if (labels.shape() != expected)
    throw std::invalid_argument(name() + ": labels must have y_pred's shape without its last axis, " +
                                shapes(y_true, y_pred));
  if (from_logits_) return sparse_softmax_cross_entropy_with_logits(labels, y_pred);
  // Keras (TF backend): log of the clipped probabilities, renormalised by the fused op.
  return sparse_softmax_cross_entropy_with_logits(labels, log(clip_by_value(y_pred, kEpsilon, 1.0 - kEpsilon)));
}

CategoricalCrossentropy::CategoricalCrossentropy(CrossentropyOptions o)
    : Loss(default_name(o.name, "categorical_crossentropy"), o.reduction), from_logits_(o.from_logits) {}

Tensor CategoricalCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  check_defined(name(), y_true, y_pred);
  if (y_pred.rank() < 1 || y_true.shape() != y_pred.shape())
    throw std::invalid_argument(name() + ": y_true and y_pred must have the same shape [batch, classes], " +
                                shapes(y_true, y_pred));
  Tensor t = y_true.dtype() == y_pred.dtype() ? y_true : cast(y_true, y_pred.dtype());
  if (from_logits_) return -reduce_sum(t * log_softmax(y_pred, -1), -1);
  Tensor p = y_pred / reduce_sum(y_pred, -1, /*keepdims=*/true);
  return -reduce_sum(t * log(clip_by_value(p, kEpsilon, 1.0 - kEpsilon)), -1);
}

BinaryCrossentropy::BinaryCrossentropy(CrossentropyOptions o)
    : Loss(default_name(o.name, "binary_crossentropy"), o.reduction), from_logits_(o.from_logits) {}

Tensor BinaryCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [t, p] = last_axis_inputs(name(), y_true, y_pred, /*same_shape=*/true);
  if (from_logits_) return reduce_mean(sigmoid_cross_entropy_with_logits(t, p), -1);
  // Keras (TF backend): clip, then log(p + eps) and log(1 - p + eps).
  Tensor q = clip_by_value(p, kEpsilon, 1.0 - kEpsilon);
  Tensor bce = t * log(q + kEpsilon) + (1.0 - t) * log(1.0 - q + kEpsilon);
  return reduce_mean(-bce, -1);
}

MeanSquaredError::MeanSquaredError(MeanSquaredErrorOptions o) : Loss(o.name, o.reduction) {}

Tensor MeanSquaredError::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [t, p] = last_axis_inputs(name(), y_true, y_pred, /*same_shape=*/false);
  return reduce_mean(square(p - t), -1);
}

std::shared_ptr<Loss> get_loss(const std::string& name) {
  if (name == "sparse_categorical_crossentropy") return std::make_shared<SparseCategoricalCrossentropy>();
  if (name == "categorical_crossentropy") return std::make_shared<CategoricalCrossentropy>();
  if (name == "binary_crossentropy") return std::make_shared<BinaryCrossentropy>();
  if (name == "mse" || name == "mean_squared_error") return std::make_shared<MeanSquaredError>();
  throw std::invalid_argument("get_loss: unknown loss '" + name +
                              "' (known: sparse_categorical_crossentropy, categorical_crossentropy, "
                              "binary_crossentropy, mean_squared_error, mse)");
}

}  // namespace tapeflow::models
