#define EIGEN_DONT_PARALLELIZE
#include "tape/kernels/cholesky.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <vector>

#include "tape/kernels/gemm/internal/packed.h"
#include "tape/kernels/matmul.h"
#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {
namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using View = Eigen::Map<RowMat<T>, 0, Eigen::OuterStride<>>;

// Panel width: a 128-wide panel of n <= 1024 rows stays in L2 (512 KiB), and n = 1024 still
// gives the trailing update several block rows to share between threads.
constexpr std::int64_t kPanel = 128;
// Rows per task of the panel's triangular solve (a task takes a contiguous run of these).
constexpr std::int64_t kSolveRows = 128;
// Columns per step of the panel's blocked triangular solve.
constexpr std::int64_t kTri = 32;
// Columns per GEMM of the trailing update.
constexpr std::int64_t kScratchCols = 256;

template <class T>
using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using ColView = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>>;

template <class T>
View<T> view(T* a, std::int64_t n, std::int64_t r, std::int64_t c, std::int64_t rows, std::int64_t cols) {
  return View<T>(a + r * n + c, rows, cols, Eigen::OuterStride<>(n));
}

// A[bi:bi+rows, r0:bi+rows] -= L[bi:bi+rows, j:j+b] L[r0:bi+rows, j:j+b]ᵀ, on and below the
// diagonal only.
template <class T>
void update_block_row(T* a, std::int64_t n, std::int64_t j, std::int64_t b, std::int64_t r0, std::int64_t bi,
                      std::int64_t rows) {
  if (internal::packed_gemm_runs()) {
    // The product into a scratch block, then subtracted (the packed GEMM overwrites its output),
    // kScratchCols columns at a time so that the scratch stays small (it counts against the Newton
    // step's memory budget).
    thread_local std::vector<T> scratch;
    if (scratch.size() < static_cast<std::size_t>(rows * kScratchCols))
      scratch.resize(static_cast<std::size_t>(rows * kScratchCols));
    for (std::int64_t c0 = r0; c0 < bi + rows; c0 += kScratchCols) {
      const std::int64_t cols = std::min(kScratchCols, bi + rows - c0);
      internal::packed_gemm<T>(rows, cols, b, a + bi * n + j, n, false, a + c0 * n + j, n, true, scratch.data(), cols);
      for (std::int64_t r = 0; r < rows; ++r) {
        T* dst = a + (bi + r) * n + c0;
        const T* src = scratch.data() + r * cols;
        const std::int64_t upto = std::min(cols, bi + r + 1 - c0);  // through the diagonal
        for (std::int64_t c = 0; c < upto; ++c) dst[c] -= src[c];
      }
    }
    return;
  }
  View<T> li = view(a, n, bi, j, rows, b);
  if (bi > r0) view(a, n, bi, r0, rows, bi - r0).noalias() -= li * view(a, n, r0, j, bi - r0, b).transpose();
  view(a, n, bi, bi, rows, rows).template triangularView<Eigen::Lower>() -= li * li.transpose();
}

