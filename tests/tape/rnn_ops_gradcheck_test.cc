// LSTMBlockCell and BlockLSTM: float64 first- and second-order gradient checks (every output used,
// and h alone), forward values against the same math composed from ops, BlockLSTM's one-kernel
// backward against its backward with ops, and their errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <optional>

#include "tape/runtime/recorder.h"
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

// BlockLSTM's outputs weighted by in[6..9] (x, wx, wh, b, h0, c0 = in[0..5]).
tf::Tensor all_sequence_outputs(const In& in) {
  const tf::LstmSequenceOutputs o = tf::block_lstm(in[0], in[1], in[2], in[3], in[4], in[5]);
  return tf::reduce_sum(o.h * in[6]) + tf::reduce_sum(o.c * in[7]) + tf::reduce_sum(o.gates * in[8]) +
         tf::reduce_sum(o.tc * in[9]);
}

tf::testing::RegisterGradChecks rows({
    {"LSTMBlockCell", "every output, u 2", all_outputs, inputs({{3, 8}, {3, 2}, {3, 2}, {3, 2}, {3, 8}, {3, 2}})},
    {"LSTMBlockCell", "h only, u 3", [](const In& in) { return tf::square(tf::lstm_block_cell(in[0], in[1]).h); },
     inputs({{2, 12}, {2, 3}})},
    {"LSTMBlockCell", "c only, u 1", [](const In& in) { return tf::square(tf::lstm_block_cell(in[0], in[1]).c); },
     inputs({{2, 4}, {2, 1}})},
    {"BlockLSTM", "every output, 3 steps, batch 2, in 3, u 2", all_sequence_outputs,
     inputs({{3, 2, 3}, {3, 8}, {2, 8}, {8}, {2, 2}, {2, 2}, {3, 2, 2}, {3, 2, 2}, {3, 2, 8}, {3, 2, 2}})},
    {"BlockLSTM", "h only, 4 steps, batch 3, in 2, u 1",
     [](const In& in) { return tf::square(tf::block_lstm(in[0], in[1], in[2], in[3], in[4], in[5]).h); },
     inputs({{4, 3, 2}, {2, 4}, {1, 4}, {4}, {3, 1}, {3, 1}})},
    {"BlockLSTM", "c only, 1 step, in 1, u 3",
     [](const In& in) { return tf::square(tf::block_lstm(in[0], in[1], in[2], in[3], in[4], in[5]).c); },
     inputs({{1, 2, 1}, {1, 12}, {3, 12}, {12}, {2, 3}, {2, 3}})},
});

TEST(RnnOpsGradCheck, FirstAndSecondOrder) { tf::testing::run_gradcheck_cases({"LSTMBlockCell", "BlockLSTM"}); }

// BlockLSTM against the step by step ops (matmul + lstm_block_cell): bit for bit in float32 on the
// packed GEMM (AVX2 and up), to rounding otherwise; small (one block of rows), large enough for a
// block of rows per thread, and large enough for the input projection per block (W11's in and u).
class BlockLstmSizes : public ::testing::TestWithParam<std::array<std::int64_t, 4>> {};  // steps, batch, in, u
TEST_P(BlockLstmSizes, MatchesTheSteps) {
  for (tf::DType dt : {tf::DType::kFloat64, tf::DType::kFloat32}) {
    const auto [steps, batch, in, u] = GetParam();
    const tf::Tensor x = tf::convert(random_f64({steps, batch, in}, 3, -2, 2), dt);
    const tf::Tensor wx = tf::convert(random_f64({in, 4 * u}, 4), dt), wh = tf::convert(random_f64({u, 4 * u}, 5), dt);
    const tf::Tensor b = tf::convert(random_f64({4 * u}, 6), dt);
    const tf::Tensor h0 = tf::convert(random_f64({batch, u}, 7), dt), c0 = tf::convert(random_f64({batch, u}, 8), dt);
    const tf::LstmSequenceOutputs o = tf::block_lstm(x, wx, wh, b, h0, c0);
    // As the RNN layer's step by step path: the projection of all steps in one matmul, then per step.
    const tf::Tensor xp = tf::matmul(tf::reshape(x, std::vector<std::int64_t>{steps * batch, in}), wx) + b;
    const std::vector<tf::Tensor> xs = tf::unstack(tf::reshape(xp, std::vector<std::int64_t>{steps, batch, 4 * u}), 0);
    tf::Tensor h = h0, c = c0;
    std::vector<tf::Tensor> hs, cs, gs, ts;
    for (std::int64_t t = 0; t < steps; ++t) {
      const tf::LstmCellOutputs s = tf::lstm_block_cell(xs[static_cast<std::size_t>(t)] + tf::matmul(h, wh), c);
      h = s.h;
      c = s.c;
      hs.push_back(s.h);
      cs.push_back(s.c);
      gs.push_back(s.gates);
      ts.push_back(s.tc);
    }
    const bool exact = dt == tf::DType::kFloat32 && tf::cpu_isa() >= tf::CpuIsa::kAvx2;
    const double tol = exact ? 0 : dt == tf::DType::kFloat64 ? 1e-14 : 1e-6;
    EXPECT_TRUE(tf::testing::all_close(o.h, tf::stack(hs, 0), tol, tol));
    EXPECT_TRUE(tf::testing::all_close(o.c, tf::stack(cs, 0), tol, tol));
    EXPECT_TRUE(tf::testing::all_close(o.gates, tf::stack(gs, 0), tol, tol));
    EXPECT_TRUE(tf::testing::all_close(o.tc, tf::stack(ts, 0), tol, tol));
  }
}
INSTANTIATE_TEST_SUITE_P(RnnOpsForward, BlockLstmSizes,
                         ::testing::Values(std::array<std::int64_t, 4>{5, 19, 3, 7},
                                           std::array<std::int64_t, 4>{3, 66, 28, 32},
                                           std::array<std::int64_t, 4>{2, 70, 28, 128}));

