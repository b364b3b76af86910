// Every registered differentiable op must have at least one float64 gradient-check row, and must
// say how it batches (a batching rule, or an explicit loop-only mark).
#include <gtest/gtest.h>

#include <set>

#include "tape/runtime/op_registry.h"
#include "tests/testing/gradcheck_table.h"

namespace {

TEST(GradCheckCoverage, EveryDifferentiableOpHasACase) {
  std::set<std::string> covered;
  for (const auto& c : tapeflow::testing::gradcheck_cases()) covered.insert(c.op);
  // Ops whose gradient is structural rather than numeric (checked by dedicated tests).
  const std::set<std::string> exempt = {"ReadVariableOp", "CustomGradient"};
  auto& registry = tapeflow::OpRegistry::global();
  for (const auto& name : registry.names()) {
    if (!registry.get(name).gradient || exempt.count(name)) continue;
    EXPECT_TRUE(covered.count(name)) << "op '" << name << "' has a gradient but no gradcheck row";
  }
}

// One op, one place: a differentiable op declares its batching behaviour in its registration entry
// (OpDef::batch or OpDef::loop_only), so vectorized jacobians and hessians never fall back silently.
TEST(GradCheckCoverage, EveryDifferentiableOpBatchesOrIsLoopOnly) {
  auto& registry = tapeflow::OpRegistry::global();
  for (const auto& name : registry.names()) {
    const tapeflow::OpDef& op = registry.get(name);
    if (!op.gradient) continue;
    EXPECT_TRUE(op.batch || op.loop_only)
        << "op '" << name << "' has a gradient but neither a batching rule (OpDef::batch) nor OpDef::loop_only";
    EXPECT_FALSE(op.batch && op.loop_only) << "op '" << name << "' has a batching rule and is marked loop_only";
  }
}

}  // namespace
