// matmul and solve: forward values and every error path (gradient checks: linalg_ops_gradcheck_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using tf::testing::all_close;
using tf::testing::random_f64;

namespace {

TEST(Matmul, ForwardValues2D) {
  tf::Tensor a{{1, 2, 3}, {4, 5, 6}};
  tf::Tensor b{{7, 8}, {9, 10}, {11, 12}};
  tf::Tensor c = tf::matmul(a, b);
  EXPECT_EQ(c.shape(), (tf::Shape{2, 2}));
  EXPECT_EQ(c.dtype(), tf::DType::kFloat32);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{58, 64, 139, 154}));
}

TEST(Matmul, TransposeFlagsMatchExplicitProducts) {
  tf::Tensor a{{1, 2}, {3, 4}, {5, 6}};  // [3, 2]
  tf::Tensor b{{1, 0, 2}, {0, 1, 3}};    // [2, 3]
  // aᵀ [2,3] x bᵀ [3,2]: rows of a dotted with rows of b.
  tf::Tensor c = tf::matmul(a, b, true, true);
  EXPECT_EQ(c.shape(), (tf::Shape{2, 2}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1 + 10, 3 + 15, 2 + 12, 4 + 18}));
  EXPECT_EQ(tf::matmul(a, a, true, false).to_vector<float>(), (std::vector<float>{35, 44, 44, 56}));
  EXPECT_EQ(tf::matmul(b, b, false, true).to_vector<float>(), (std::vector<float>{5, 6, 6, 10}));
}

TEST(Matmul, BatchBroadcastMatchesPerMatrixProducts) {
  tf::Tensor a = random_f64({2, 1, 2, 3}, 1);
  tf::Tensor b = random_f64({3, 3, 4}, 2);
  tf::Tensor c = tf::matmul(a, b);
  ASSERT_EQ(c.shape(), (tf::Shape{2, 3, 2, 4}));
  auto av = a.to_vector<double>(), bv = b.to_vector<double>(), cv = c.to_vector<double>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int r = 0; r < 2; ++r)
        for (int q = 0; q < 4; ++q) {
          double s = 0;
          for (int k = 0; k < 3; ++k) s += av[i * 6 + r * 3 + k] * bv[j * 12 + k * 4 + q];
          EXPECT_NEAR(cv[((i * 3 + j) * 2 + r) * 4 + q], s, 1e-12);
        }
}

// Large enough for the kernel's parallel paths; b is one matrix shared by the batch (stride 0).
TEST(Matmul, ParallelBatchedWithSharedRhsMatchesReference) {
  const int batch = 3, m = 40, k = 50, n = 60;
  tf::Tensor a = random_f64({batch, m, k}, 3);
  tf::Tensor b = random_f64({n, k}, 4);
  tf::Tensor c = tf::matmul(a, b, false, true);
  ASSERT_EQ(c.shape(), (tf::Shape{batch, m, n}));
  auto av = a.to_vector<double>(), bv = b.to_vector<double>(), cv = c.to_vector<double>();
  double max_err = 0;
  for (int i = 0; i < batch; ++i)
    for (int r = 0; r < m; ++r)
      for (int q = 0; q < n; ++q) {
        double s = 0;
        for (int j = 0; j < k; ++j) s += av[(i * m + r) * k + j] * bv[q * k + j];
        max_err = std::max(max_err, std::abs(cv[(i * m + r) * n + q] - s));
      }
  EXPECT_LT(max_err, 1e-12);
}

TEST(Matmul, GradientSumsOverBroadcastBatch) {
  tf::Tensor a = tf::constant<double>({1, 2, 3, 4}, {2, 2});
  tf::Tensor b = tf::ones({3, 2, 2}, tf::DType::kFloat64);
  tf::GradientTape tape;
  tape.watch(a);
  tf::Tensor y = tf::matmul(a, b);
  tf::Tensor da = *tape.gradient(y, a);
  EXPECT_EQ(da.shape(), (tf::Shape{2, 2}));
  // d(sum(a b))/da = sum over 3 batches of ones [2,2] @ bᵀ = 3 * 2 per element.
  EXPECT_EQ(da.to_vector<double>(), (std::vector<double>{6, 6, 6, 6}));
}

