// Float64 finite-difference checks of first- and second-order gradients (PyTorch gradcheck /
// gradgradcheck's bar: eps 1e-6, atol 1e-5, rtol 1e-3).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow::testing {

using TestFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;

struct GradCheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

// Compares the tape's Jacobian of f (every output element w.r.t. every float64 input element)
// with central finite differences. Non-float64 inputs are passed through unchanged.
::testing::AssertionResult gradcheck(const TestFn& f, const std::vector<Tensor>& inputs,
                                     const GradCheckOptions& options = {});

// Second order: checks the gradient of x -> <df/dx, v> (v a fixed random cotangent, computed
// with a tape inside, so the backward pass itself is differentiated) with finite differences.
::testing::AssertionResult gradgradcheck(const TestFn& f, const std::vector<Tensor>& inputs,
                                         const GradCheckOptions& options = {});

// Both of the above.
::testing::AssertionResult gradcheck_both(const TestFn& f, const std::vector<Tensor>& inputs,
                                          const GradCheckOptions& options = {});

// A float64 tensor of `shape` with values uniform in [lo, hi), deterministic for `seed`.
Tensor random_f64(const Shape& shape, std::uint64_t seed, double lo = -1.0, double hi = 1.0);

// Element-wise closeness: |a - b| <= atol + rtol |b|, same shape.
::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol = 1e-6, double atol = 1e-6);

}  // namespace tapeflow::testing
