// LSTMBlockCell: float64 first- and second-order gradient checks (every output used, and h alone),
// forward values against the same math composed from ops, and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tape/tapeflow.h"
#include "tests/testing/gradcheck_table.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using tf::testing::random_f64;

namespace {

using In = std::vector<tf::Tensor>;

std::function<In()> inputs(std::vector<tf::Shape> shapes) {
  return tf::testing::random_inputs(std::move(shapes), 91, -2.0, 2.0);
}

// A weighted sum of every output (weights in[2..5]), so each output's gradient path is checked.
tf::Tensor all_outputs(const In& in) {
  const tf::LstmCellOutputs o = tf::lstm_block_cell(in[0], in[1]);
  return tf::reduce_sum(o.h * in[2]) + tf::reduce_sum(o.c * in[3]) + tf::reduce_sum(o.gates * in[4]) +
         tf::reduce_sum(o.tc * in[5]);
}

tf::testing::RegisterGradChecks rows({
    {"LSTMBlockCell", "every output, u 2", all_outputs, inputs({{3, 8}, {3, 2}, {3, 2}, {3, 2}, {3, 8}, {3, 2}})},
    {"LSTMBlockCell", "h only, u 3", [](const In& in) { return tf::square(tf::lstm_block_cell(in[0], in[1]).h); },
     inputs({{2, 12}, {2, 3}})},
    {"LSTMBlockCell", "c only, u 1", [](const In& in) { return tf::square(tf::lstm_block_cell(in[0], in[1]).c); },
     inputs({{2, 4}, {2, 1}})},
});

TEST(RnnOpsGradCheck, FirstAndSecondOrder) { tf::testing::run_gradcheck_cases({"LSTMBlockCell"}); }

TEST(RnnOpsForward, LstmBlockCellMatchesTheComposedMath) {
  for (tf::DType dt : {tf::DType::kFloat64, tf::DType::kFloat32}) {
    const tf::Tensor z = tf::convert(random_f64({5, 12}, 1, -3, 3), dt), cp = tf::convert(random_f64({5, 3}, 2), dt);
    const tf::LstmCellOutputs o = tf::lstm_block_cell(z, cp);
    const std::vector<tf::Tensor> q = tf::split(z, 4, 1);
    const tf::Tensor i = tf::sigmoid(q[0]), f = tf::sigmoid(q[1]), g = tf::tanh(q[2]), out = tf::sigmoid(q[3]);
    const tf::Tensor c = f * cp + i * g;
    const double tol = dt == tf::DType::kFloat64 ? 1e-15 : 1e-6;
    EXPECT_TRUE(tf::testing::all_close(o.c, c, tol, tol));
    EXPECT_TRUE(tf::testing::all_close(o.tc, tf::tanh(c), tol, tol));
    EXPECT_TRUE(tf::testing::all_close(o.h, out * tf::tanh(c), tol, tol));
    EXPECT_TRUE(tf::testing::all_close(o.gates, tf::concat({i, f, g, out}, 1), tol, tol));
  }
}

TEST(RnnOpsForward, LstmBlockCellErrorsNameTheShapes) {
  auto msg = [](const tf::Tensor& z, const tf::Tensor& cp) {
    try {
      tf::lstm_block_cell(z, cp);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no exception)");
  };
  EXPECT_THAT(msg(tf::zeros({2, 7}), tf::zeros({2, 2})), ::testing::HasSubstr("z [batch, 4u]"));
  EXPECT_THAT(msg(tf::zeros({2, 8}), tf::zeros({3, 2})), ::testing::HasSubstr("[3, 2]"));
  EXPECT_THAT(msg(tf::zeros({2, 8}), tf::zeros({2, 2}, tf::DType::kFloat64)), ::testing::HasSubstr("one dtype"));
}

}  // namespace