TEST(Matmul, InnerDimensionMismatchNamesBothShapes) {
  tf::Tensor a = tf::zeros({2, 3}), b = tf::zeros({4, 5});
  try {
    tf::matmul(a, b);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "matmul: inner dimensions differ: a [2, 3], b [4, 5]");
  }
  try {
    tf::matmul(tf::zeros({2, 3}), tf::zeros({2, 3}), true, true);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "matmul: inner dimensions differ: a [2, 3], b [2, 3] (transpose_a=true, transpose_b=true)");
  }
  // The same shapes are valid with one transpose.
  EXPECT_EQ(tf::matmul(tf::zeros({2, 3}), tf::zeros({2, 3}), false, true).shape(), (tf::Shape{2, 2}));
  EXPECT_EQ(tf::matmul(tf::zeros({2, 3}), tf::zeros({2, 3}), true, false).shape(), (tf::Shape{3, 3}));
}

TEST(Matmul, RankDtypeAndBatchErrors) {
  EXPECT_THROW(
      {
        try {
          tf::matmul(tf::zeros({3}), tf::zeros({3, 2}));
        } catch (const std::invalid_argument& e) {
          EXPECT_STREQ(e.what(), "matmul: a must have rank >= 2, got [3]");
          throw;
        }
      },
      std::invalid_argument);
  EXPECT_THROW(tf::matmul(tf::zeros({3, 2}), tf::scalar(1.0)), std::invalid_argument);
  try {
    tf::matmul(tf::zeros({2, 2}), tf::zeros({2, 2}, tf::DType::kFloat64));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("matmul: dtypes differ"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tf::matmul(tf::zeros({2, 2}, tf::DType::kInt32), tf::zeros({2, 2}, tf::DType::kInt32)),
               std::invalid_argument);
  try {
    tf::matmul(tf::zeros({2, 2, 3}), tf::zeros({3, 3, 4}));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "matmul: batch dimensions do not broadcast: a [2, 2, 3], b [3, 3, 4]");
  }
}

TEST(Solve, ForwardValues) {
  // [[2, 1], [1, 3]] x = [[3], [5]] -> x = [[0.8], [1.4]]
  tf::Tensor a = tf::constant<double>({2, 1, 1, 3}, {2, 2});
  tf::Tensor b = tf::constant<double>({3, 5}, {2, 1});
  EXPECT_TRUE(all_close(tf::solve(a, b), tf::constant<double>({0.8, 1.4}, {2, 1}), 1e-12, 1e-12));
  // adjoint: aᵀ x = b with a = [[1, 2], [0, 1]] -> [[1, 0], [2, 1]] x = [1, 4] -> x = [1, 2]
  tf::Tensor u = tf::constant<double>({1, 2, 0, 1}, {2, 2});
  EXPECT_TRUE(all_close(tf::solve(u, tf::constant<double>({1, 4}, {2, 1}), true), tf::constant<double>({1, 2}, {2, 1}),
                        1e-12, 1e-12));
  tf::Tensor f = tf::solve(tf::fill({1, 1}, 4.0), tf::fill({1, 1}, 2.0));
  EXPECT_EQ(f.dtype(), tf::DType::kFloat32);
  EXPECT_FLOAT_EQ(f.item(), 0.5);
}

TEST(Solve, Errors) {
  try {
    tf::solve(tf::zeros({2, 3}), tf::zeros({2, 1}));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "solve: matrix must be square, got [2, 3]");
  }
  try {
    tf::solve(tf::Tensor{{1.0, 2.0}, {2.0, 4.0}}, tf::zeros({2, 1}));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("solve: matrix is singular"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tf::solve(tf::zeros({2}), tf::zeros({2, 1})), std::invalid_argument);
  EXPECT_THROW(tf::solve(tf::eye(2), tf::zeros({2})), std::invalid_argument);
  EXPECT_THROW(tf::solve(tf::eye(2), tf::zeros({3, 1})), std::invalid_argument);
  EXPECT_THROW(tf::solve(tf::eye(2), tf::zeros({2, 1}, tf::DType::kFloat64)), std::invalid_argument);
  EXPECT_THROW(tf::solve(tf::zeros({2, 2, 2}), tf::zeros({3, 2, 1})), std::invalid_argument);
  EXPECT_THROW(tf::solve(tf::eye(2, -1, tf::DType::kInt32), tf::zeros({2, 1}, tf::DType::kInt32)),
               std::invalid_argument);
}

}  // namespace
