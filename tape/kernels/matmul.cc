#define EIGEN_DONT_PARALLELIZE
#include "tape/kernels/matmul.h"

#include <Eigen/Core>
#include <Eigen/LU>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>

#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {
namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMat<T>>;
template <class T>
using Map = Eigen::Map<RowMat<T>>;

// Reads a cache size like "32K" or "32768K" or "1M"; 0 if absent.
std::ptrdiff_t read_cache_size(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s.empty()) return 0;
  std::ptrdiff_t v = 0;
  std::size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) v = v * 10 + (s[i++] - '0');
  if (i < s.size() && (s[i] == 'K' || s[i] == 'k')) v *= 1024;
  else if (i < s.size() && (s[i] == 'M' || s[i] == 'm')) v *= 1024 * 1024;
  return v;
}

// C rows [r0, r1) = op(A) rows [r0, r1) @ op(B), or the same over columns of C.
template <class T>
void gemm_block(const T* a, const T* b, T* c, std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb,
                bool split_rows, std::int64_t lo, std::int64_t hi) {
  Map<T> C(c, m, n);
  auto run = [&](const auto& A, const auto& B) {
    if (split_rows) C.middleRows(lo, hi - lo).noalias() = A.middleRows(lo, hi - lo) * B;
    else C.middleCols(lo, hi - lo).noalias() = A * B.middleCols(lo, hi - lo);
  };
  if (!ta && !tb) run(ConstMap<T>(a, m, k), ConstMap<T>(b, k, n));
  else if (ta && !tb) run(ConstMap<T>(a, k, m).transpose(), ConstMap<T>(b, k, n));
  else if (!ta && tb) run(ConstMap<T>(a, m, k), ConstMap<T>(b, n, k).transpose());
  else run(ConstMap<T>(a, k, m).transpose(), ConstMap<T>(b, n, k).transpose());
}

}  // namespace

void configure_eigen_cache() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::ptrdiff_t l1 = 0, l2 = 0, l3 = 0;
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
      std::ifstream lf(dir + "level"), tf(dir + "type");
      int level = 0;
      std::string type;
      if (!(lf >> level) || !(tf >> type) || type == "Instruction") continue;
      const std::ptrdiff_t size = read_cache_size(dir + "size");
      if (level == 1) l1 = size;
      else if (level == 2) l2 = size;
      else if (level == 3) l3 = size;
    }
    if (l1 > 0 && l2 > 0) Eigen::setCpuCacheSizes(l1, l2, l3 > 0 ? l3 : l2);
  });
}

template <class T>
void matmul(const T* a, const T* b, T* c, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
            bool transpose_a, bool transpose_b, std::int64_t a_batch_stride, std::int64_t b_batch_stride) {
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
  const int threads = num_threads();
  if (work * batch < kMatmulSerialWork || threads <= 1) {
    for (std::int64_t i = 0; i < batch; ++i) one(i, true, 0, m);
    return;
  }
  if (batch >= threads || work < kMatmulSerialWork) {
    // Parallel over whole products.
    const std::int64_t grain = std::max<std::int64_t>(1, kMatmulSerialWork / work);
    parallel_for(batch, grain, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t i = s; i < e; ++i) one(i, true, 0, m);
    });
    return;
  }
  // Split the larger output dimension of each product into one block per thread.
  const bool split_rows = m >= n;
  const std::int64_t dim = split_rows ? m : n;
  const std::int64_t tasks = std::min<std::int64_t>(threads, std::max<std::int64_t>(1, dim / 16));
  for (std::int64_t i = 0; i < batch; ++i) {
    parallel_for(tasks, 1, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t t = s; t < e; ++t) {
        // Block edges on multiples of 8 keep Eigen's packed panels aligned.
        auto edge = [&](std::int64_t u) { return u == tasks ? dim : std::min(dim, (dim * u / tasks + 7) / 8 * 8); };
        const std::int64_t lo = edge(t), hi = edge(t + 1);
        if (hi > lo) one(i, split_rows, lo, hi);
      }
    });
  }
}

template <class T>
void solve(const T* a, const T* b, T* x, std::int64_t n, std::int64_t nrhs) {
  if (n < 0 || nrhs < 0)
    throw std::invalid_argument("solve: negative size n=" + std::to_string(n) + ", nrhs=" + std::to_string(nrhs));
  if (n == 0 || nrhs == 0) return;
  ConstMap<T> A(a, n, n);
  ConstMap<T> B(b, n, nrhs);
  if (!A.allFinite() || !B.allFinite())
    throw std::invalid_argument("solve: matrix is singular or non-finite (input has inf/nan), n=" + std::to_string(n));
  Eigen::PartialPivLU<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>> lu(A);
  const auto& U = lu.matrixLU();
  for (std::int64_t i = 0; i < n; ++i)
    if (U(i, i) == T(0))
      throw std::invalid_argument("solve: matrix is singular (zero pivot at row " + std::to_string(i) +
                                  "), n=" + std::to_string(n));
  Map<T> X(x, n, nrhs);
  X = lu.solve(B);
  if (!X.allFinite())
    throw std::invalid_argument("solve: matrix is singular (solution is not finite), n=" + std::to_string(n));
}

template void matmul<float>(const float*, const float*, float*, std::int64_t, std::int64_t, std::int64_t,
                            std::int64_t, bool, bool, std::int64_t, std::int64_t);
template void matmul<double>(const double*, const double*, double*, std::int64_t, std::int64_t, std::int64_t,
                             std::int64_t, bool, bool, std::int64_t, std::int64_t);
template void solve<float>(const float*, const float*, float*, std::int64_t, std::int64_t);
template void solve<double>(const double*, const double*, double*, std::int64_t, std::int64_t);

}  // namespace tapeflow::kernels
