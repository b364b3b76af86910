// A registry of gradient-check cases: each op family's test file adds rows; the coverage test
// fails if a registered differentiable op has no row.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/testing/gradient_check.h"

namespace tapeflow::testing {

struct GradCheckCase {
  std::string op;    // registered op name this case exercises ("Mul")
  std::string name;  // what is special about it ("broadcast [2,3] * [3]")
  TestFn f;
  std::function<std::vector<Tensor>()> make_inputs;  // float64 inputs (others pass through)
  bool second_order = true;
  GradCheckOptions options = {};
};

std::vector<GradCheckCase>& gradcheck_cases();

// Adds rows at static-initialisation time: `static RegisterGradChecks rows({...});`
struct RegisterGradChecks {
  explicit RegisterGradChecks(std::vector<GradCheckCase> cases);
};

// A case's make_inputs: one float64 tensor per shape, uniform in [lo, hi), seeded first_seed,
// first_seed + 1, ... in order (each family's table picks its own first seed).
std::function<std::vector<Tensor>()> random_inputs(std::vector<Shape> shapes, std::uint64_t first_seed,
                                                   double lo = -1.0, double hi = 1.0);

// Runs every case whose op name is in `ops` (all cases if empty) and reports failures.
void run_gradcheck_cases(const std::vector<std::string>& ops);

}  // namespace tapeflow::testing
