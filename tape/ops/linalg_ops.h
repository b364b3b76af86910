// Linear-algebra ops: matrix products and linear solves.
//
// DTypes:   float32, float64; both inputs must have the same dtype.
// Ref:      tf.linalg, tensorflow/python/ops/math_grad.py (_MatMulGrad), linalg_grad.py (_MatrixSolveGrad)
#pragma once

#include "tape/core/tensor.h"

namespace tapeflow {

// Returns the matrix product op(a) @ op(b), op = transpose of the last two dims when the flag is set.
// Shapes:   a [..., m, k], b [..., k, n] -> [..., m, n] (a stored [..., k, m] with transpose_a, b stored
//           [..., n, k] with transpose_b). The leading (batch) dims broadcast as in NumPy: a batch dim of
//           1 or a missing one repeats the matrix.
// DTypes:   float32, float64; a and b must match.
// Errors:   std::invalid_argument: rank < 2 ("matmul: a must have rank >= 2, got [3]"), inner dims differ
//           ("matmul: inner dimensions differ: a [2, 3], b [4, 5]"), batch dims that do not broadcast,
//           dtype mismatch or a non-float dtype.
// Gradient: da = g bᵀ, db = aᵀ g (with the transposes folded in as in TF's _MatMulGrad), summed over
//           broadcast batch dims back to each input's shape.
// Ref:      tf.linalg.matmul
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// Solves matrix @ x = rhs for x (matrixᵀ @ x = rhs with adjoint) by partial-pivot LU.
// Shapes:   matrix [..., n, n], rhs [..., n, k] -> x [..., n, k]; the batch dims must be equal.
// DTypes:   float32, float64; both must match.
// Errors:   std::invalid_argument: rank < 2, non-square matrix, rows of rhs != n, batch dims differ,
//           dtype mismatch, or a singular / non-finite system ("solve: matrix is singular ...").
// Gradient: drhs = solve(matrixᵀ, g); dmatrix = -drhs xᵀ (TF's _MatrixSolveGrad; adjoint swaps roles).
// Ref:      tf.linalg.solve
Tensor solve(const Tensor& matrix, const Tensor& rhs, bool adjoint = false);

}  // namespace tapeflow
