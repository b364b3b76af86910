// One damped Newton step over several variables: solve (H + λI) u = g, then v -= u per variable.
//
// Shapes:   g and H span all variables (flattened row-major, in the order given, as hessian());
//           u is split and reshaped back to each variable's shape.
// DTypes:   float32, float64 variables (one dtype); the solve runs in that precision.
// Solver:   Cholesky (LLT) of H + λI, blocked and TBB-parallel (kernels::cholesky_lower). If
//           that matrix is not positive definite: with kLevenbergMarquardt, λ is multiplied by damping_factor until LLT succeeds (at most
//           max_damping_increases times, then LDLT); with kIndefinite, a symmetric indefinite
//           LDLT solve of H + λI. Which one ran is logged (spdlog info) and reported.
// Errors:   std::invalid_argument naming the variable(s) when g or H has a non-finite entry, and
//           for no variables, mixed dtypes, a non-scalar loss; std::runtime_error if no solver
//           gives a finite step.
// Ref:      the Newton step of TF's advanced autodiff guide (tf.linalg.solve(H + eps I, g));
//           Levenberg–Marquardt damping (Nocedal & Wright, ch. 10).
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "tape/autodiff/hessian.h"

namespace tapeflow {

// What newton_step does when H + λI is not positive definite (Cholesky fails).
enum class NewtonFallback {
  kLevenbergMarquardt,  // raise λ by damping_factor until LLT succeeds (else LDLT with the first λ)
  // Solve H + λI (the given λ) by a symmetric indefinite LDLT at once.
  kIndefinite
};

// Options of newton_step: damping, the fallback when H + λI is not positive definite, the Hessian's.
struct NewtonOptions {
  double damping = 1e-3;  // λ
  // Fallback for a matrix that is not positive definite (default: Levenberg–Marquardt damping).
  NewtonFallback fallback = NewtonFallback::kLevenbergMarquardt;
  // kLevenbergMarquardt: λ is multiplied by this after each failed Cholesky (a λ of 0 becomes 1e-8).
  double damping_factor = 10.0;
  // kLevenbergMarquardt: at most this many increases of λ, then the LDLT solve of H + damping·I.
  int max_damping_increases = 12;
  bool evaluate_loss_after = true;  // run loss_fn once more for loss_after
  // How g and H are computed (hessian()'s options; blocks are not needed).
  HessianOptions hessian = {};
};

// What one newton_step did: the loss before and after, the step and the solver that gave it.
struct NewtonStepResult {
  double loss_before = 0.0;  // loss_fn() at the starting point
  double loss_after = std::numeric_limits<double>::quiet_NaN();  // NaN unless evaluate_loss_after
  double step_norm = 0.0;  // ‖u‖₂
  double damping = 0.0;    // the λ actually used
  std::string solver;      // "llt", "llt (damping raised)" or "ldlt"
  std::vector<Tensor> updates;  // u per variable, already subtracted
};

// Computes g and H of loss_fn() over `variables`, solves for u and applies v -= u.
NewtonStepResult newton_step(const LossFn& loss_fn, const std::vector<Variable>& variables,
                             const NewtonOptions& options = {});

}  // namespace tapeflow
