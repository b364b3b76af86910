// Eigen's GEMM path of kernels::matmul (gemm/internal/eigen.h).
#define EIGEN_DONT_PARALLELIZE
#include "tape/kernels/gemm/internal/eigen.h"

#include <Eigen/Core>

#include <algorithm>
#include <mutex>

#include "tape/kernels/gemm/internal/packed.h"  // cpu_cache_sizes
#include "tape/kernels/matmul.h"
#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {

void configure_eigen_cache() {
  static std::once_flag once;
  std::call_once(once, [] {
    const internal::CacheSizes& s = internal::cpu_cache_sizes();
    if (s.l1 > 0 && s.l2 > 0) Eigen::setCpuCacheSizes(s.l1, s.l2, s.l3 > 0 ? s.l3 : s.l2);
  });
}

namespace internal {
namespace {

// Eigen's GEMM blocking with packing buffers that stay allocated per thread. Eigen's own
// blocking allocates them per product; above 128 KiB that is malloc'd, and glibc trims and
// re-faults the pages on every call (measured 50 -> 65 GFLOP/s single-threaded at n=256).
template <class T>
class ReusedBlocking : public Eigen::internal::level3_blocking<T, T> {
 public:
  ReusedBlocking(Eigen::Index rows, Eigen::Index cols, Eigen::Index depth) {
    this->m_mc = rows;
    this->m_nc = cols;
    this->m_kc = depth;
    Eigen::internal::computeProductBlockingSizes<T, T, 1, Eigen::Index>(this->m_kc, this->m_mc, this->m_nc, 1);
    thread_local Buffer a_buf, b_buf;
    this->m_blockA = a_buf.get(this->m_mc * this->m_kc);
    this->m_blockB = b_buf.get(this->m_kc * this->m_nc);
  }

