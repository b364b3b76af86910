// Hostile traced functions (as a damaged or crafted checkpoint delivers them): attributes whose
// shapes overflow, and functions that call themselves. Each must give an exception naming the
// function or op and the values, never a crash, a 0-byte tensor of a huge shape, or a stack overflow.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
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

// The program of `g` after `edit` changed the attributes of its first node running `op` (a crafted
// file delivers such a program).
tf::SerializedFunction edited(tf::FunctionGraph g, const std::string& op, const std::function<void(tf::Attrs&)>& edit) {
  for (tf::FunctionNode& n : g.nodes)
    if (n.kind == tf::FunctionNode::Kind::kOp && n.op == op) {
      edit(n.attrs);
      return g.serialize();
    }
  ADD_FAILURE() << "no " << op << " node";
  return g.serialize();
}

// FunctionGraph::deserialize must throw std::runtime_error whose message has every part.
void expect_load_error(const std::string& name, const tf::SerializedFunction& s, const std::vector<std::string>& parts) {
  try {
    tf::FunctionGraph::deserialize(name, s);
    ADD_FAILURE() << "no error loading " << s.program;
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("function '" + name + "': node "));
    for (const std::string& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}

tf::FunctionGraph trace1(const std::string& name, const std::function<tf::Tensor(const tf::Tensor&)>& f, const tf::Tensor& x) {
  return tf::trace(name, [f](const std::vector<tf::Tensor>& in) { return std::vector<tf::Tensor>{f(in[0])}; }, {x});
}

using Ints = std::vector<std::int64_t>;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// Before, these programs loaded and then gave a [2^32, 2^32] tensor backed by 0 bytes (or an error
// only when called); now the load fails naming node, op, attribute and value.
TEST(FunctionHostile, PadAttributeOverflowingTheElementCount) {
  const tf::FunctionGraph g = trace1("pad", [](const tf::Tensor& x) { return tf::pad(x, {{1, 1}, {1, 1}}); },
                                     tf::zeros(tf::Shape{1, 1}));
  // paddings [1, 1, 1, 1] -> [0, 2^32 - 1, 0, 2^32 - 1]: even a [0, 0] input pads to 2^64 - 2^33 + 1 elements.
  expect_load_error("pad", patched(g, "v 4 1 1 1 1", "v 4 0 4294967295 0 4294967295"),
                    {"Pad: attribute 'paddings' = [0, 4294967295, 0, 4294967295]", "overflows int64"});
  // The same sizes through the public function: the checked shape arithmetic names the op and shape.
  EXPECT_THAT([] { tf::pad(tf::zeros(tf::Shape{1, 1}), {{0, 4294967295}, {0, 4294967295}}); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("Pad: Shape [4294967296, 4294967296]")));
  // before + after + the input's size beyond int64 (signed overflow before).
  EXPECT_THAT([] { tf::pad(tf::zeros(tf::Shape{1}), {{kMax, 0}}); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("overflow int64 on axis 0")));
  expect_load_error("pad", edited(g, "Pad", [](tf::Attrs& a) { a.set("paddings", Ints{kMax, 1, 0, 0}); }),
                    {"Pad: attribute 'paddings'", "before + after overflows int64"});
}

TEST(FunctionHostile, BroadcastToAndReshapeShapesNear2To32) {
  const tf::FunctionGraph b = trace1("bcast", [](const tf::Tensor& x) { return tf::broadcast_to(x, tf::Shape{2, 3}); },
                                     tf::zeros(tf::Shape{1, 1}));
  expect_load_error("bcast", patched(b, "v 2 2 3", "v 2 " + k2p32 + " " + k2p32),
                    {"BroadcastTo: attribute 'shape' = [4294967296, 4294967296]", "overflows"});
  expect_load_error("bcast", patched(b, "v 2 2 3", "v 2 2 -3"), {"BroadcastTo: attribute 'shape' = [2, -3]", "negative"});

  // Reshaping an empty tensor to [2^32, 2^32]: 2^64 wraps to 0 elements unless checked.
  const tf::FunctionGraph r = trace1("reshape", [](const tf::Tensor& x) { return tf::reshape(x, tf::Shape{0, 3}); },
                                     tf::zeros(tf::Shape{0}));
  expect_load_error("reshape", patched(r, "v 2 0 3", "v 2 " + k2p32 + " " + k2p32),
                    {"Reshape: attribute 'shape' = [4294967296, 4294967296]", "overflows"});
  expect_load_error("reshape", patched(r, "v 2 0 3", "v 2 0 -1"), {"Reshape: attribute 'shape' = [0, -1]", "negative"});
  // Through the public functions the same shapes fail when called, naming the op and the shape.
  EXPECT_THAT([] { tf::broadcast_to(tf::zeros(tf::Shape{1, 1}), tf::Shape{4294967296, 4294967296}); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("overflows")));
  EXPECT_THAT([] { tf::reshape(tf::zeros(tf::Shape{0}), tf::Shape{4294967296, 4294967296}); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("Reshape: Shape [4294967296, 4294967296]")));
}

// Every op with attributes checks their values at load (OpDef::check_attrs): these programs used to
// load, and then read out of bounds (strides [], ksize [2]), shift by 40 bits (axes [40]), truncate
// an axis of 2^32 to 0 (a wrong value), or fail only when first called.
TEST(FunctionHostile, AttributeValuesAreCheckedAtLoad) {
  const tf::Tensor m = tf::zeros(tf::Shape{2, 3});
  const tf::FunctionGraph t = trace1("t", [](const tf::Tensor& x) { return tf::transpose(x); }, m);
  expect_load_error("t", edited(t, "Transpose", [](tf::Attrs& a) { a.set("perm", Ints{0, 0}); }),
                    {"Transpose: attribute 'perm' = [0, 0]", "not a permutation"});
  const tf::FunctionGraph sum = trace1("sum", [](const tf::Tensor& x) { return tf::reduce_sum(x, 1); }, m);
  expect_load_error("sum", edited(sum, "Sum", [](tf::Attrs& a) { a.set("axes", Ints{40}); }),
                    {"Sum: attribute 'axes' = [40]"});
  expect_load_error("sum", edited(sum, "Sum", [](tf::Attrs& a) { a = tf::Attrs().set("axes", Ints{1}); }),
                    {"Sum: attribute 'keepdims' is missing"});
  const tf::FunctionGraph sm = trace1("sm", [](const tf::Tensor& x) { return tf::softmax(x); }, m);
  expect_load_error("sm", edited(sm, "Softmax", [](tf::Attrs& a) { a.set("axis", std::int64_t{1} << 32); }),
                    {"Softmax: attribute 'axis' = 4294967296"});
  expect_load_error("sm", edited(sm, "Softmax", [](tf::Attrs& a) { a.set("axis", 1.0); }),
                    {"Softmax: attribute 'axis' has another type"});
  const tf::FunctionGraph cat = trace1("cat", [](const tf::Tensor& x) { return tf::concat({x, x}, 1); }, m);
  expect_load_error("cat", edited(cat, "ConcatV2", [](tf::Attrs& a) { a.set("axis", std::int64_t{-9}); }),
                    {"ConcatV2: attribute 'axis' = -9"});
  const tf::FunctionGraph sl = trace1("sl", [](const tf::Tensor& x) { return tf::slice(x, {0, 1}, {2, -1}); }, m);
  expect_load_error("sl", edited(sl, "Slice", [](tf::Attrs& a) { a.set("begin", Ints{0, -1}); }),
                    {"Slice: attribute 'begin' = [0, -1]"});
  expect_load_error("sl", edited(sl, "Slice", [](tf::Attrs& a) { a.set("size", Ints{2}); }),
                    {"Slice: attribute 'size' = [2]"});
  const tf::FunctionGraph pd = trace1("pd", [](const tf::Tensor& x) { return tf::pad(x, {{1, 0}, {0, 1}}); }, m);
  expect_load_error("pd", edited(pd, "Pad", [](tf::Attrs& a) { a.set("paddings", Ints{1, 0, 0}); }),
                    {"Pad: attribute 'paddings' = [1, 0, 0]", "pair"});
  expect_load_error("pd", edited(pd, "Pad", [](tf::Attrs& a) { a.set("paddings", Ints{1, 0, -2, 1}); }),
                    {"Pad: attribute 'paddings' = [1, 0, -2, 1]"});

  const tf::Tensor img = tf::zeros(tf::Shape{1, 4, 4, 1});
  const tf::FunctionGraph cv = trace1("cv", [](const tf::Tensor& x) { return tf::conv2d(x, tf::ones(tf::Shape{2, 2, 1, 1})); }, img);
  expect_load_error("cv", edited(cv, "Conv2D", [](tf::Attrs& a) { a.set("strides", Ints{}); }),
                    {"Conv2D: attribute 'strides' = []", "needs 2 entries"});
  expect_load_error("cv", edited(cv, "Conv2D", [](tf::Attrs& a) { a.set("dilations", Ints{1, 0}); }),
                    {"Conv2D: attribute 'dilations' = [1, 0]"});
  expect_load_error("cv", edited(cv, "Conv2D", [](tf::Attrs& a) { a.set("padding", std::string("same")); }),
                    {"Conv2D: attribute 'padding' = \"same\""});
  const tf::FunctionGraph mp = trace1("mp", [](const tf::Tensor& x) { return tf::max_pool2d(x, {2, 2}, {2, 2}); }, img);
  expect_load_error("mp", edited(mp, "MaxPool", [](tf::Attrs& a) { a.set("ksize", Ints{2}); }),
                    {"MaxPool: attribute 'ksize' = [2]"});
  const tf::FunctionGraph oh = trace1("oh", [](const tf::Tensor& x) { return tf::one_hot(x, 3); },
                                      tf::constant<std::int64_t>({0, 2}, tf::Shape{2}));
  expect_load_error("oh", edited(oh, "OneHot", [](tf::Attrs& a) { a.set("depth", std::int64_t{-1}); }),
                    {"OneHot: attribute 'depth' = -1"});

  // The unedited programs still load and run.
  EXPECT_EQ(tf::FunctionGraph::deserialize("cv", cv.serialize()).call({img})[0].shape(), (tf::Shape{1, 3, 3, 1}));
  EXPECT_EQ(tf::FunctionGraph::deserialize("sum", sum.serialize()).call({m})[0].shape(), (tf::Shape{2}));
}

// A graph edited in memory (FunctionGraph's members are public) is not checked at load: its call
// fails naming the op instead of reading out of bounds or computing along another axis.
TEST(FunctionHostile, EditedAttributesFailWhenCalled) {
  const tf::Tensor m = tf::zeros(tf::Shape{2, 3});
  auto edit = [](tf::FunctionGraph g, const std::string& op, const std::function<void(tf::Attrs&)>& f) {
    for (tf::FunctionNode& n : g.nodes)
      if (n.kind == tf::FunctionNode::Kind::kOp && n.op == op) f(n.attrs);
    return g;
  };
  expect_call_error(edit(trace1("sm", [](const tf::Tensor& x) { return tf::softmax(x); }, m), "Softmax",
                         [](tf::Attrs& a) { a.set("axis", std::int64_t{1} << 32); }),
                    {m}, {"softmax: axis 4294967296 out of range"});
  expect_call_error(edit(trace1("sum", [](const tf::Tensor& x) { return tf::reduce_sum(x, 1); }, m), "Sum",
                         [](tf::Attrs& a) { a.set("axes", Ints{5}); }),
                    {m}, {"reduce_sum: axes [5] out of range for shape [2, 3]"});
  const tf::Tensor img = tf::zeros(tf::Shape{1, 4, 4, 1});
  expect_call_error(edit(trace1("cv", [](const tf::Tensor& x) { return tf::conv2d(x, tf::ones(tf::Shape{2, 2, 1, 1})); }, img),
                         "Conv2D", [](tf::Attrs& a) { a.set("strides", Ints{}); }),
                    {img}, {"conv2d: strides [] and dilations [1, 1] need 2 entries"});
  expect_call_error(edit(trace1("mp", [](const tf::Tensor& x) { return tf::max_pool2d(x, {2, 2}, {2, 2}); }, img),
                         "MaxPool", [](tf::Attrs& a) { a.set("ksize", Ints{2}); }),
                    {img}, {"max_pool2d: ksize [2] needs 2 entries"});
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
