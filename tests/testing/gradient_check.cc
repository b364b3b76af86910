#include "tests/testing/gradient_check.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "tape/autodiff/gradient_tape.h"
#include "tape/core/random.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::testing {

Tensor random_f64(const Shape& shape, std::uint64_t seed, double lo, double hi) {
  Generator gen(seed);
  return random_uniform(shape, gen, lo, hi, DType::kFloat64);
}

::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << a.shape().to_string() << " vs " << b.shape().to_string();
  auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (std::size_t i = 0; i < va.size(); ++i)
    if (!(std::abs(va[i] - vb[i]) <= atol + rtol * std::abs(vb[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << vb[i] << "\n"
                                           << a.to_string() << "\n" << b.to_string();
  return ::testing::AssertionSuccess();
}

namespace {

Tensor copy_with(const Tensor& x, std::int64_t i, double delta) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  std::memcpy(y.mutable_raw_data(), x.raw_data(), x.nbytes());
  y.mutable_data<double>()[i] += delta;
  return y;
}

}  // namespace

::testing::AssertionResult gradcheck(const TestFn& f, const std::vector<Tensor>& inputs, const GradCheckOptions& o) {
  Tensor y0 = f(inputs);
  if (y0.dtype() != DType::kFloat64)
    return ::testing::AssertionFailure() << "gradcheck: output must be float64, got " << dtype_name(y0.dtype());
  const std::int64_t ny = y0.num_elements();
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].dtype() != DType::kFloat64) continue;
    const std::int64_t nx = inputs[k].num_elements();
    // Analytical: one backward pass per output element (one-hot output gradient).
    std::vector<double> analytic(static_cast<std::size_t>(ny * nx), 0.0);
    {
      GradientTape tape({.persistent = true});
      std::vector<Tensor> in = inputs;
      for (auto& t : in) tape.watch(t);
      Tensor y = f(in);
      for (std::int64_t i = 0; i < ny; ++i) {
        Tensor seed = zeros(y.shape(), DType::kFloat64);
        seed.mutable_data<double>()[i] = 1.0;
        auto g = tape.gradient(std::vector<Tensor>{y}, std::vector<Source>{in[k]}, {.output_gradients = {seed}})[0];
        if (!g) continue;  // unconnected: zero
        if (g->shape() != in[k].shape())
          return ::testing::AssertionFailure() << "gradient shape " << g->shape().to_string() << " for input " << k
                                               << " of shape " << in[k].shape().to_string();
        auto gv = g->to_vector<double>();
        for (std::int64_t j = 0; j < nx; ++j) analytic[static_cast<std::size_t>(i * nx + j)] = gv[static_cast<std::size_t>(j)];
      }
    }
    // Numerical: central differences.
    for (std::int64_t j = 0; j < nx; ++j) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      plus[k] = copy_with(inputs[k], j, o.eps);
      minus[k] = copy_with(inputs[k], j, -o.eps);
      auto yp = f(plus).to_vector<double>(), ym = f(minus).to_vector<double>();
      for (std::int64_t i = 0; i < ny; ++i) {
        double num = (yp[static_cast<std::size_t>(i)] - ym[static_cast<std::size_t>(i)]) / (2 * o.eps);
        double ana = analytic[static_cast<std::size_t>(i * nx + j)];
        if (!(std::abs(num - ana) <= o.atol + o.rtol * std::abs(num)))
          return ::testing::AssertionFailure() << "input " << k << " element " << j << ", output element " << i
                                               << ": analytical " << ana << " vs numerical " << num;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult gradgradcheck(const TestFn& f, const std::vector<Tensor>& inputs, const GradCheckOptions& o) {
  Tensor y0 = f(inputs);
  Tensor v = random_f64(y0.shape(), 12345, 0.5, 1.5);
  std::vector<std::size_t> float_inputs;
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].dtype() == DType::kFloat64) float_inputs.push_back(k);
  // h(x) = concat over inputs of d<f(x), v>/dx_k, flattened; computed with an inner tape.
  for (std::size_t k : float_inputs) {
    TestFn h = [&, k](const std::vector<Tensor>& in) {
      GradientTape tape;
      for (const auto& t : in) tape.watch(t);
      Tensor y = f(in);
      auto g = tape.gradient(reduce_sum(y * v), in[k]);
      return g ? *g : zeros(in[k].shape(), DType::kFloat64);
    };
    auto r = gradcheck(h, inputs, o);
    if (!r) return ::testing::AssertionFailure() << "second order (gradient w.r.t. input " << k << "): " << r.message();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult gradcheck_both(const TestFn& f, const std::vector<Tensor>& inputs, const GradCheckOptions& o) {
  auto r = gradcheck(f, inputs, o);
  if (!r) return r;
  return gradgradcheck(f, inputs, o);
}

}  // namespace tapeflow::testing
