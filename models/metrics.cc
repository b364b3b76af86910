#include "models/metrics.h"

#include <stdexcept>
#include <vector>

namespace tapeflow::models {
namespace {

std::string shapes(const Tensor& y_true, const Tensor& y_pred) {
  return "y_true " + y_true.shape().to_string() + ", y_pred " + y_pred.shape().to_string();
}

void check_numeric(const std::string& metric, const Tensor& t, const char* what) {
  if (!t.defined()) throw std::invalid_argument(metric + ": " + what + " is undefined");
  if (t.dtype() == DType::kBool && std::string(what) != "y_true")
    throw std::invalid_argument(metric + ": " + what + " must be numeric, got bool");
}

// Index of the first maximum of each row of a [rows, cols] tensor.
std::vector<std::int64_t> row_argmax(const Tensor& t, std::int64_t rows, std::int64_t cols) {
  const std::vector<double> v = t.to_vector<double>();
  std::vector<std::int64_t> out(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < cols; ++c)
      if (v[r * cols + c] > v[r * cols + best]) best = c;
    out[r] = best;
  }
  return out;
}

Tensor as_tensor(const std::vector<double>& v) { return constant(v, Shape{static_cast<std::int64_t>(v.size())}); }

}  // namespace

void Mean::update_state(const Tensor& values, const Tensor& sample_weight) {
  check_numeric(name(), values, "values");
  const std::vector<double> v = values.to_vector<double>();
  if (!sample_weight.defined()) {
    for (double x : v) total_ += x;
    count_ += static_cast<double>(v.size());
    return;
  }
  const std::vector<double> w = sample_weight.to_vector<double>();
  if (w.size() == v.size()) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      total_ += v[i] * w[i];
      count_ += w[i];
    }
  } else if (!w.empty() && v.size() % w.size() == 0 && values.rank() >= 1 &&
             values.shape()[0] == static_cast<std::int64_t>(w.size())) {
    const std::size_t per_row = v.size() / w.size();  // one weight per row, as Keras broadcasts
    for (std::size_t i = 0; i < v.size(); ++i) {
      total_ += v[i] * w[i / per_row];
      count_ += w[i / per_row];
    }
  } else {
    throw std::invalid_argument(name() + ": sample_weight " + sample_weight.shape().to_string() +
                                " does not broadcast to values " + values.shape().to_string());
  }
}

void Mean::update_state(double value, double weight) {
  total_ += value * weight;
  count_ += weight;
}

void PredictionMetric::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  check_numeric(name(), y_true, "y_true");
  check_numeric(name(), y_pred, "y_pred");
  mean_.update_state(values(y_true, y_pred), sample_weight);
}

Tensor Accuracy::values(const Tensor& y_true, const Tensor& y_pred) const {
  if (y_true.num_elements() != y_pred.num_elements())
    throw std::invalid_argument(name() + ": y_true and y_pred must have the same number of elements, " +
                                shapes(y_true, y_pred));
  const std::vector<double> t = y_true.to_vector<double>(), p = y_pred.to_vector<double>();
  std::vector<double> out(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) out[i] = t[i] == p[i] ? 1.0 : 0.0;
  return as_tensor(out);
}

Tensor SparseCategoricalAccuracy::values(const Tensor& y_true, const Tensor& y_pred) const {
  if (y_pred.rank() != 2 || y_pred.shape()[1] < 1 || y_true.num_elements() != y_pred.shape()[0] ||
      y_true.rank() > 2 || (y_true.rank() == 2 && y_true.shape()[1] != 1))
    throw std::invalid_argument(name() + ": expected y_true [batch] or [batch, 1] and y_pred [batch, classes], " +
                                shapes(y_true, y_pred));
  const std::int64_t rows = y_pred.shape()[0];
  const auto pred = row_argmax(y_pred, rows, y_pred.shape()[1]);
  const std::vector<double> t = y_true.to_vector<double>();
  std::vector<double> out(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) out[r] = t[r] == static_cast<double>(pred[r]) ? 1.0 : 0.0;
  return as_tensor(out);
}

Tensor CategoricalAccuracy::values(const Tensor& y_true, const Tensor& y_pred) const {
  if (y_pred.rank() != 2 || y_true.shape() != y_pred.shape() || y_pred.shape()[1] < 1)
    throw std::invalid_argument(name() + ": expected y_true and y_pred of the same shape [batch, classes], " +
                                shapes(y_true, y_pred));
  const std::int64_t rows = y_pred.shape()[0], cols = y_pred.shape()[1];
  const auto t = row_argmax(y_true, rows, cols), p = row_argmax(y_pred, rows, cols);
  std::vector<double> out(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) out[r] = t[r] == p[r] ? 1.0 : 0.0;
  return as_tensor(out);
}

Tensor BinaryAccuracy::values(const Tensor& y_true, const Tensor& y_pred) const {
  if (y_true.num_elements() != y_pred.num_elements() || y_pred.rank() == 0)
    throw std::invalid_argument(name() + ": y_true and y_pred must have the same number of elements, " +
                                shapes(y_true, y_pred));
  const std::int64_t rows = y_pred.shape()[0];
  const std::int64_t cols = rows == 0 ? 0 : y_pred.num_elements() / rows;
  const std::vector<double> t = y_true.to_vector<double>(), p = y_pred.to_vector<double>();
  std::vector<double> out(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double hits = 0;
    for (std::int64_t c = 0; c < cols; ++c) hits += (p[r * cols + c] > threshold_ ? 1.0 : 0.0) == t[r * cols + c];
    out[r] = hits / static_cast<double>(cols);
  }
  return as_tensor(out);
}

}  // namespace tapeflow::models
