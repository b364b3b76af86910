// Float64 first- and second-order gradient checks of the linear-algebra ops (matmul, solve); the rows
// also drive the vectorized-vs-loop batching test.
#include <gtest/gtest.h>

#include "tape/tapeflow.h"
#include "tests/testing/gradcheck_table.h"

namespace tf = tapeflow;
using tf::testing::random_f64;

namespace {

using Fn = tf::testing::TestFn;

std::function<std::vector<tf::Tensor>()> inputs(std::vector<tf::Shape> shapes) {
  return [shapes] {
    std::vector<tf::Tensor> out;
    std::uint64_t seed = 11;
    for (const auto& s : shapes) out.push_back(random_f64(s, seed++));
    return out;
  };
}

Fn mm(bool ta, bool tb) {
  return [ta, tb](const std::vector<tf::Tensor>& in) { return tf::matmul(in[0], in[1], ta, tb); };
}

// A well-conditioned matrix (diagonally dominant) and a right-hand side.
std::vector<tf::Tensor> solve_inputs() {
  tf::Tensor a = random_f64({3, 3}, 21) + tf::eye(3, -1, tf::DType::kFloat64) * 3.0;
  return {a, random_f64({3, 2}, 22)};
}

tf::testing::RegisterGradChecks rows({
    {"MatMul", "[2,3] x [3,4]", mm(false, false), inputs({{2, 3}, {3, 4}})},
    {"MatMul", "transpose_a [3,2]ᵀ x [3,4]", mm(true, false), inputs({{3, 2}, {3, 4}})},
    {"MatMul", "transpose_b [2,3] x [4,3]ᵀ", mm(false, true), inputs({{2, 3}, {4, 3}})},
    {"MatMul", "both transposed [3,2]ᵀ x [4,3]ᵀ", mm(true, true), inputs({{3, 2}, {4, 3}})},
    {"MatMul", "batched [2,2,3] x [2,3,2]", mm(false, false), inputs({{2, 2, 3}, {2, 3, 2}})},
    {"MatMul", "batch broadcast [2,1,2,3] x [3,3,2]", mm(false, false), inputs({{2, 1, 2, 3}, {3, 3, 2}})},
    {"MatMul", "missing batch dim [2,3] x [2,3,2] transposed", mm(true, false), inputs({{3, 2}, {2, 3, 2}})},
    {"MatMul", "batch broadcast both transposed", mm(true, true), inputs({{2, 1, 3, 2}, {1, 2, 2, 3}})},
    {"MatrixSolve", "[3,3] x [3,2]", [](const std::vector<tf::Tensor>& in) { return tf::solve(in[0], in[1]); },
     solve_inputs},
    {"MatrixSolve", "adjoint", [](const std::vector<tf::Tensor>& in) { return tf::solve(in[0], in[1], true); },
     solve_inputs},
    {"MatrixSolve", "batched [2,3,3] x [2,3,1]",
     [](const std::vector<tf::Tensor>& in) {
       tf::Tensor a = in[0] + tf::broadcast_to(tf::eye(3, -1, tf::DType::kFloat64) * 3.0, tf::Shape{2, 3, 3});
       return tf::solve(a, in[1]);
     },
     inputs({{2, 3, 3}, {2, 3, 1}})},
});

TEST(LinalgOpsGradCheck, FirstAndSecondOrder) { tf::testing::run_gradcheck_cases({"MatMul", "MatrixSolve"}); }

}  // namespace
