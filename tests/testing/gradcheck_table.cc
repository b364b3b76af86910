#include "tests/testing/gradcheck_table.h"

#include <algorithm>

namespace tapeflow::testing {

std::vector<GradCheckCase>& gradcheck_cases() {
  static std::vector<GradCheckCase> cases;
  return cases;
}

RegisterGradChecks::RegisterGradChecks(std::vector<GradCheckCase> cases) {
  for (auto& c : cases) gradcheck_cases().push_back(std::move(c));
}

void run_gradcheck_cases(const std::vector<std::string>& ops) {
  for (const auto& c : gradcheck_cases()) {
    if (!ops.empty() && std::find(ops.begin(), ops.end(), c.op) == ops.end()) continue;
    SCOPED_TRACE(c.op + ": " + c.name);
    auto inputs = c.make_inputs();
    EXPECT_TRUE(gradcheck(c.f, inputs, c.options));
    if (c.second_order) {
      EXPECT_TRUE(gradgradcheck(c.f, inputs, c.options));
    }
  }
}

std::function<std::vector<Tensor>()> random_inputs(std::vector<Shape> shapes, std::uint64_t first_seed, double lo,
                                                   double hi) {
  return [shapes = std::move(shapes), first_seed, lo, hi] {
    std::vector<Tensor> out;
    std::uint64_t seed = first_seed;
    for (const auto& s : shapes) out.push_back(random_f64(s, seed++, lo, hi));
    return out;
  };
}

}  // namespace tapeflow::testing
