// Internal pieces of kernels::matmul shared by its two back ends.
// Facts:    cpu_cache_sizes reads /sys/devices/system/cpu/cpu0/cache once (thread-safe); a level
//           that is absent reads 0. (The VM reports a bogus L3 through cpuid, so /sys is the source.)
//           matmul_eigen is matmul on Eigen's products (GEMM with per-thread packing buffers; lazy
//           product or GEMV for thin blocks), with matmul's signature and contract. The split:
//           kFixed cuts the larger output dimension into parts fixed by the shape alone (parts of
//           >= kEigenPartWork multiply-adds), so results do not depend on the thread count;
//           kPerThread (the path before the AVX2 kernel, kept for A/B benchmarks) cuts it into
//           one block per thread, and the last bits then change with the thread count.
#pragma once

#include <cstdint>

namespace tapeflow::kernels::internal {

struct CacheSizes {
  std::int64_t l1 = 0, l2 = 0, l3 = 0;  // data caches, bytes
};
const CacheSizes& cpu_cache_sizes();

inline constexpr std::int64_t kEigenPartWork = 256 * 1024;
enum class EigenSplit { kFixed, kPerThread };

template <class T>
void matmul_eigen(const T* a, const T* b, T* c, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                  bool transpose_a, bool transpose_b, std::int64_t a_batch_stride, std::int64_t b_batch_stride,
                  EigenSplit split);

}  // namespace tapeflow::kernels::internal
