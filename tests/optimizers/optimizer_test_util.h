// Test helpers: run an optimizer on one float64 (or float32) variable for several steps with
// state-dependent gradients, next to a reference written in double in the test.
#pragma once

#include <functional>
#include <vector>

#include "optimizers/optimizer.h"
#include "tape/runtime/variable.h"

namespace tapeflow::testing {

using Vec = std::vector<double>;
// The gradient at a step from the current weights (deterministic; depends on the state).
inline Vec test_grad(const Vec& w, int step) {
  Vec g(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) g[i] = 0.5 * w[i] - 0.3 * double(i) + 0.1 * step + (i % 2 ? 0.7 : -0.4);
  return g;
}

// Runs `steps` updates of `opt` from w0 in `dtype`; returns the weights after each step.
inline std::vector<Vec> run_optimizer(optimizers::Optimizer& opt, const Vec& w0, int steps,
                                      DType dtype = DType::kFloat64) {
  Variable v(constant(w0, Shape{std::int64_t(w0.size())}, dtype), {.name = "w:0"});
  std::vector<Vec> out;
  for (int s = 0; s < steps; ++s) {
    Vec g = test_grad(v.value().to_vector<double>(), s);
    opt.apply_gradients(std::vector<std::optional<Tensor>>{constant(g, v.shape(), dtype)}, {v});
    out.push_back(v.value().to_vector<double>());
  }
  return out;
}

// Runs the reference: step(w, g, t) updates w in place (t = 1, 2, ...).
inline std::vector<Vec> run_reference(const Vec& w0, int steps, const std::function<void(Vec&, const Vec&, int)>& step) {
  Vec w = w0;
  std::vector<Vec> out;
  for (int s = 0; s < steps; ++s) {
    Vec g = test_grad(w, s);
    step(w, g, s + 1);
    out.push_back(w);
  }
  return out;
}

}  // namespace tapeflow::testing
