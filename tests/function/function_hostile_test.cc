// Hostile traced functions (as a damaged or crafted checkpoint delivers them): attributes whose
// shapes overflow, and functions that call themselves. Each must give an exception naming the
// function or op and the values, never a crash, a 0-byte tensor of a huge shape, or a stack overflow.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tape/function/function.h"
#include "tape/tapeflow.h"

namespace tf = tapeflow;

namespace {

using ::testing::HasSubstr;

// `g` serialised, with the first occurrence of `from` in its program replaced by `to`.
tf::SerializedFunction patched(const tf::FunctionGraph& g, const std::string& from, const std::string& to) {
  tf::SerializedFunction s = g.serialize();
  const auto pos = s.program.find(from);
  EXPECT_NE(pos, std::string::npos) << "'" << from << "' not in " << s.program;
  if (pos != std::string::npos) s.program.replace(pos, from.size(), to);
  return s;
}

// Calls `g` on `inputs` and expects std::invalid_argument whose message has every part.
void expect_call_error(const tf::FunctionGraph& g, const std::vector<tf::Tensor>& inputs,
                       const std::vector<std::string>& parts) {
  try {
    auto out = g.call(inputs);
    ADD_FAILURE() << "no error; got shape " << out[0].shape().to_string() << " of " << out[0].nbytes() << " bytes";
  } catch (const std::invalid_argument& e) {
    for (const std::string& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}

const std::string k2p32 = "4294967296";

// register_functions(graphs) must throw std::invalid_argument containing `part`.
void expect_refused(std::vector<tf::FunctionGraph> graphs, const std::string& part) {
  try {
    tf::register_functions(std::move(graphs));
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

TEST(FunctionHostile, PadAttributeOverflowingTheElementCount) {
  const tf::FunctionGraph g = tf::trace(
      "pad", [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{tf::pad(x[0], {{1, 1}, {1, 1}})}; },
      {tf::zeros(tf::Shape{1, 1})});
  // paddings [1, 1, 1, 1] -> [0, 2^32 - 1, 0, 2^32 - 1]: a [2^32, 2^32] float32 tensor.
  const tf::FunctionGraph bad = tf::FunctionGraph::deserialize("pad", patched(g, "v 4 1 1 1 1", "v 4 0 4294967295 0 4294967295"));
  expect_call_error(bad, {tf::zeros(tf::Shape{1, 1})}, {"Pad", "[4294967296, 4294967296]", "overflows"});
}

TEST(FunctionHostile, BroadcastToAndReshapeShapesNear2To32) {
  const tf::FunctionGraph b = tf::trace(
      "bcast", [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{tf::broadcast_to(x[0], tf::Shape{2, 3})}; },
      {tf::zeros(tf::Shape{1, 1})});
  const tf::FunctionGraph bad_b = tf::FunctionGraph::deserialize("bcast", patched(b, "v 2 2 3", "v 2 " + k2p32 + " " + k2p32));
  expect_call_error(bad_b, {tf::zeros(tf::Shape{1, 1})}, {"BroadcastTo", "overflows"});

  // Reshaping an empty tensor to [2^32, 2^32]: 2^64 wraps to 0 elements unless checked.
  const tf::FunctionGraph r = tf::trace(
      "reshape", [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{tf::reshape(x[0], tf::Shape{0, 3})}; },
      {tf::zeros(tf::Shape{0})});
  const tf::FunctionGraph bad_r = tf::FunctionGraph::deserialize("reshape", patched(r, "v 2 0 3", "v 2 " + k2p32 + " " + k2p32));
  expect_call_error(bad_r, {tf::zeros(tf::Shape{0})}, {"Reshape", "[4294967296, 4294967296]", "overflows"});
}

TEST(FunctionHostile, InputSpecsWhoseBytesOverflowAreRefused) {
  const tf::FunctionGraph g = tf::trace(
      "spec", [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{tf::exp(x[0])}; },
      {tf::zeros(tf::Shape{2, 2, 2, 2})});
  // Four dims of 2^31 - 1: 2^124 elements.
  const std::string dims = "2147483647 2147483647 2147483647 2147483647";
  try {
    tf::FunctionGraph::deserialize("spec", patched(g, "float32 4 2 2 2 2", "float32 4 " + dims));
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("function 'spec'"));
    EXPECT_THAT(e.what(), HasSubstr("overflows"));
  }
}

// A restored function that calls itself would recurse until the stack overflows: refused, and the
// registered function keeps working.
TEST(FunctionHostile, FunctionsThatCallThemselvesAreRefused) {
  tf::register_function(tf::trace(
      "selfish", [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{x[0] * 2.0}; }, {tf::Tensor(1.0f)}));
  // A graph named "selfish" whose body calls Function:selfish.
  tf::FunctionGraph loop = tf::trace(
      "selfish", [](const std::vector<tf::Tensor>& x) { return tf::call_function("selfish", {x[0] + 1.0}); },
      {tf::Tensor(1.0f)});
  tf::FunctionGraph loop_back = tf::FunctionGraph::deserialize("selfish", loop.serialize());
  std::vector<tf::FunctionGraph> one;
  one.push_back(std::move(loop_back));
  expect_refused(std::move(one), "'selfish' would call itself (selfish -> selfish)");
  EXPECT_EQ(tf::call_function("selfish", {tf::Tensor(3.0f)})[0].item(), 6.0);

  // Through another function: ping -> pong -> ping, all given at once or one after the other.
  tf::register_function(tf::trace(
      "ping", [](const std::vector<tf::Tensor>& x) { return std::vector<tf::Tensor>{x[0] - 1.0}; }, {tf::Tensor(1.0f)}));
  tf::register_function(tf::trace(
      "pong", [](const std::vector<tf::Tensor>& x) { return tf::call_function("ping", x); }, {tf::Tensor(1.0f)}));
  tf::FunctionGraph ping2 = tf::trace(
      "ping", [](const std::vector<tf::Tensor>& x) { return tf::call_function("pong", x); }, {tf::Tensor(1.0f)});
  std::vector<tf::FunctionGraph> batch;
  batch.push_back(ping2);
  expect_refused(std::move(batch), "ping -> pong -> ping");
  EXPECT_EQ(tf::call_function("pong", {tf::Tensor(3.0f)})[0].item(), 2.0);
  std::vector<tf::FunctionGraph> twice;
  twice.push_back(ping2);
  twice.push_back(ping2);
  EXPECT_THROW(tf::register_functions(std::move(twice)), std::invalid_argument);
}

}  // namespace
