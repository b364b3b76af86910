#include "tape/function/function.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tape/tapeflow.h"

namespace tf = tapeflow;

namespace {

// The seed's clip_gradients: identity forward, gradient clipped to norm 0.5.
std::pair<std::vector<tf::Tensor>, tf::CustomGradFn> clip_gradients(const std::vector<tf::Tensor>& x) {
  return {{x[0]}, [](const std::vector<tf::Tensor>& dy) { return std::vector<tf::Tensor>{tf::clip_by_norm(dy[0], 0.5)}; }};
}

double grad_through(const tf::TracedFn& fn) {
  tf::Variable v(2.0);
  tf::GradientTape t;
  tf::Tensor out = fn({v * v})[0];
  return t.gradient(out, v)->item();
}

TEST(Function, TraceRecordsOpsAndReplays) {
  auto fn = [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{tf::exp(x[0]) * 3.0 + x[0]}; };
  tf::FunctionGraph g = tf::trace("f", fn, {tf::Tensor({1.0, 2.0})});
  ASSERT_EQ(g.input_specs.size(), 1u);
  EXPECT_EQ(g.outputs.size(), 1u);
  EXPECT_FALSE(g.has_gradient);
  int ops = 0;
  for (const auto& n : g.nodes) ops += n.kind == tf::FunctionNode::Kind::kOp;
  EXPECT_EQ(ops, 3);
  EXPECT_EQ(g.constants.size(), 1u);  // the 3.0
  tf::Tensor x({0.5, -1.0});
  EXPECT_EQ(g.call({x})[0].to_vector<float>(), fn({x})[0].to_vector<float>());
  // Replay goes through execute, so a tape differentiates it.
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = tf::reduce_sum(g.call({x})[0]);
  auto dx = tape.gradient(y, x)->to_vector<float>();
  EXPECT_FLOAT_EQ(dx[0], 3 * std::exp(0.5f) + 1);
}

TEST(Function, CustomGradientTracedWithItsGradient) {
  tf::FunctionGraph g = tf::trace_custom_gradient("clip_t1", clip_gradients, {tf::Tensor(1.0f)});
  EXPECT_TRUE(g.has_gradient);
  auto d = g.gradient({tf::Tensor(4.0f)}, {tf::Tensor(4.0f)});
  EXPECT_FLOAT_EQ(d[0].item(), 0.5);
  tf::TracedFn f = tf::register_function(g);
  EXPECT_DOUBLE_EQ(grad_through(f), 2.0);  // 2v * clip(1 -> 0.5)... dy=1 clipped to 0.5, times 2v=4
}

TEST(Function, SerializeRoundTripKeepsGradient) {
  tf::FunctionGraph g = tf::trace_custom_gradient("clip_t2", clip_gradients, {tf::Tensor(1.0f)});
  tf::SerializedFunction s = g.serialize();
  tf::FunctionGraph back = tf::FunctionGraph::deserialize("clip_t2", s);
  EXPECT_EQ(back.serialize().program, s.program);
  EXPECT_DOUBLE_EQ(grad_through(tf::register_function(back)), 2.0);
}

TEST(Function, WithoutGradientFallsBackToForwardGraph) {
  auto fn = [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{x[0] * x[0]}; };
  tf::TracedFn f = tf::register_function(tf::trace("square_t3", fn, {tf::Tensor(1.0f)}));
  EXPECT_DOUBLE_EQ(grad_through(f), 32.0);  // d(v^4)/dv at 2
}

TEST(Function, ReRegisteringReplacesTheGraph) {
  auto a = [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{x[0] * 2.0}; };
  auto b = [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{x[0] * 3.0}; };
  tf::register_function(tf::trace("re_t4", a, {tf::Tensor(1.0f)}));
  tf::TracedFn f = tf::register_function(tf::trace("re_t4", b, {tf::Tensor(1.0f)}));
  EXPECT_FLOAT_EQ(f({tf::Tensor(2.0f)})[0].item(), 6.0);
}

TEST(Function, Errors) {
  auto id = [](const std::vector<tf::Tensor>& x) { return x; };
  EXPECT_THROW(tf::trace("bad name", id, {tf::Tensor(1.0f)}), std::invalid_argument);
  EXPECT_THROW(tf::trace("", id, {tf::Tensor(1.0f)}), std::invalid_argument);
  auto clip = tf::custom_gradient(clip_gradients);
  EXPECT_THROW(tf::trace("nested", clip, {tf::Tensor(1.0f)}), std::invalid_argument);
  tf::FunctionGraph g = tf::trace("sq", [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{x[0] * x[0]}; },
                                  {tf::Tensor({1.0, 2.0})});
  EXPECT_THROW(g.call({tf::Tensor(1.0f)}), std::invalid_argument);
  EXPECT_THROW(g.call({}), std::invalid_argument);
  EXPECT_THROW(g.gradient({tf::Tensor({1.0, 2.0})}, {tf::Tensor({1.0, 2.0})}), std::logic_error);
  EXPECT_THROW(tf::call_function("never_registered", {}), std::invalid_argument);
}

TEST(Function, DeserializeRejectsHostilePrograms) {
  tf::FunctionGraph g = tf::trace("h", [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{tf::exp(x[0])}; },
                                  {tf::Tensor(1.0f)});
  tf::SerializedFunction s = g.serialize();
  auto expect_error = [](const tf::SerializedFunction& bad, const std::string& part) {
    try {
      tf::FunctionGraph::deserialize("h", bad);
      ADD_FAILURE() << "no error for: " << bad.program;
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), testing::HasSubstr("function 'h'"));
      EXPECT_THAT(e.what(), testing::HasSubstr(part));
    }
  };
  tf::SerializedFunction unknown = s;
  unknown.program.replace(unknown.program.find("op Exp"), 6, "op NoSuchOp");
  expect_error(unknown, "unknown op 'NoSuchOp'");
  expect_error({s.program.substr(0, s.program.size() / 2), s.constants}, "malformed");
  expect_error({"garbage", {}}, "malformed");
  tf::SerializedFunction edge = s;
  edge.program.replace(edge.program.find("op Exp 1 1 0 0"), 14, "op Exp 1 1 7 0");
  expect_error(edge, "node reference");
  tf::SerializedFunction consts = s;
  consts.constants.push_back(tf::Tensor(1.0f));
  expect_error(consts, "constants");
}

