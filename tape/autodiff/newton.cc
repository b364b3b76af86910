// A damped Newton step over several variables (see newton.h): g and H from hessian(), an Eigen
// solve in float64, per-variable updates.
#include "tape/autodiff/newton.h"

#include <spdlog/spdlog.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <cmath>
#include <stdexcept>

#include "tape/runtime/recorder.h"

namespace tapeflow {
namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXd;

// The variable holding flat entry k.
std::size_t owner_index(const std::vector<std::int64_t>& offsets, std::int64_t k) {
  std::size_t i = 0;
  while (offsets[i + 1] <= k) ++i;
  return i;
}
const Variable& owner(const std::vector<Variable>& vars, const std::vector<std::int64_t>& offsets, std::int64_t k) {
  return vars[owner_index(offsets, k)];
}

void check_finite(const Matrix& h, const Vector& g, const std::vector<Variable>& vars,
                  const std::vector<std::int64_t>& offsets) {
  const std::int64_t n = g.size();
  for (std::int64_t k = 0; k < n; ++k)
    if (!std::isfinite(g[k]))
      throw std::invalid_argument("newton_step: non-finite gradient (" + std::to_string(g[k]) + ") for variable '" +
                                  owner(vars, offsets, k).name() + "' (its flat entry " +
                                  std::to_string(k - offsets[owner_index(offsets, k)]) + ")");
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < n; ++c)
      if (!std::isfinite(h(r, c)))
        throw std::invalid_argument("newton_step: non-finite Hessian entry (" + std::to_string(h(r, c)) +
                                    ") for variables '" + owner(vars, offsets, r).name() + "' x '" +
                                    owner(vars, offsets, c).name() + "' (row " + std::to_string(r) + ", column " +
                                    std::to_string(c) + ")");
}

struct Solution {
  Vector u;
  double damping;
  std::string solver;
};

bool finite(const Vector& v) { return v.allFinite(); }

Solution solve_damped(const Matrix& h, const Vector& g, const NewtonOptions& o) {
  const std::int64_t n = g.size();
  Matrix a = h;
  a.diagonal().array() += o.damping;
  if (o.fallback == NewtonFallback::kLevenbergMarquardt) {
    double lambda = o.damping;
    for (int attempt = 0; attempt <= o.max_damping_increases; ++attempt) {
      Eigen::LLT<Matrix> llt(a);
      if (llt.info() == Eigen::Success) {
        Vector u = llt.solve(g);
        if (finite(u)) {
          if (attempt > 0)
            spdlog::info("newton_step: H + {:g} I is not positive definite; Levenberg-Marquardt raised the damping "
                         "to {:g} (Cholesky)", o.damping, lambda);
          return {u, lambda, attempt ? "llt (damping raised)" : "llt"};
        }
      }
      const double next = lambda > 0 ? lambda * o.damping_factor : 1e-8;
      a.diagonal().array() += next - lambda;
      lambda = next;
    }
    a = h;
    a.diagonal().array() += o.damping;
    spdlog::info("newton_step: H + λI stayed indefinite up to λ = {:g}; falling back to LDLT with λ = {:g}", lambda,
                 o.damping);
  }
  Eigen::LDLT<Matrix> ldlt(a);
  Vector u = ldlt.info() == Eigen::Success ? Vector(ldlt.solve(g)) : Vector::Constant(n, NAN);
  if (!finite(u))
    throw std::runtime_error("newton_step: the symmetric indefinite (LDLT) solve of H + " + std::to_string(o.damping) +
                             " I gave a non-finite step (singular system)");
  if (o.fallback == NewtonFallback::kIndefinite) {
    Eigen::LLT<Matrix> llt(a);
    if (llt.info() == Eigen::Success) return {Vector(llt.solve(g)), o.damping, "llt"};
    spdlog::info("newton_step: H + {:g} I is not positive definite; solved with LDLT (symmetric indefinite)", o.damping);
  }
  return {u, o.damping, "ldlt"};
}

double to_double(const Tensor& t) { return convert(t, DType::kFloat64).data<double>()[0]; }

}  // namespace

NewtonStepResult newton_step(const LossFn& loss_fn, const std::vector<Variable>& variables,
                             const NewtonOptions& options) {
  if (variables.empty()) throw std::invalid_argument("newton_step: no variables");
  std::vector<Source> sources(variables.begin(), variables.end());
  HessianResult hr = hessian(loss_fn, sources, options.hessian);
  const std::int64_t n = hr.gradient.num_elements();
  Tensor h64 = convert(hr.matrix, DType::kFloat64), g64 = convert(hr.gradient, DType::kFloat64);
  Matrix h = Eigen::Map<const Matrix>(h64.data<double>(), n, n);
  Vector g = Eigen::Map<const Vector>(g64.data<double>(), n);
  check_finite(h, g, variables, hr.offsets);
  Solution sol = solve_damped(h, g, options);
  NewtonStepResult out;
  out.loss_before = to_double(hr.loss);
  out.step_norm = sol.u.norm();
  out.damping = sol.damping;
  out.solver = sol.solver;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const Variable& v = variables[i];
    std::vector<double> part(sol.u.data() + hr.offsets[i], sol.u.data() + hr.offsets[i + 1]);
    Tensor u = constant(part, v.shape(), v.dtype());
    v.assign_sub(u);
    out.updates.push_back(u);
  }
  if (options.evaluate_loss_after) {
    RecordingPause pause;
    out.loss_after = to_double(loss_fn());
  }
  return out;
}

}  // namespace tapeflow
