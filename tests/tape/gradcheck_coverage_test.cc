// Every registered differentiable op must have at least one float64 gradient-check row.
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

}  // namespace