// The one-kernel backward (nothing records it) and the backward with ops (an outer tape records it)
// give the same gradients of every input from cotangents on every output.
TEST(RnnOpsGradient, BlockLstmKernelAndOpsBackwardsAgree) {
  for (tf::DType dt : {tf::DType::kFloat64, tf::DType::kFloat32}) {
    const std::int64_t steps = 6, batch = 13, in = 3, u = 5;
    std::vector<tf::Tensor> in_ = {tf::convert(random_f64({steps, batch, in}, 7, -2, 2), dt),
                                   tf::convert(random_f64({in, 4 * u}, 8), dt), tf::convert(random_f64({u, 4 * u}, 9), dt),
                                   tf::convert(random_f64({4 * u}, 10), dt), tf::convert(random_f64({batch, u}, 11), dt),
                                   tf::convert(random_f64({batch, u}, 12), dt)};
    const In weights = {tf::convert(random_f64({steps, batch, u}, 13), dt), tf::convert(random_f64({steps, batch, u}, 14), dt),
                        tf::convert(random_f64({steps, batch, 4 * u}, 15), dt),
                        tf::convert(random_f64({steps, batch, u}, 16), dt)};
    auto grads = [&](bool recorded) {
      std::optional<tf::GradientTape> outer;
      if (recorded) outer.emplace();
      std::vector<std::optional<tf::Tensor>> g;
      {
        tf::GradientTape tape;  // not persistent: it stops recording when its gradient() starts
        for (const tf::Tensor& t : in_) tape.watch(t);
        In all = in_;
        all.insert(all.end(), weights.begin(), weights.end());
        const tf::Tensor loss = all_sequence_outputs(all);
        g = tape.gradient(loss, in_);
      }
      EXPECT_EQ(tf::is_recording(), recorded);
      std::vector<tf::Tensor> out;
      for (auto& v : g) out.push_back(*v);
      return out;
    };
    const std::vector<tf::Tensor> kernel = grads(false), ops = grads(true);
    const double tol = dt == tf::DType::kFloat64 ? 1e-13 : 2e-5;
    for (std::size_t i = 0; i < in_.size(); ++i) EXPECT_TRUE(tf::testing::all_close(kernel[i], ops[i], tol, tol)) << i;
  }
}

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

TEST(RnnOpsForward, BlockLstmErrorsNameTheShapes) {
  auto msg = [](const tf::Tensor& x, const tf::Tensor& wx, const tf::Tensor& wh, const tf::Tensor& h0,
                const tf::Tensor& c0) {
    try {
      tf::block_lstm(x, wx, wh, tf::zeros({8}), h0, c0);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no exception)");
  };
  const tf::Tensor s = tf::zeros({2, 2}), wx = tf::zeros({3, 8}), wh = tf::zeros({2, 8});
  EXPECT_THAT(msg(tf::zeros({4, 2, 3}), wx, wh, s, s), ::testing::HasSubstr("(no exception)"));
  EXPECT_THAT(msg(tf::zeros({4, 2, 5}), wx, wh, s, s), ::testing::HasSubstr("x [4, 2, 5]"));
  EXPECT_THAT(msg(tf::zeros({0, 2, 3}), wx, wh, s, s), ::testing::HasSubstr("steps >= 1"));
  EXPECT_THAT(msg(tf::zeros({4, 2, 3}), wx, tf::zeros({2, 4}), s, s), ::testing::HasSubstr("wh [2, 4]"));
  EXPECT_THAT(msg(tf::zeros({4, 2, 3}), wx, wh, tf::zeros({3, 2}), s), ::testing::HasSubstr("h0 [3, 2]"));
  EXPECT_THAT(msg(tf::zeros({4, 2, 3}), wx, wh, s, tf::zeros({2, 2}, tf::DType::kFloat64)),
              ::testing::HasSubstr("one dtype"));
}

}  // namespace
