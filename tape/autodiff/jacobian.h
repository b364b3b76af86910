// Jacobians: GradientTape::jacobian and GradientTape::batch_jacobian (declared in gradient_tape.h,
// implemented in jacobian.cc), with a sequential, a oneTBB-parallel and a vectorized path.
//
// Facts:    the loop runs one backward pass per target element with a one-hot cotangent; with
//           parallel_iterations != 1 the rows run on oneTBB worker threads (capped by a task arena)
//           with recording paused, and are bit-identical to the sequential loop. The vectorized
//           path (experimental_use_pfor, the default) pushes the one-hot cotangents through the
//           same backward pass with a leading batch dimension K (TapeState::backward with
//           BackwardOptions::batch): every op the gradient functions execute runs through its
//           batching rule (OpDef::batch, tape/runtime/batching.h). Graphs with an op that cannot
//           batch (OpDef::loop_only, or no rule) fall back to the loop, logged at warning level
//           once per op name.
//           batch_jacobian's independence check pushes 2·ceil(log2 b) random cotangents, each
//           supported on the examples whose index has bit j equal to 0 (or 1), and requires the
//           gradient on the other examples to vanish: every pair i != k differs in some bit, so any
//           dependence of target[i] on source[k] is caught (with probability 1 over the random
//           values). On failure one instrumented pass names the first op (in backward order) whose
//           input gradient leaks onto examples outside the probe.
// Ref:      tf.GradientTape.jacobian / batch_jacobian (tensorflow/python/eager/backprop.py)
#pragma once

#include "tape/autodiff/gradient_tape.h"
