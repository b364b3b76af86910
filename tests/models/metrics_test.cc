// Metrics against the numbers of Keras's docstrings.
#include "models/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tapeflow::models {
namespace {

Tensor f64(const std::vector<double>& v, const Shape& s) { return constant(v, s); }

TEST(MetricsTest, Mean) {
  Mean m;
  EXPECT_EQ(m.name(), "mean");
  EXPECT_EQ(m.result(), 0.0);
  m.update_state(f64({1, 3, 5, 7}, Shape{4}));
  EXPECT_DOUBLE_EQ(m.result(), 4.0);
  m.reset_state();
  m.update_state(f64({1, 3, 5, 7}, Shape{4}), f64({1, 1, 0, 0}, Shape{4}));
  EXPECT_DOUBLE_EQ(m.result(), 2.0);
  m.update_state(8.0, 2.0);  // (1 + 3 + 16) / 4
  EXPECT_DOUBLE_EQ(m.result(), 5.0);
  // One weight per row of a matrix of values.
  Mean rows;
  rows.update_state(f64({1, 2, 10, 20}, Shape{2, 2}), f64({1, 0}, Shape{2}));
  EXPECT_DOUBLE_EQ(rows.result(), 1.5);
  EXPECT_THROW(rows.update_state(f64({1, 2, 3}, Shape{3}), f64({1, 0}, Shape{2})), std::invalid_argument);
  EXPECT_THROW(rows.update_state(Tensor()), std::invalid_argument);
}

TEST(MetricsTest, Accuracy) {
  Accuracy m;
  m.update_state(f64({1, 2, 3, 4}, Shape{4, 1}), f64({0, 2, 3, 4}, Shape{4, 1}));
  EXPECT_DOUBLE_EQ(m.result(), 0.75);
  m.reset_state();
  m.update_state(f64({1, 2, 3, 4}, Shape{4, 1}), f64({0, 2, 3, 4}, Shape{4, 1}), f64({1, 1, 0, 0}, Shape{4}));
  EXPECT_DOUBLE_EQ(m.result(), 0.5);
  EXPECT_THROW(m.update_state(f64({1, 2}, Shape{2}), f64({1}, Shape{1})), std::invalid_argument);
}

TEST(MetricsTest, SparseCategoricalAccuracy) {
  SparseCategoricalAccuracy m;
  EXPECT_EQ(m.name(), "sparse_categorical_accuracy");
  const Tensor y_pred = f64({0.1, 0.6, 0.3, 0.05, 0.95, 0}, Shape{2, 3});
  m.update_state(f64({2, 1}, Shape{2, 1}), y_pred);
  EXPECT_DOUBLE_EQ(m.result(), 0.5);
  m.reset_state();
  m.update_state(constant(std::vector<std::int64_t>{2, 1}, Shape{2}), y_pred, f64({0.7, 0.3}, Shape{2}));
  EXPECT_DOUBLE_EQ(m.result(), 0.3);
  // Ties go to the first maximum, as argmax.
  m.reset_state();
  m.update_state(constant(std::vector<std::int32_t>{0}, Shape{1}), f64({0.5, 0.5}, Shape{1, 2}));
  EXPECT_DOUBLE_EQ(m.result(), 1.0);
  try {
    m.update_state(f64({1, 2, 0}, Shape{3}), y_pred);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("y_true [3], y_pred [2, 3]"));
  }
}

TEST(MetricsTest, CategoricalAndBinaryAccuracy) {
  CategoricalAccuracy c;
  c.update_state(f64({0, 0, 1, 0, 1, 0}, Shape{2, 3}), f64({0.1, 0.9, 0.8, 0.05, 0.95, 0}, Shape{2, 3}));
  EXPECT_DOUBLE_EQ(c.result(), 0.5);
  EXPECT_THROW(c.update_state(f64({0, 1}, Shape{1, 2}), f64({0, 1, 0}, Shape{1, 3})), std::invalid_argument);
  BinaryAccuracy b;
  b.update_state(f64({1, 1, 0, 0}, Shape{4, 1}), f64({0.98, 1, 0, 0.6}, Shape{4, 1}));
  EXPECT_DOUBLE_EQ(b.result(), 0.75);
  BinaryAccuracy b2("b2", 0.7);
  b2.update_state(f64({1, 1, 0, 0}, Shape{4}), f64({0.98, 1, 0, 0.6}, Shape{4}));
  EXPECT_DOUBLE_EQ(b2.result(), 1.0);
  EXPECT_THROW(b.update_state(f64({1}, Shape{1}), f64({1, 0}, Shape{2})), std::invalid_argument);
}

}  // namespace
}  // namespace tapeflow::models
