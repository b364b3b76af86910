// A damped Newton step over several variables (see newton.h): g and H from hessian(), a blocked
// parallel Cholesky (kernels::cholesky_lower) in H's precision, per-variable updates.
#include "tape/autodiff/newton.h"

#include <spdlog/spdlog.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <cmath>
#include <stdexcept>

#include "tape/kernels/cholesky.h"
#include "tape/runtime/logging.h"
#include "tape/runtime/recorder.h"

namespace tapeflow {
namespace {

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// The variable holding flat entry k.
std::size_t owner_index(const std::vector<std::int64_t>& offsets, std::int64_t k) {
  std::size_t i = 0;
  while (offsets[i + 1] <= k) ++i;
  return i;
}
const Variable& owner(const std::vector<Variable>& vars, const std::vector<std::int64_t>& offsets, std::int64_t k) {
  return vars[owner_index(offsets, k)];
}

// h is symmetric, so its row-major data read column-major is h itself.
template <class T>
void check_finite(const T* h, const T* g, std::int64_t n, const std::vector<Variable>& vars,
                  const std::vector<std::int64_t>& offsets) {
  using Flat = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  if (Flat(g, n).allFinite() && Flat(h, n * n).allFinite()) return;  // vectorised; the loops below name the entry
  for (std::int64_t k = 0; k < n; ++k)
    if (!std::isfinite(g[k]))
      throw std::invalid_argument("newton_step: non-finite gradient (" + std::to_string(g[k]) + ") for variable '" +
                                  owner(vars, offsets, k).name() + "' (its flat entry " +
                                  std::to_string(k - offsets[owner_index(offsets, k)]) + ")");
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < n; ++c)
      if (!std::isfinite(h[r * n + c]))
        throw std::invalid_argument("newton_step: non-finite Hessian entry (" + std::to_string(h[r * n + c]) +
                                    ") for variables '" + owner(vars, offsets, r).name() + "' x '" +
                                    owner(vars, offsets, c).name() + "' (row " + std::to_string(r) + ", column " +
                                    std::to_string(c) + ")");
}

struct Solution {
  std::vector<double> u;
  double damping;
  std::string solver;
};

// Solves (H + λI) u = g in H's precision, in place in h (row-major, symmetric; no copy of H): the
// factorisation overwrites the lower triangle, and a retry restores it from the untouched strict
// upper one. Cholesky, then LM damping increases or LDLT (see newton.h).
template <class T>
Solution solve_damped(T* h, const T* g_data, std::int64_t n, const NewtonOptions& o) {
  Eigen::Map<const Vector<T>> g(g_data, n);
  Vector<T> diag(n);
  for (std::int64_t i = 0; i < n; ++i) diag[i] = h[i * n + i];
  auto load = [&](double lambda, bool restore_lower) {
    if (restore_lower)
      for (std::int64_t r = 1; r < n; ++r)
        for (std::int64_t c = 0; c < r; ++c) h[r * n + c] = h[c * n + r];
    for (std::int64_t i = 0; i < n; ++i) h[i * n + i] = diag[i] + static_cast<T>(lambda);
  };
  auto done = [](const Vector<T>& u, double lambda, const char* solver) {
    return Solution{std::vector<double>(u.data(), u.data() + u.size()), lambda, solver};
  };
  // Cholesky of the loaded H + λI and the two triangular solves; false if not positive definite.
  Vector<T> u(n);
  auto llt = [&] {
    if (!kernels::cholesky_lower(h, n)) return false;
    u = g;
    kernels::cholesky_solve(h, u.data(), n);
    return u.allFinite();
  };
  load(o.damping, false);
  if (llt()) return done(u, o.damping, "llt");
  double lambda = o.damping;
  if (o.fallback == NewtonFallback::kLevenbergMarquardt) {
    for (int attempt = 0; attempt < o.max_damping_increases; ++attempt) {
      lambda = lambda > 0 ? lambda * o.damping_factor : 1e-8;
      load(lambda, true);
      if (!llt()) continue;
      logger()->info("newton_step: H + {:g} I is not positive definite; Levenberg-Marquardt raised the damping to {:g} "
                     "(Cholesky)", o.damping, lambda);
      return done(u, lambda, "llt (damping raised)");
    }
    logger()->info("newton_step: H + λI stayed indefinite up to λ = {:g}; falling back to LDLT with λ = {:g}", lambda,
                   o.damping);
  } else {
    logger()->info("newton_step: H + {:g} I is not positive definite; solving with LDLT (symmetric indefinite)",
                   o.damping);
  }
  load(o.damping, true);
  Eigen::Map<Matrix<T>> a(h, n, n);  // symmetric again, so reading it column-major is H + λI
  Eigen::LDLT<Eigen::Ref<Matrix<T>>> ldlt(a);
  u = ldlt.info() == Eigen::Success ? Vector<T>(ldlt.solve(g)) : Vector<T>::Constant(n, T(NAN));
  if (!u.allFinite())
    throw std::runtime_error("newton_step: the symmetric indefinite (LDLT) solve of H + " + std::to_string(o.damping) +
                             " I gave a non-finite step (singular system)");
  return done(u, o.damping, "ldlt");
}

double to_double(const Tensor& t) { return convert(t, DType::kFloat64).data<double>()[0]; }

}  // namespace

NewtonStepResult newton_step(const LossFn& loss_fn, const std::vector<Variable>& variables,
                             const NewtonOptions& options) {
  if (variables.empty()) throw std::invalid_argument("newton_step: no variables");
  std::vector<Source> sources(variables.begin(), variables.end());
  HessianResult hr = hessian(loss_fn, sources, options.hessian);
  const std::int64_t n = hr.gradient.num_elements();
  Solution sol;
  if (hr.matrix.dtype() == DType::kFloat64) {
    check_finite(hr.matrix.data<double>(), hr.gradient.data<double>(), n, variables, hr.offsets);
    sol = solve_damped(hr.matrix.mutable_data<double>(), hr.gradient.data<double>(), n, options);
  } else {
    check_finite(hr.matrix.data<float>(), hr.gradient.data<float>(), n, variables, hr.offsets);
    sol = solve_damped(hr.matrix.mutable_data<float>(), hr.gradient.data<float>(), n, options);
  }
  NewtonStepResult out;
  out.loss_before = to_double(hr.loss);
  double norm2 = 0;
  for (double v : sol.u) norm2 += v * v;
  out.step_norm = std::sqrt(norm2);
  out.damping = sol.damping;
  out.solver = sol.solver;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const Variable& v = variables[i];
    std::vector<double> part(sol.u.begin() + hr.offsets[i], sol.u.begin() + hr.offsets[i + 1]);
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
