// Batching rules (OpDef::batch): the vectorized backward pass (TapeState::backward with
// BackwardOptions::batch = K) must equal the loop of one-hot backward passes, op by op, to 1e-12 in
// float64, first and second order; batch_jacobian's one-hot form, custom gradients, loop-only ops
// and the fallback warning are covered too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "tape/autodiff/internal/tape_state.h"
#include "tape/runtime/batching.h"
#include "tape/runtime/execute.h"
#include "tape/runtime/logging.h"
#include "tape/tapeflow.h"
#include "tests/testing/gradcheck_table.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using ::testing::HasSubstr;

namespace {

// [n, shape...] with a 1 at flat index i of row i.
tf::Tensor one_hot_rows(const tf::Shape& shape, tf::DType dtype) {
  const std::int64_t n = shape.num_elements();
  std::vector<double> v(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i * n + i)] = 1.0;
  tf::Shape s{n};
  for (std::int64_t d : shape) s.push_back(d);
  return tf::constant(v, s, dtype);
}

::testing::AssertionResult close(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= 1e-12 * std::max(1.0, std::abs(b[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": vectorized " << a[i] << ", loop " << b[i];
  return ::testing::AssertionSuccess();
}

// The Jacobian of y w.r.t. the sources `ids` on `s`, vectorized (one pass with K = y.size) and by the
// loop (one pass per row), must agree. Fails (does not fall back) if an op cannot batch.
void expect_vectorized_equals_loop(const tf::internal::TapeState& s, const tf::Tensor& y,
                                   const std::vector<std::int64_t>& ids, const std::vector<tf::Shape>& shapes) {
  const std::int64_t n = y.num_elements();
  const tf::Tensor seeds = one_hot_rows(y.shape(), y.dtype());
  std::vector<tf::Tensor> v;
  try {
    v = s.backward(std::span<const tf::Tensor>(&y, 1), std::span<const tf::Tensor>(&seeds, 1), ids, {.batch = n});
  } catch (const tf::BatchingUnsupported& e) {
    ADD_FAILURE() << "vectorized backward cannot batch: " << e.what();
    return;
  }
  ASSERT_EQ(v.size(), ids.size());
  for (std::size_t j = 0; j < ids.size(); ++j) {
    const std::int64_t m = shapes[j].num_elements();
    std::vector<double> loop(static_cast<std::size_t>(n * m), 0.0);
    for (std::int64_t i = 0; i < n; ++i) {
      std::vector<double> e(static_cast<std::size_t>(n), 0.0);
      e[static_cast<std::size_t>(i)] = 1.0;
      tf::Tensor seed = tf::constant(e, y.shape(), y.dtype());
      tf::Tensor g = s.backward(std::span<const tf::Tensor>(&y, 1), std::span<const tf::Tensor>(&seed, 1),
                                std::span<const std::int64_t>(&ids[j], 1))[0];
      if (!g.defined()) continue;
      std::vector<double> row = g.to_vector<double>();
      std::copy(row.begin(), row.end(), loop.begin() + i * m);
    }
    std::vector<double> vec = v[j].defined() ? v[j].to_vector<double>() : std::vector<double>(loop.size(), 0.0);
    if (v[j].defined()) {
      tf::Shape want{n};
      for (std::int64_t d : shapes[j]) want.push_back(d);
      EXPECT_EQ(v[j].shape(), want) << "source " << j;
    }
    EXPECT_TRUE(close(vec, loop)) << "source " << j;
  }
}

// Runs the first- and second-order comparison for f at `inputs` (float64 inputs are the sources).
void check_function(const tf::testing::TestFn& f, const std::vector<tf::Tensor>& inputs, bool second_order) {
  std::vector<std::int64_t> ids;
  std::vector<tf::Shape> shapes;
  std::vector<tf::Source> sources;
  for (const tf::Tensor& x : inputs)
    if (x.dtype() == tf::DType::kFloat64) {
      ids.push_back(x.id());
      shapes.push_back(x.shape());
      sources.emplace_back(x);
    }
  {
    SCOPED_TRACE("first order");
    tf::GradientTape tape({.persistent = true});
    for (const tf::Source& x : sources) tape.watch(x.value());
    tf::Tensor y = f(inputs);
    tape.stop();
    expect_vectorized_equals_loop(tape.state(), y, ids, shapes);
  }
  if (!second_order) return;
  SCOPED_TRACE("second order: jacobian of d<f, v>/dx");
  tf::GradientTape outer({.persistent = true});
  for (const tf::Source& x : sources) outer.watch(x.value());
  std::vector<tf::Tensor> flat;
  {
    tf::GradientTape inner;
    for (const tf::Source& x : sources) inner.watch(x.value());
    tf::Tensor y = f(inputs);
    tf::Tensor dot = tf::reduce_sum(y * tf::testing::random_f64(y.shape(), 99));
    for (auto& g : inner.gradient(dot, sources))
      if (g) flat.push_back(tf::reshape(*g, std::vector<std::int64_t>{-1}));
  }
  if (flat.empty()) return;
  tf::Tensor g = tf::concat(flat, 0);
  outer.stop();
  expect_vectorized_equals_loop(outer.state(), g, ids, shapes);
}

// Captures what tapeflow's logger writes while it lives.
struct LogCapture {
  std::ostringstream out;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  LogCapture() { tf::logger()->sinks().push_back(sink); }
  ~LogCapture() {
    auto& sinks = tf::logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }
};

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

// Every gradient-check row of an op with a batching rule: vectorized == loop, first and second order.
TEST(BatchingRules, VectorizedMatchesLoopForEveryOpWithARule) {
  std::set<std::string> checked;
  for (const auto& c : tf::testing::gradcheck_cases()) {
    const tf::OpDef* op = tf::OpRegistry::global().find(c.op);
    if (op && op->loop_only) continue;  // see LoopOnlyOpTakesTheLoop
    SCOPED_TRACE(c.op + ": " + c.name);
    check_function(c.f, c.make_inputs(), c.second_order);
    checked.insert(c.op);
  }
  // Every registered differentiable op that batches was exercised.
  for (const auto& name : tf::OpRegistry::global().names()) {
    const tf::OpDef& op = tf::OpRegistry::global().get(name);
    if (op.gradient && op.batch && name != "ReadVariableOp") {
      EXPECT_TRUE(checked.count(name)) << name;
    }
  }
}

// vmap: every gradient-check row's function run on K = 3 examples at once (each float64 input
// stacked along a new leading axis and marked batched) equals the function run on each example,
// stacked. Every op of the function then goes through its batching rule, so a rule that a backward
// pass never needs (Softmax's, whose gradient is written with other ops) is checked as well: the
// test above cannot see a missing or wrong Softmax rule, this one names it.
TEST(BatchingRules, EveryRowMatchesThePerExampleForward) {
  constexpr std::int64_t kK = 3;
  for (const auto& c : tf::testing::gradcheck_cases()) {
    // A row that takes a gradient inside its function: a GradientTape's own backward pass inside a
    // vectorized pass is not supported (jacobian / hessian never need it: their passes run gradient
    // functions, not tapes), so such rows are covered by the test above only.
    if (c.op == "MaxPoolGradGrad" || c.op == "MaxPoolGradGradWithArgmax") continue;
    SCOPED_TRACE(c.op + ": " + c.name);
    const std::vector<tf::Tensor> base = c.make_inputs();
    std::vector<tf::Tensor> stacked, per_example;
    for (const tf::Tensor& x : base) {
      if (x.dtype() != tf::DType::kFloat64) {
        stacked.push_back(x);  // integer indices, labels: shared by every example
        continue;
      }
      std::vector<tf::Tensor> xs;
      for (std::int64_t k = 0; k < kK; ++k) xs.push_back(x * (1.0 + 0.05 * static_cast<double>(k)));
      stacked.push_back(tf::stack(xs, 0));
    }
    for (std::int64_t k = 0; k < kK; ++k) {
      std::vector<tf::Tensor> in;
      for (std::size_t i = 0; i < base.size(); ++i)
        in.push_back(base[i].dtype() == tf::DType::kFloat64 ? tf::unstack(stacked[i], 0)[static_cast<std::size_t>(k)]
                                                            : base[i]);
      per_example.push_back(c.f(in));  // (registers test ops on first use)
    }
    const tf::OpDef* op = tf::OpRegistry::global().find(c.op);
    if (op && op->loop_only) continue;  // see LoopOnlyOpTakesTheLoop
    const tf::Tensor expected = tf::stack(per_example, 0);
    tf::Tensor y;
    try {
      tf::BatchScope scope(kK);
      for (std::size_t i = 0; i < base.size(); ++i)
        if (base[i].dtype() == tf::DType::kFloat64) scope.mark(stacked[i]);
      y = c.f(stacked);
      if (!scope.carries_batch(y)) y = tf::stack(std::vector<tf::Tensor>(kK, y), 0);  // independent of the inputs
    } catch (const tf::BatchingUnsupported& e) {
      ADD_FAILURE() << "cannot batch: " << e.what();
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "fails on batched inputs: " << e.what();
      continue;
    }
    ASSERT_EQ(y.shape(), expected.shape());
    EXPECT_TRUE(close(y.to_vector<double>(), expected.to_vector<double>()));
  }
}

// The ops issue 11 named, in compositions (softmax classifier, cross-entropies, slicing, gather...).
TEST(BatchingRules, CompositionsOfArrayAndNnOps) {
  using V = std::vector<tf::Tensor>;
  const tf::Tensor a = tf::testing::random_f64({3, 4}, 1), b = tf::testing::random_f64({4, 2}, 2);
  check_function([](const V& in) { return tf::softmax(tf::matmul(in[0], in[1])); }, {a, b}, true);
  check_function([](const V& in) { return tf::log_softmax(in[0], 0); }, {a}, true);
  check_function([](const V& in) { return tf::transpose(in[0]) * 2.0; }, {a}, true);
  check_function([](const V& in) { return tf::concat({in[0], tf::square(in[0])}, 1); }, {a}, true);
  check_function([](const V& in) { return tf::slice(tf::square(in[0]), {1, 1}, {2, -1}); }, {a}, true);
  check_function([](const V& in) { return tf::pad(tf::square(in[0]), {{1, 0}, {0, 2}}); }, {a}, true);
  check_function([](const V& in) { return tf::tile(tf::square(in[0]), {2, 1}); }, {a}, true);
  check_function([](const V& in) { return tf::stack(tf::unstack(tf::square(in[0]), 1), 0); }, {a}, true);
  check_function([](const V& in) { return tf::concat(tf::split(tf::exp(in[0]), 2, 1), 0); }, {a}, true);
  check_function([](const V& in) { return tf::where(tf::greater(in[0], tf::scalar(0.0, tf::DType::kFloat64)), in[0], tf::square(in[0])); }, {a}, true);
  check_function([](const V& in) { return tf::clip_by_value(tf::square(in[0]) * 3.0, 0.1, 0.9); }, {a}, true);
  check_function([](const V& in) { return tf::gather(tf::square(in[0]), tf::constant(std::vector<std::int64_t>{2, 0, 2}, tf::Shape{3}), 1); }, {a}, true);
  check_function([](const V& in) {
    return tf::sparse_softmax_cross_entropy_with_logits(tf::constant(std::vector<std::int64_t>{1, 0, 3}, tf::Shape{3}), in[0] * in[0]);
  }, {a}, true);
  check_function([](const V& in) {
    return tf::sigmoid_cross_entropy_with_logits(tf::testing::random_f64({3, 4}, 3, 0.0, 1.0), in[0] * 2.0);
  }, {a}, true);
  check_function([](const V& in) { return tf::clip_by_norm(tf::square(in[0]), 0.5, {1}); }, {a}, true);
  check_function([](const V& in) { return tf::reduce_sum(tf::expand_dims(in[0], 0), {0, 2}) * tf::reduce_max(in[0]); }, {a}, true);
}

// A custom gradient written with batchable ops batches through them; clip_by_norm inside it clips
// each cotangent on its own, as the loop does.
TEST(BatchingRules, CustomGradientBatchesThroughItsOps) {
  auto f = tf::custom_gradient([](const tf::Tensor& x) {
    tf::Tensor t = tf::tanh(x);
    return std::make_pair(t * 2.0, [t](const tf::Tensor& dy) {
      return tf::clip_by_norm(dy * (1.0 - tf::square(t)) * 2.0, 0.5);
    });
  });
  check_function([&](const std::vector<tf::Tensor>& in) { return f(in[0]) * in[0]; }, {tf::testing::random_f64({3, 4}, 4)},
                 false);
}

// batch_jacobian's vectorized path carries its one-hot seeds as scales through element-wise ops and
// the first matmul; it must equal the loop, in one chunk and in several.
TEST(BatchingRules, BatchJacobianOneHotFormMatchesLoop) {
  tf::Tensor x = tf::testing::random_f64({5, 4}, 11);
  tf::Tensor w1 = tf::testing::random_f64({4, 6}, 12), w2 = tf::testing::random_f64({6, 3}, 13);
  tf::Tensor b1 = tf::testing::random_f64({6}, 14);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor h = tf::elu(tf::matmul(x, w1) + b1);
  tf::Tensor y = tf::tanh(tf::matmul(h * tf::sigmoid(h), w2)) - tf::relu(tf::slice(h, {0, 0}, {5, 3}));
  tf::Tensor loop = *tape.batch_jacobian(y, x, {.parallel_iterations = 1, .experimental_use_pfor = false});
  for (int chunk : {0, 1, 2}) {
    SCOPED_TRACE("parallel_iterations=" + std::to_string(chunk));
    tf::Tensor v = *tape.batch_jacobian(y, x, {.parallel_iterations = chunk, .check_independence = true});
    EXPECT_TRUE(close(v.to_vector<double>(), loop.to_vector<double>()));
  }
}

// The example: a jacobian through a softmax classifier takes the vectorized path (no
// fallback warning) and equals the loop.
TEST(BatchingRules, SoftmaxClassifierJacobianIsVectorized) {
  LogCapture log;
  tf::Tensor x = tf::testing::random_f64({4, 6}, 21);
  tf::Tensor w1 = tf::testing::random_f64({6, 5}, 22), w2 = tf::testing::random_f64({5, 3}, 23);
  tf::Tensor b1 = tf::testing::random_f64({5}, 24), b2 = tf::testing::random_f64({3}, 25);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor y = tf::softmax(tf::matmul(tf::relu(tf::matmul(x, w1) + b1), w2) + b2);
  tf::Tensor v = *tape.jacobian(y, x);
  tf::Tensor loop = *tape.jacobian(y, x, {.parallel_iterations = 1, .experimental_use_pfor = false});
  EXPECT_EQ(v.shape(), (tf::Shape{4, 3, 4, 6}));
  EXPECT_TRUE(close(v.to_vector<double>(), loop.to_vector<double>()));
  EXPECT_EQ(log.out.str(), "");
}

// A differentiable op marked loop_only (registered at start-up, with its gradient-check row, so the
// coverage tests see a complete entry whatever the test order).
const tf::OpDef& loop_only_cube() {
  static const tf::OpDef& op = tf::register_op(
      {"TestLoopOnlyCube",
       [](std::span<const tf::Tensor> in, const tf::Attrs&) { return tf::TensorList{in[0] * in[0] * in[0]}; },
       [](const tf::GradContext& c, std::span<const tf::Tensor> g) {
         return tf::TensorList{g[0] * 3.0 * tf::square(c.input(0))};
       },
       tf::kSaveInputs, {}, /*loop_only=*/true});
  return op;
}
tf::testing::RegisterGradChecks loop_only_rows({
    {"TestLoopOnlyCube", "registered by batching_rules_test",
     [](const std::vector<tf::Tensor>& in) { return tf::execute1(loop_only_cube(), {in[0]}); },
     [] { return std::vector<tf::Tensor>{tf::testing::random_f64({2, 2}, 5)}; }},
});

// An op marked loop_only makes the vectorized paths take the loop, with one warning naming it.
TEST(BatchingRules, LoopOnlyOpTakesTheLoopWithOneWarning) {
  const tf::OpDef& op = loop_only_cube();
  tf::testing::run_gradcheck_cases({"TestLoopOnlyCube"});
  LogCapture log;
  tf::Tensor x = tf::testing::random_f64({3}, 31);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor y = tf::execute1(op, {x}) * x;
  tf::Tensor v = *tape.jacobian(y, x);
  tf::Tensor again = *tape.jacobian(y, x);
  tf::Tensor loop = *tape.jacobian(y, x, {.parallel_iterations = 1, .experimental_use_pfor = false});
  EXPECT_TRUE(close(v.to_vector<double>(), loop.to_vector<double>()));
  EXPECT_TRUE(close(again.to_vector<double>(), loop.to_vector<double>()));
  EXPECT_EQ(count(log.out.str(), "op TestLoopOnlyCube cannot batch"), 1u) << log.out.str();
  const std::int64_t id = x.id();
  const tf::Tensor seeds = tf::ones(tf::Shape{3, 3}, tf::DType::kFloat64);
  // The direct batched pass does not fall back: it says which op cannot batch... through its gradient
  // ops, which do batch; loop_only is a property the jacobian paths check before the pass.
  EXPECT_NO_THROW(tape.state().backward(std::span<const tf::Tensor>(&y, 1), std::span<const tf::Tensor>(&seeds, 1),
                                        std::span<const std::int64_t>(&id, 1), {.batch = 3}));
}

// An op without a batching rule executed on batched values (here inside a custom gradient) raises
// BatchingUnsupported in the batched pass; jacobian falls back to the loop with one warning naming it.
TEST(BatchingRules, OpWithoutRuleFallsBackWithAWarning) {
  static const tf::OpDef& op = tf::register_op(
      {"TestNoBatchRuleDouble",
       [](std::span<const tf::Tensor> in, const tf::Attrs&) { return tf::TensorList{in[0] * 2.0}; }, {}});
  auto f = tf::custom_gradient([](const tf::Tensor& x) {
    return std::make_pair(x * 2.0, [](const tf::Tensor& dy) { return tf::execute1(op, {dy}); });
  });
  tf::Tensor x = tf::testing::random_f64({3}, 41);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor y = f(x) * x;
  const std::int64_t id = x.id();
  const tf::Tensor seeds = tf::ones(tf::Shape{3, 3}, tf::DType::kFloat64);
  EXPECT_THAT([&] {
    tape.state().backward(std::span<const tf::Tensor>(&y, 1), std::span<const tf::Tensor>(&seeds, 1),
                          std::span<const std::int64_t>(&id, 1), {.batch = 3});
  }, ::testing::ThrowsMessage<tf::BatchingUnsupported>(HasSubstr("op 'TestNoBatchRuleDouble' has no batching rule")));
  LogCapture log;
  tf::Tensor v = *tape.jacobian(y, x);
  tf::Tensor loop = *tape.jacobian(y, x, {.parallel_iterations = 1, .experimental_use_pfor = false});
  EXPECT_TRUE(close(v.to_vector<double>(), loop.to_vector<double>()));
  EXPECT_EQ(count(log.out.str(), "op TestNoBatchRuleDouble cannot batch"), 1u) << log.out.str();
}

// Batching errors name the op: a rule returning an output without K, and a gradient returning a
// wrongly shaped batched gradient.
TEST(BatchingRules, RuleWithoutLeadingDimensionIsAnError) {
  static const tf::OpDef& op = tf::register_op(
      {"TestBadBatchRule", [](std::span<const tf::Tensor> in, const tf::Attrs&) { return tf::TensorList{in[0].alias()}; },
       {}, tf::kSaveNone,
       [](std::span<const tf::Tensor> in, const tf::BatchContext&) { return tf::TensorList{tf::reduce_sum(in[0], 0)}; }});
  tf::BatchScope scope(2);
  tf::Tensor x = tf::ones(tf::Shape{2, 3});
  scope.mark(x);
  EXPECT_THAT([&] { tf::execute1(op, {x}); },
              ::testing::ThrowsMessage<std::logic_error>(HasSubstr("batching rule of TestBadBatchRule returned output 0 of shape [3]")));
  EXPECT_THAT([&] { scope.mark(tf::ones(tf::Shape{3})); },
              ::testing::ThrowsMessage<std::logic_error>(HasSubstr("leading dimension 2, got shape [3]")));
}