 private:
  struct Buffer {
    T* data = nullptr;
    Eigen::Index size = 0;
    ~Buffer() { Eigen::internal::aligned_free(data); }
    T* get(Eigen::Index n) {
      if (n > size) {
        Eigen::internal::aligned_free(data);
        data = static_cast<T*>(Eigen::internal::aligned_malloc(static_cast<std::size_t>(n) * sizeof(T)));
        size = n;
      }
      return data;
    }
  };
};

// Column-major view of the row-major product: C^T [n, m] = op(B)^T [n, k] * op(A)^T [k, m].
template <class T, int LhsOrder, int RhsOrder>
void gemm_colmajor(Eigen::Index rows, Eigen::Index cols, Eigen::Index depth, const T* lhs, Eigen::Index lhs_ld,
                   const T* rhs, Eigen::Index rhs_ld, T* res, Eigen::Index res_ld) {
  ReusedBlocking<T> blocking(rows, cols, depth);
  Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, LhsOrder, false, T, RhsOrder, false, Eigen::ColMajor,
                                                 1>::run(rows, cols, depth, lhs, lhs_ld, rhs, rhs_ld, res, 1, res_ld,
                                                         T(1), blocking, nullptr);
}

// C rows [lo, hi) (split_rows) or columns [lo, hi) of C = op(A) @ op(B), all row-major.
template <class T>
void gemm_block(const T* a, const T* b, T* c, std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb,
                bool split_rows, std::int64_t lo, std::int64_t hi) {
  const std::int64_t bm = split_rows ? hi - lo : m, bn = split_rows ? n : hi - lo;
  if (bm < 16 || bn < 16 || k < 16) {
    // Thin or small: Eigen's expression picks a lazy product or GEMV (no big packing buffers).
    Map<T> C(c, m, n);
    auto run = [&](const auto& A, const auto& B) {
      if (split_rows) C.middleRows(lo, hi - lo).noalias() = A.middleRows(lo, hi - lo) * B;
      else C.middleCols(lo, hi - lo).noalias() = A * B.middleCols(lo, hi - lo);
    };
    if (!ta && !tb) run(ConstMap<T>(a, m, k), ConstMap<T>(b, k, n));
    else if (ta && !tb) run(ConstMap<T>(a, k, m).transpose(), ConstMap<T>(b, k, n));
    else if (!ta && tb) run(ConstMap<T>(a, m, k), ConstMap<T>(b, n, k).transpose());
    else run(ConstMap<T>(a, k, m).transpose(), ConstMap<T>(b, n, k).transpose());
    return;
  }
  // Lhs = op(B)^T: column-major [n, k] ld n, or row-major ld k when B is transposed.
  // Rhs = op(A)^T: column-major [k, m] ld k, or row-major ld m when A is transposed.
  const T* lhs = b;
  const T* rhs = a;
  Eigen::Index rows = n, cols = m;
  T* res = c;
  if (split_rows) {
    rhs += ta ? lo : lo * k;
    res += lo * n;
    cols = hi - lo;
    std::fill(res, res + cols * n, T(0));
  } else {
    lhs += tb ? lo * k : lo;
    res += lo;
    rows = hi - lo;
    for (std::int64_t i = 0; i < m; ++i) std::fill(res + i * n, res + i * n + rows, T(0));
  }
  constexpr int kCol = Eigen::ColMajor, kRow = Eigen::RowMajor;
  if (!ta && !tb) gemm_colmajor<T, kCol, kCol>(rows, cols, k, lhs, n, rhs, k, res, n);
  else if (ta && !tb) gemm_colmajor<T, kCol, kRow>(rows, cols, k, lhs, n, rhs, m, res, n);
  else if (!ta && tb) gemm_colmajor<T, kRow, kCol>(rows, cols, k, lhs, k, rhs, k, res, n);
  else gemm_colmajor<T, kRow, kRow>(rows, cols, k, lhs, k, rhs, m, res, n);
}

// kPerThread keeps the thresholds it had before the packed GEMM (the A/B baseline).
constexpr std::int64_t kPerThreadSerialWork = 32 * 1024;

}  // namespace

template <class T>
void matmul_eigen(const T* a, const T* b, T* c, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                  bool transpose_a, bool transpose_b, std::int64_t a_batch_stride, std::int64_t b_batch_stride,
                  EigenSplit split) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  if (k == 0) {
    std::fill(c, c + batch * m * n, T(0));
    return;
  }
  configure_eigen_cache();
  const std::int64_t work = m * n * k;
  const std::int64_t mn = m * n;
  auto one = [&](std::int64_t i, bool split_rows, std::int64_t lo, std::int64_t hi) {
    gemm_block(a + i * a_batch_stride, b + i * b_batch_stride, c + i * mn, m, k, n, transpose_a, transpose_b,
               split_rows, lo, hi);
  };
  const bool split_rows = m >= n;
  const std::int64_t dim = split_rows ? m : n;
  // Block edges on multiples of 8 keep Eigen's packed panels aligned.
  auto edge = [dim](std::int64_t u, std::int64_t parts) {
    return u == parts ? dim : std::min(dim, (dim * u / parts + 7) / 8 * 8);
  };
  if (split == EigenSplit::kFixed) {
    // Parts of >= kEigenPartWork multiply-adds, fixed by the shape alone.
    const std::int64_t max_parts = std::min<std::int64_t>(8, (dim + 7) / 8);
    const std::int64_t parts = std::clamp<std::int64_t>(work / kEigenPartWork, 1, max_parts);
    const std::int64_t grain = std::max<std::int64_t>(1, kMatmulSerialWork * parts / work);
    parallel_for(batch * parts, grain, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t t = s; t < e; ++t) {
        const std::int64_t i = t / parts, q = t % parts, lo = edge(q, parts), hi = edge(q + 1, parts);
        if (hi > lo) one(i, split_rows, lo, hi);
      }
    });
    return;
  }
  const int threads = num_threads();
  if (work * batch < kPerThreadSerialWork || threads <= 1) {
    for (std::int64_t i = 0; i < batch; ++i) one(i, true, 0, m);
    return;
  }
  if (batch >= threads || work < kPerThreadSerialWork) {
    // Parallel over whole products.
    const std::int64_t grain = std::max<std::int64_t>(1, kPerThreadSerialWork / work);
    parallel_for(batch, grain, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t i = s; i < e; ++i) one(i, true, 0, m);
    });
    return;
  }
  // Split the larger output dimension of each product into one block per thread.
  const std::int64_t tasks = std::min<std::int64_t>(threads, std::max<std::int64_t>(1, dim / 16));
  for (std::int64_t i = 0; i < batch; ++i) {
    parallel_for(tasks, 1, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t t = s; t < e; ++t) {
        const std::int64_t lo = edge(t, tasks), hi = edge(t + 1, tasks);
        if (hi > lo) one(i, split_rows, lo, hi);
      }
    });
  }
}

#define TAPEFLOW_INSTANTIATE(T)                                                                                    \
  template void matmul_eigen<T>(const T*, const T*, T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,    \
                                bool, bool, std::int64_t, std::int64_t, EigenSplit);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace internal
}  // namespace tapeflow::kernels
