#include "tape/kernels/nn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/kernels/reference.h"

namespace tapeflow::kernels {
namespace {

using testref::random_vector;

template <class T>
void check_softmax(std::int64_t rows, std::int64_t cols, double scale, double tol) {
  auto x = random_vector<T>(rows * cols, 1, -scale, scale);
  std::vector<T> y(x.size()), ly(x.size());
  softmax(x.data(), rows, cols, y.data());
  log_softmax(x.data(), rows, cols, ly.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, double(x[r * cols + j]));
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(double(x[r * cols + j]) - m);
    for (std::int64_t j = 0; j < cols; ++j) {
      const double lp = double(x[r * cols + j]) - m - std::log(s);
      ASSERT_NEAR(double(y[r * cols + j]), std::exp(lp), tol);
      ASSERT_NEAR(double(ly[r * cols + j]), lp, tol * (1 + std::abs(lp) + std::abs(m)));  // float rounding of x - lse
    }
  }
}

TEST(Softmax, MatchesReferenceIncludingHugeLogits) {
  check_softmax<double>(4, 7, 3, 1e-12);
  check_softmax<float>(4, 7, 3, 1e-6);
  check_softmax<float>(3, 5, 1000, 1e-5);  // would overflow without the max shift
  check_softmax<double>(2000, 50, 5, 1e-12);  // parallel over rows
  check_softmax<float>(1, 1, 1, 0);         // single column -> exactly 1 / 0
}

template <class T, class I>
void check_xent(std::int64_t rows, std::int64_t cols, double tol) {
  auto x = random_vector<T>(rows * cols, 2, -4, 4);
  std::vector<I> labels(rows);
  for (std::int64_t r = 0; r < rows; ++r) labels[r] = static_cast<I>((r * 7 + 1) % cols);
  std::vector<T> loss(rows), back(rows * cols);
  sparse_softmax_xent(x.data(), labels.data(), rows, cols, loss.data(), back.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, double(x[r * cols + j]));
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(double(x[r * cols + j]) - m);
    const double lse = m + std::log(s);
    ASSERT_NEAR(double(loss[r]), lse - double(x[r * cols + labels[r]]), tol);
    for (std::int64_t j = 0; j < cols; ++j) {
      const double want = std::exp(double(x[r * cols + j]) - lse) - (j == labels[r] ? 1.0 : 0.0);
      ASSERT_NEAR(double(back[r * cols + j]), want, tol);
    }
  }
  // Null backprop computes only the loss.
  std::vector<T> loss2(rows);
  sparse_softmax_xent(x.data(), labels.data(), rows, cols, loss2.data(), static_cast<T*>(nullptr));
  EXPECT_EQ(loss, loss2);
}

TEST(SparseSoftmaxXent, LossAndBackprop) {
  check_xent<double, std::int32_t>(5, 4, 1e-12);
  check_xent<float, std::int64_t>(5, 10, 1e-5);
  check_xent<float, std::int32_t>(3000, 10, 1e-5);
}

TEST(SparseSoftmaxXent, BadLabelNamesLabelAndCols) {
  const float x[6] = {};
  float loss[2], back[6];
  const std::int64_t labels[2] = {0, 3};
  try {
    sparse_softmax_xent(x, labels, 2, 3, loss, back);
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("label 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 3)"), std::string::npos) << msg;
  }
  const std::int32_t neg[2] = {-1, 0};
  EXPECT_THROW(sparse_softmax_xent(x, neg, 2, 3, loss, back), std::invalid_argument);
}

}  // namespace
}  // namespace tapeflow::kernels
