// kernels::matmul and MatmulRhs (tape/kernels/matmul.h): the choice of back end per product
// (plain loops for tiny products, Eigen for thin ones and below the avx2 level, else the packed
// GEMM, gemm/internal/packed.h) and the split of a batch of products over the threads.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "tape/kernels/gemm/internal/eigen.h"
#include "tape/kernels/gemm/internal/packed.h"
#include "tape/kernels/matmul.h"
#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {

namespace {

// Products of at most this many multiply-adds run as plain loops: Eigen's lazy product and the
// packed GEMM both spend more on setup than on the arithmetic there (the batched Hessian of a
// small model runs thousands of 7 x 5 x 8 products; W2 small: ~25% fewer instructions).
constexpr std::int64_t kTinyWork = 2048;

// C_i = op(A_i) op(B_i) for products [s, e), row by row: C[r, :] = sum_p op(A)(r, p) op(B)(p, :)
// (contiguous, vectorised) when B is not transposed, else one dot product per element; in both
// cases each element sums its k products in order p = 0 .. k-1.
template <class T, bool TA, bool TB>
void tiny_products(const T* a, const T* b, T* c, std::int64_t s, std::int64_t e, std::int64_t m, std::int64_t k,
                   std::int64_t n, std::int64_t as, std::int64_t bs) {
  for (std::int64_t i = s; i < e; ++i) {
    const T* ai = a + i * as;
    const T* bi = b + i * bs;
    T* ci = c + i * m * n;
    for (std::int64_t r = 0; r < m; ++r) {
      T* cr = ci + r * n;
      if constexpr (!TB) {
        std::fill(cr, cr + n, T(0));
        for (std::int64_t p = 0; p < k; ++p) {
          const T av = TA ? ai[p * m + r] : ai[r * k + p];
          const T* bp = bi + p * n;
          for (std::int64_t j = 0; j < n; ++j) cr[j] += av * bp[j];
        }
      } else {
        for (std::int64_t j = 0; j < n; ++j) {
          const T* bj = bi + j * k;
          T acc = 0;
          for (std::int64_t p = 0; p < k; ++p) acc += (TA ? ai[p * m + r] : ai[r * k + p]) * bj[p];
          cr[j] = acc;
        }
      }
    }
  }
}

template <class T>
void tiny_products(const T* a, const T* b, T* c, std::int64_t s, std::int64_t e, std::int64_t m, std::int64_t k,
                   std::int64_t n, bool ta, bool tb, std::int64_t as, std::int64_t bs) {
  if (!ta && !tb) tiny_products<T, false, false>(a, b, c, s, e, m, k, n, as, bs);
  else if (ta && !tb) tiny_products<T, true, false>(a, b, c, s, e, m, k, n, as, bs);
  else if (!ta && tb) tiny_products<T, false, true>(a, b, c, s, e, m, k, n, as, bs);
  else tiny_products<T, true, true>(a, b, c, s, e, m, k, n, as, bs);
}

}  // namespace

namespace {

// Products that Eigen's GEMV / lazy products run faster than the 6 x 16 (6 x 8) register tile:
// fewer than 6 rows or columns (one partial tile, B or A packed for little reuse). (Tiny ones
// never get here: see kTinyWork.)
// Measured over m, n in 1..512, k in 8..512: Eigen wins by up to 10x at n = 1, ours by 1.2-2.5x
// from m, n >= 6 (bench/kernels_bench.cc has the model shapes).
bool eigen_is_faster(std::int64_t m, std::int64_t n) { return n < 6 || m < 6; }
constexpr std::int64_t kGemmMinRows = 6;  // eigen_is_faster's bound on m

// A single product whose K dwarfs its output (a weight gradient X^T dY over many rows: W12's
// 64 x 6272 x 64) has few row or column blocks to share, and each part of a row or column cut
// repacks the whole of the other operand (2 threads: 123 GFLOP/s against 80 on one). Such products
// cut K instead, into kKChunks pieces placed by k alone: each piece's product is summed from zero
// and the pieces are added in order, so every thread count gives the same bits (not those of one
// unbroken K loop; the same rounding error bound, sum_tol in the tests). The 7 partial outputs are
// scratch, so only outputs of at most kKSplitMaxOutput elements (1 MiB of floats each) are cut.
constexpr std::int64_t kKChunks = 8;
constexpr std::int64_t kKSplitMaxOutput = std::int64_t{1} << 18;
bool splits_k(std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n) {
  return batch == 1 && k >= 2048 && k >= 16 * std::max(m, n) && m * n <= kKSplitMaxOutput;
}

template <class T>
void matmul_split_k(const T* a, const T* b, T* c, std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb) {
  const std::int64_t lda = ta ? m : k, ldb = tb ? k : n, mn = m * n;
  std::vector<T> parts(static_cast<std::size_t>((kKChunks - 1) * mn));
  auto edge = [&](std::int64_t q) { return k * q / kKChunks; };
  parallel_for(kKChunks, 1, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t q = s; q < e; ++q) {
      const std::int64_t p0 = edge(q);
      T* out = q == 0 ? c : parts.data() + (q - 1) * mn;
      internal::packed_gemm(m, n, edge(q + 1) - p0, ta ? a + p0 * lda : a + p0, lda, ta, tb ? b + p0 : b + p0 * ldb,
                            ldb, tb, out, n, static_cast<const T*>(nullptr));
    }
  });
  for (std::int64_t q = 1; q < kKChunks; ++q) {
    const T* part = parts.data() + (q - 1) * mn;
    for (std::int64_t i = 0; i < mn; ++i) c[i] += part[i];
  }
}

