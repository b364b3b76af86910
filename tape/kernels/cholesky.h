// Blocked, TBB-parallel Cholesky factorisation and solve for symmetric positive-definite systems.
// Shapes:   a is [n, n] row-major. cholesky_lower reads only the lower triangle (diagonal
//           included) and overwrites it with L, where A = L Lᵀ; the strict upper triangle is
//           neither read nor written, so a caller can keep a copy of A there.
//           cholesky_solve: l as produced above, b [n] overwritten with x = A⁻¹ b.
// DTypes:   float, double.
// Facts:    Right-looking with nb-wide panels: each diagonal block is factored by Eigen's LLT,
//           the panel below it is a triangular solve split over row blocks, and the trailing
//           lower triangle is updated block row by block row (Eigen GEMM, one task per block
//           row). Work n³/3 flops, spread over kernels::num_threads() threads. Eigen's own LLT
//           runs its rank updates on one thread; on 2 cores this is ~2-3x faster at n = 1024.
//           Results repeat bit for bit for a fixed n (the blocking does not depend on threads).
// Errors:   none thrown; cholesky_lower returns false when a pivot is not positive or not
//           finite (A is not numerically positive definite) and leaves the lower triangle
//           partly overwritten.
// Ref:      LAPACK xPOTRF (blocked right-looking Cholesky); Golub & Van Loan §4.2.
#pragma once

#include <cstdint>

namespace tapeflow::kernels {

template <class T>
bool cholesky_lower(T* a, std::int64_t n);

template <class T>
void cholesky_solve(const T* l, T* b, std::int64_t n);

}  // namespace tapeflow::kernels