// Panel rows [r0, r0 + rest) of columns [j, j + b): P <- P L11⁻ᵀ, with L11 = A[j:j+b, j:j+b].
template <class T>
void solve_panel(T* a, std::int64_t n, std::int64_t j, std::int64_t b, std::int64_t r0, std::int64_t rest) {
  if (internal::packed_gemm_runs()) {
    // Blocked substitution on the packed GEMM, kTri columns at a time: P_c -= P_<c L_c,<cᵀ, then
    // P_c <- P_c L_ccᵀ⁻¹ with the kTri x kTri diagonal triangle inverted once per panel (Eigen's
    // triangular solve ran at ~18 GFLOP/s and was a third of the factorisation). Only these small
    // triangles are inverted, so the error growth stays that of kTri x kTri blocks.
    const std::int64_t nblocks = (b + kTri - 1) / kTri;
    std::vector<T> inv(static_cast<std::size_t>(nblocks * kTri * kTri));
    for (std::int64_t c = 0; c < nblocks; ++c) {
      const std::int64_t cb = c * kTri, w = std::min(kTri, b - cb);
      Eigen::Map<RowMat<T>> out(inv.data() + c * kTri * kTri, w, w);
      out = view(a, n, j + cb, j + cb, w, w).template triangularView<Eigen::Lower>().solve(RowMat<T>::Identity(w, w));
    }
    parallel_for((rest + kSolveRows - 1) / kSolveRows, 1, [&](std::int64_t s, std::int64_t e) {
      thread_local std::vector<T> scratch;
      if (scratch.size() < static_cast<std::size_t>(kSolveRows * kTri))
        scratch.resize(static_cast<std::size_t>(kSolveRows * kTri));
      for (std::int64_t t = s; t < e; ++t) {
        const std::int64_t r = r0 + t * kSolveRows, rows = std::min(kSolveRows, r0 + rest - r);
        T* p = a + r * n + j;
        for (std::int64_t c = 0; c < nblocks; ++c) {
          const std::int64_t cb = c * kTri, w = std::min(kTri, b - cb);
          if (cb > 0) {
            internal::packed_gemm<T>(rows, w, cb, p, n, false, a + (j + cb) * n + j, n, true, scratch.data(), w);
            for (std::int64_t i = 0; i < rows; ++i)
              for (std::int64_t q = 0; q < w; ++q) p[i * n + cb + q] -= scratch[static_cast<std::size_t>(i * w + q)];
          }
          internal::packed_gemm<T>(rows, w, w, p + cb, n, false, inv.data() + c * kTri * kTri, w, true, scratch.data(), w);
          for (std::int64_t i = 0; i < rows; ++i)
            std::copy_n(scratch.data() + i * w, w, p + i * n + cb);
        }
      }
    });
    return;
  }
  // L11 L21ᵀ = A21ᵀ: A21 read column-major is A21ᵀ; L11 copied column-major for Eigen's fast
  // all-column-major left-side solve.
  const ColMat<T> l11 = view(a, n, j, j, b, b).template triangularView<Eigen::Lower>();
  parallel_for((rest + kSolveRows - 1) / kSolveRows, 1, [&](std::int64_t s, std::int64_t e) {
    const std::int64_t r = r0 + s * kSolveRows, rows = std::min(r0 + rest, r0 + e * kSolveRows) - r;
    ColView<T> pt(a + r * n + j, b, rows, Eigen::OuterStride<>(n));
    l11.template triangularView<Eigen::Lower>().solveInPlace(pt);
  });
}

}  // namespace

template <class T>
bool cholesky_lower(T* a, std::int64_t n) {
  configure_eigen_cache();
  std::vector<std::int64_t> rows_order;
  for (std::int64_t j = 0; j < n; j += kPanel) {
    const std::int64_t b = std::min(kPanel, n - j);
    View<T> d = view(a, n, j, j, b, b);
    // Eigen's in-place LLT of the diagonal block (lower triangle only); it stops at a pivot
    // <= 0 but lets NaN through, hence the finiteness check.
    // (Unblocked below 64: Eigen's blocked path spends more on its small GEMM calls than it saves.)
    const auto info = b <= 64 ? Eigen::internal::llt_inplace<T, Eigen::Lower>::unblocked(d)
                              : Eigen::internal::llt_inplace<T, Eigen::Lower>::blocked(d);
    if (info >= 0) return false;
    for (std::int64_t i = 0; i < b; ++i)
      if (!std::isfinite(d(i, i))) return false;
    const std::int64_t r0 = j + b, rest = n - r0;
    if (rest == 0) break;
    // Panel: L21 = A21 L11⁻ᵀ, rows independent, split over tasks.
    solve_panel(a, n, j, b, r0, rest);
    // Trailing lower triangle: A22 -= L21 L21ᵀ, one task per kPanel-row block: a single GEMM for
    // the part left of its diagonal block (one packing of each operand), then the diagonal block's
    // lower triangle. Block rows are dealt out longest-first/shortest-first in turn so that the
    // static split gives every thread about the same work.
    rows_order.clear();
    for (std::int64_t lo = r0, hi = (n - 1 - r0) / kPanel * kPanel + r0; lo <= hi; lo += kPanel, hi -= kPanel) {
      rows_order.push_back(hi);
      if (lo != hi) rows_order.push_back(lo);
    }
    parallel_for(static_cast<std::int64_t>(rows_order.size()), 1, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t t = s; t < e; ++t) {
        const std::int64_t bi = rows_order[static_cast<std::size_t>(t)], rows = std::min(kPanel, n - bi);
        update_block_row(a, n, j, b, r0, bi, rows);
      }
    });
  }
  return true;
}

template <class T>
void cholesky_solve(const T* l, T* b, std::int64_t n) {
  Eigen::Map<const RowMat<T>> L(l, n, n);
  Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> x(b, n);
  L.template triangularView<Eigen::Lower>().solveInPlace(x);
  L.transpose().template triangularView<Eigen::Upper>().solveInPlace(x);
}

template bool cholesky_lower<float>(float*, std::int64_t);
template bool cholesky_lower<double>(double*, std::int64_t);
template void cholesky_solve<float>(const float*, float*, std::int64_t);
template void cholesky_solve<double>(const double*, double*, std::int64_t);

}  // namespace tapeflow::kernels
