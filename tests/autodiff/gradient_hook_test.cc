// GradientOptions::on_gradient_final: called during the reverse sweep as soon as a source's gradient
// is final, in the order gradients become final, with the value gradient() returns (the hook
// distributed training uses to start an all-reduce while backward goes on).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tape/autodiff/custom_gradient.h"
#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;

namespace {

struct Event {
  std::string what;
  std::size_t source = 0;
  tf::Tensor value;
};

// A three-layer chain x -> (w1, b1) -> (w2, b2) -> (w3) -> loss. A custom-gradient marker between
// layers 1 and 2 logs when the sweep reaches it: the last layer's gradients must be reported
// before that, the first layer's after it.
TEST(GradientHook, FiresAsEachSourceBecomesFinalInAChainOfLayers) {
  std::vector<Event> events;
  auto marker = tf::custom_gradient([&events](const tf::Tensor& h) {
    return std::make_pair(h, [&events](const tf::Tensor& dy) {
      events.push_back({"sweep reached layer 1", 0, {}});
      return dy;
    });
  });
  tf::Tensor x = tf::testing::random_f64({4, 3}, 1);
  tf::Variable w1(tf::testing::random_f64({3, 5}, 2), {.name = "w1"});
  tf::Variable b1(tf::testing::random_f64({5}, 3), {.name = "b1"});
  tf::Variable w2(tf::testing::random_f64({5, 4}, 4), {.name = "w2"});
  tf::Variable b2(tf::testing::random_f64({4}, 5), {.name = "b2"});
  tf::Variable w3(tf::testing::random_f64({4, 2}, 6), {.name = "w3"});
  tf::Variable unused(tf::testing::random_f64({2}, 7), {.name = "unused"});
  tf::GradientTape tape;
  tf::Tensor h1 = marker(tf::tanh(tf::matmul(x, w1.read()) + b1.read()));
  tf::Tensor h2 = tf::relu(tf::matmul(h1, w2.read()) + b2.read());
  tf::Tensor loss = tf::reduce_mean(tf::square(tf::matmul(h2, w3.read())));
  tf::GradientOptions options;
  options.on_gradient_final = [&events](std::size_t i, const tf::Tensor& g) {
    events.push_back({"final", i, g});
  };
  const std::vector<tf::Variable> vars{w1, b1, w2, b2, w3, unused};
  auto grads = tape.gradient(loss, vars, options);
  ASSERT_EQ(events.size(), 7u);
  std::vector<std::string> order;
  for (const Event& e : events) order.push_back(e.what == "final" ? vars[e.source].name() : e.what);
  // w3 first (the last matmul), then layer 2, then the marker, then layer 1; the unconnected source
  // at the end with an undefined tensor.
  EXPECT_EQ(order[0], "w3");
  EXPECT_THAT(std::vector<std::string>(order.begin() + 1, order.begin() + 3), ::testing::UnorderedElementsAre("w2", "b2"));
  EXPECT_EQ(order[3], "sweep reached layer 1");
  EXPECT_THAT(std::vector<std::string>(order.begin() + 4, order.begin() + 6), ::testing::UnorderedElementsAre("w1", "b1"));
  EXPECT_EQ(order[6], "unused");
  EXPECT_FALSE(events[6].value.defined());
  EXPECT_FALSE(grads[5].has_value());
  for (const Event& e : events) {
    if (e.what != "final" || e.source == 5) continue;
    ASSERT_TRUE(grads[e.source].has_value());
    EXPECT_TRUE(e.value.is_same(*grads[e.source])) << vars[e.source].name() << ": the hook's value is the returned one";
  }
}

// kZero: unconnected sources are reported at the end with the zeros gradient() returns; a source
// that is a target gets its value right after seeding; non-floating sources are not reported.
TEST(GradientHook, UnconnectedZerosSeededSourcesAndIntegers) {
  tf::Tensor x = tf::testing::random_f64({3}, 8), z = tf::testing::random_f64({2}, 9);
  tf::Tensor n = tf::constant(std::vector<std::int32_t>{1, 2}, tf::Shape{2});
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tape.watch(z);
  tf::Tensor y = tf::exp(x);
  std::vector<std::pair<std::size_t, tf::Tensor>> seen;
  tf::GradientOptions options;
  options.unconnected_gradients = tf::UnconnectedGradients::kZero;
  options.on_gradient_final = [&seen](std::size_t i, const tf::Tensor& g) { seen.emplace_back(i, g); };
  auto grads = tape.gradient(y, {tf::Source(y), tf::Source(x), tf::Source(z), tf::Source(n)}, options);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].first, 0u);  // y: final once seeded
  EXPECT_EQ(seen[1].first, 1u);
  EXPECT_EQ(seen[2].first, 2u);  // z: unconnected, at the end
  for (auto& [i, g] : seen) EXPECT_TRUE(g.is_same(*grads[i])) << i;
  EXPECT_EQ(seen[2].second.to_vector<double>(), (std::vector<double>{0.0, 0.0}));
}

// An exception thrown by the hook leaves gradient().
TEST(GradientHook, ExceptionPropagates) {
  tf::Tensor x = tf::testing::random_f64({3}, 10);
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = tf::reduce_sum(tf::square(x));
  tf::GradientOptions options;
  options.on_gradient_final = [](std::size_t, const tf::Tensor&) { throw std::runtime_error("allreduce failed"); };
  EXPECT_THAT([&] { tape.gradient(y, x, options); },
              ::testing::ThrowsMessage<std::runtime_error>(::testing::HasSubstr("allreduce failed")));
}

}  // namespace