// Ops with int-list, bool, float and dtype attrs and several outputs survive serialisation exactly.
TEST(Function, AttrsAndMultiOutputOpsRoundTrip) {
  auto fn = [](const std::vector<tf::Tensor>& x) {
    tf::Tensor a = tf::transpose(x[0], {1, 0});
    std::vector<tf::Tensor> parts = tf::unstack(a, 0);
    tf::Tensor s = tf::reduce_sum(tf::leaky_relu(parts[1], 0.1), {0}, true);
    tf::Tensor m = tf::matmul(x[0], x[1], false, true);
    return std::vector<tf::Tensor>{tf::cast(s, tf::DType::kFloat64), tf::concat({m, m}, 1), tf::softmax(m, 0)};
  };
  tf::Generator gen(3);
  std::vector<tf::Tensor> x = {tf::random_normal(tf::Shape{3, 2}, gen), tf::random_normal(tf::Shape{4, 2}, gen)};
  tf::FunctionGraph g = tf::trace("attrs", fn, x);
  tf::FunctionGraph back = tf::FunctionGraph::deserialize("attrs", g.serialize());
  EXPECT_EQ(back.serialize().program, g.serialize().program);
  std::vector<tf::Tensor> x2 = {tf::random_normal(tf::Shape{3, 2}, gen), tf::random_normal(tf::Shape{4, 2}, gen)};
  auto want = fn(x2), got = back.call(x2);
  ASSERT_EQ(got.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].dtype(), want[i].dtype());
    EXPECT_EQ(got[i].to_vector<double>(), want[i].to_vector<double>()) << i;
  }
}

// A registered function is differentiable to second order (fallback path: its traced ops).
TEST(Function, SecondOrderThroughARegisteredFunction) {
  auto cube = [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{x[0] * x[0] * x[0]}; };
  tf::TracedFn f = tf::register_function(tf::trace("cube_t5", cube, {tf::Tensor(1.0f)}));
  tf::Variable v(2.0);
  tf::GradientTape outer;
  tf::GradientTape inner;
  tf::Tensor y = f({v.read()})[0];
  tf::Tensor dy = *inner.gradient(y, v);
  EXPECT_FLOAT_EQ(dy.item(), 12.0);
  EXPECT_FLOAT_EQ(outer.gradient(dy, v)->item(), 12.0);  // 6x
}

}  // namespace
