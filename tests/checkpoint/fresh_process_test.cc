// The seed's "custom gradients in SavedModel" example across processes: a function traced with its
// custom gradient is saved in a checkpoint; a separate executable (tests/checkpoint_child) loads it
// in a fresh process and differentiates through it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "models/checkpoint.h"
#include "tape/tapeflow.h"
#include "tests/models_io/io_test_util.h"

namespace tapeflow::models {
namespace {

using io::testing::ScratchDir;

struct ChildResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

ChildResult run_child(const std::string& checkpoint, const std::string& function) {
  const std::string cmd = std::string(TAPEFLOW_BINARY_DIR) + "/tests/checkpoint_child '" + checkpoint + "' '" + function + "' 2>&1";
  ChildResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 256> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) r.output += buf.data();
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Identity forward, gradient clipped to norm 0.5 (the guide's clip_gradients).
std::pair<std::vector<Tensor>, CustomGradFn> clip_gradients(const std::vector<Tensor>& y) {
  return {{y[0]}, [](const std::vector<Tensor>& dy) { return std::vector<Tensor>{clip_by_norm(dy[0], 0.5)}; }};
}

class FreshProcess : public ScratchDir {};

TEST_F(FreshProcess, SavedCustomGradientGivesTwo) {
  Checkpoint c;
  c.add_function(trace_custom_gradient("clip_gradients", clip_gradients, {Tensor(1.0f)}));
  c.write(file("fn.h5"));
  ChildResult r = run_child(file("fn.h5"), "clip_gradients");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, testing::HasSubstr("gradient 2\n"));  // 4 clipped to 2, as in the guide
  EXPECT_THAT(r.output, testing::Not(testing::HasSubstr("no saved gradient")));
}

TEST_F(FreshProcess, WithoutSavedGradientFallsBackAndSaysSoOnce) {
  Checkpoint c;
  // The same forward traced without its gradient: plain differentiation of the identity, 2v = 4.
  c.add_function(trace("clip_forward_only", [](const std::vector<Tensor>& x) { return clip_gradients(x).first; },
                       {Tensor(1.0f)}));
  c.add_function(trace("cube", [](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0] * x[0] * x[0]}; },
                       {Tensor(1.0f)}));
  c.write(file("plain.h5"));
  ChildResult r = run_child(file("plain.h5"), "clip_forward_only");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, testing::HasSubstr("gradient 4\n"));
  EXPECT_THAT(r.output, testing::HasSubstr("function 'clip_forward_only': no saved gradient"));
  r = run_child(file("plain.h5"), "cube");  // (v^2)^3 = v^6 -> 6 v^5 = 192
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, testing::HasSubstr("gradient 192\n"));
}

TEST_F(FreshProcess, UnknownOpIsReportedAtLoadWithItsName) {
  Checkpoint c;
  FunctionGraph g = trace_custom_gradient("clip_gradients", clip_gradients, {Tensor(1.0f)});
  for (FunctionNode& n : g.nodes)
    if (n.kind == FunctionNode::Kind::kOp) n.op = "OpFromTheFuture";
  c.add_function(g);
  c.write(file("future.h5"));
  ChildResult r = run_child(file("future.h5"), "clip_gradients");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, testing::HasSubstr(file("future.h5")));
  EXPECT_THAT(r.output, testing::HasSubstr("unknown op 'OpFromTheFuture'"));
}

}  // namespace
}  // namespace tapeflow::models