template <class T>
void matmul_packed(const T* a, const T* b, T* c, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                 bool ta, bool tb, std::int64_t a_batch_stride, std::int64_t b_batch_stride) {
  const std::int64_t lda = ta ? m : k, ldb = tb ? k : n, work = m * n * k;
  auto a_rows = [&](std::int64_t i, std::int64_t r0) {
    const T* ai = a + i * a_batch_stride;
    return ta ? ai + r0 : ai + r0 * lda;
  };
  // Rows [r0, r1) x columns [c0, c1) of product i; a_next: the A rows of the next block this
  // thread runs (prefetched while this one ends).
  auto block = [&](std::int64_t i, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1,
                   const T* a_next) {
    const T* bi = b + i * b_batch_stride;
    internal::packed_gemm(r1 - r0, c1 - c0, k, a_rows(i, r0), lda, ta, tb ? bi + c0 * ldb : bi + c0, ldb, tb,
                        c + i * m * n + r0 * n + c0, n, a_next);
  };
  // Parts per product: enough that batch * parts spreads evenly over the threads, each part
  // worth a task. Cutting rows repacks B in every part, cutting columns repacks A: cut the
  // dimension that repacks the smaller operand, on micro-tile edges.
  const std::int64_t threads = num_threads();
  const bool split_rows = m >= n;
  const std::int64_t unit = split_rows ? internal::kGemmMR : internal::kGemmNR<T>, dim = split_rows ? m : n;
  const std::int64_t units = (dim + unit - 1) / unit;
  std::int64_t parts = batch >= 4 * threads ? 1 : threads / std::gcd(batch, threads);
  parts = std::clamp<std::int64_t>(std::min(parts, work / kMatmulSerialWork), 1, units);
  const std::int64_t grain = std::max<std::int64_t>(1, kMatmulSerialWork * parts / work);
  auto edge = [&](std::int64_t q) { return std::min(dim, units * q / parts * unit); };
  parallel_for(batch * parts, grain, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t t = s; t < e; ++t) {
      const std::int64_t i = t / parts, q = t % parts, lo = edge(q), hi = edge(q + 1);
      if (hi <= lo) continue;
      const std::int64_t nq = (t + 1) % parts;
      const T* a_next = t + 1 >= e ? nullptr : a_rows((t + 1) / parts, split_rows ? edge(nq) : 0);
      if (split_rows) block(i, lo, hi, 0, n, a_next);
      else block(i, 0, m, lo, hi, a_next);
    }
  });
}

}  // namespace

template <class T>
void matmul(const T* a, const T* b, T* c, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
            bool transpose_a, bool transpose_b, std::int64_t a_batch_stride, std::int64_t b_batch_stride) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  if (k == 0) {
    std::fill(c, c + batch * m * n, T(0));
    return;
  }
  if (m * n * k <= kTinyWork) {
    const std::int64_t work = m * n * k;
    parallel_for(batch, std::max<std::int64_t>(1, kMatmulSerialWork / work), [&](std::int64_t s, std::int64_t e) {
      tiny_products(a, b, c, s, e, m, k, n, transpose_a, transpose_b, a_batch_stride, b_batch_stride);
    });
    return;
  }
  if (internal::packed_gemm_runs() && !eigen_is_faster(m, n)) {
    if (splits_k(batch, m, k, n)) {
      matmul_split_k(a, b, c, m, k, n, transpose_a, transpose_b);
      return;
    }
    matmul_packed(a, b, c, batch, m, k, n, transpose_a, transpose_b, a_batch_stride, b_batch_stride);
    return;
  }
  internal::matmul_eigen(a, b, c, batch, m, k, n, transpose_a, transpose_b, a_batch_stride, b_batch_stride,
                         internal::EigenSplit::kFixed);
}

template <class T>
MatmulRhs<T>::MatmulRhs(const T* b, std::int64_t k, std::int64_t n, bool transpose_b)
    : b_(b), k_(k), n_(n), tb_(transpose_b) {
  // Packed at the level of construction; multiply() falls back to matmul if the level drops.
  if (internal::packed_gemm_runs() && k > 0 && !eigen_is_faster(kGemmMinRows, n))
    packed_ = std::make_unique<internal::PackedB<T>>(k, n, b, transpose_b ? k : n, transpose_b);
}
template <class T>
MatmulRhs<T>::~MatmulRhs() = default;

template <class T>
void MatmulRhs<T>::multiply(const T* a, std::int64_t m, T* c, bool transpose_a) const {
  // The same choice as matmul's, so the bits are the same: tiny and thin products do not pack.
  if (packed_ && internal::packed_gemm_runs() && m > 0 && m * n_ * k_ > kTinyWork && !eigen_is_faster(m, n_) &&
      !splits_k(1, m, k_, n_)) {
    internal::packed_gemm(m, a, transpose_a ? m : k_, transpose_a, *packed_, c, n_);
    return;
  }
  matmul(a, b_, c, 1, m, k_, n_, transpose_a, tb_, 0, 0);
}

template void matmul<float>(const float*, const float*, float*, std::int64_t, std::int64_t, std::int64_t,
                            std::int64_t, bool, bool, std::int64_t, std::int64_t);
template void matmul<double>(const double*, const double*, double*, std::int64_t, std::int64_t, std::int64_t,
                             std::int64_t, bool, bool, std::int64_t, std::int64_t);
template class MatmulRhs<float>;
template class MatmulRhs<double>;

}  // namespace tapeflow::kernels
