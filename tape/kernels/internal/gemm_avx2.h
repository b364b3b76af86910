// Packed GEMM for AVX2 + FMA (GotoBLAS / BLIS scheme), float and double, row-major.
// Shapes:   C [m, n] (row stride ldc) = op(A) [m, k] @ op(B) [k, n], with
//           op(A)(i, p) = ta ? a[p * lda + i] : a[i * lda + p] and
//           op(B)(p, j) = tb ? b[j * ldb + p] : b[p * ldb + j]. C is overwritten (beta = 0);
//           m, n, k >= 1.
// Facts:    Compiled for AVX2 + FMA only (tape/CMakeLists.txt: per-level sources), in every
//           build: callers must check cpu_isa() >= CpuIsa::kAvx2 (gemm_avx2_runs()) first.
//           TAPEFLOW_GEMM_AVX2 says whether the including file itself is compiled for AVX2 + FMA.
//           Register tile kGemmMR x kGemmNR (6 x 16 floats / 6 x 8 doubles, 12 ymm accumulators,
//           A broadcast, B loaded); for floats on a CPU with AVX-512F, tiles of 6 x 32 (two
//           adjacent B panels, 12 zmm accumulators) while two full panels remain (simd512.h);
//           B packed in KC x NR panels, A in MC x KC blocks of MR-row
//           panels (read in place when n <= 2 NR and A is not transposed); KC, MC, NC from the
//           cache sizes in /sys (cpu_cache_sizes).
//           Serial on the calling thread; packing buffers are thread_local and only grow, so
//           repeated calls do not allocate.
//           Each element of C is one FMA chain c = fma(a_p, b_p, c) over p = 0, 1, ..., k-1
//           from c = 0; between K blocks the chain goes through C unchanged. Its bits therefore
//           depend on neither the blocking, nor m, n, nor the tile it falls in: callers may
//           split C into calls (threads) freely and get the same result.
#pragma once

#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#define TAPEFLOW_GEMM_AVX2 1
#else
#define TAPEFLOW_GEMM_AVX2 0
#endif

#include "tape/core/cpu_isa.h"

namespace tapeflow::kernels::internal {

// Whether gemm_avx2 may run: the kernels' level is AVX2 or better (tape/core/cpu_isa.h).
inline bool gemm_avx2_runs() { return cpu_isa() >= CpuIsa::kAvx2; }

// Everything in this namespace is compiled for AVX2 (isa_ namespaces: see tape/CMakeLists.txt).
namespace isa_avx2 {
// Micro-tile rows (MR) and columns (NR) of the kernel for T.
inline constexpr std::int64_t kGemmMR = 6;
template <class T>
inline constexpr std::int64_t kGemmNR = 32 / sizeof(T) * 2;

// a_next: the A of the call that follows on this thread (same m, k, lda, ta), or null; its first
// block is fetched into L2 while this call ends.
template <class T>
void gemm_avx2(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, bool ta, const T* b,
               std::int64_t ldb, bool tb, T* c, std::int64_t ldc, const T* a_next = nullptr);

// op(B) [k, n] packed once, in the layout gemm_avx2 packs it into for every call (its K and N
// blocking depends on k and n only, never on m), for many products with different A: a
// convolution multiplies its filter with every patch tile, and packing a 3.2 MB filter for each
// 10-row tile cost as much as the tile's product. Read-only once built: threads share it.
// Memory: k x n rounded up to kGemmNR columns.
template <class T>
class PackedB {
 public:
  PackedB(std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb, bool tb);
  ~PackedB();
  PackedB(const PackedB&) = delete;
  PackedB& operator=(const PackedB&) = delete;
  std::int64_t k() const { return k_; }
  std::int64_t n() const { return n_; }
  // The packed K block starting at row pc of the N block starting at column jc.
  const T* block(std::int64_t jc, std::int64_t pc, std::int64_t nc) const;

 private:
  std::int64_t k_, n_;
  T* data_ = nullptr;
};

// gemm_avx2 with B packed beforehand: bit-identical to gemm_avx2(m, b.n(), b.k(), a, ..., B, ...).
template <class T>
void gemm_avx2(std::int64_t m, const T* a, std::int64_t lda, bool ta, const PackedB<T>& b, T* c, std::int64_t ldc,
               const T* a_next = nullptr);

// Writes op(B)[pc:pc+kc, jc:jc+nc] in the packed layout: ceil(nc / kGemmNR) panels one after the
// other, panel q holding kc groups of kGemmNR values (row pc + p, columns jc + q NR ..), zeros past nc.
template <class T>
using PackBBlock = void (*)(const void* ctx, std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t kc,
                            T* dst);

// gemm_avx2 with op(B) [k, n] packed block by block by `pack(ctx, ...)`, on the calling thread: for
// a B that is never stored whole, such as a convolution's patch matrix, which the filter gradient
// packs straight from the image. Same arithmetic (and bits) as gemm_avx2 on the stored B.
template <class T>
void gemm_avx2(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, bool ta,
               PackBBlock<T> pack, const void* ctx, T* c, std::int64_t ldc);

// The same with op(A) = Aᵀ over a subset of the stored A's rows: op(A)(i, p) = a[a_rows[p] * lda + i]
// for p < k, so a product over some of a matrix's rows (the filter gradient over the pixels whose
// gradient is not all zero) needs no gathered copy. Same arithmetic (and bits) as gemm_avx2 with
// ta on the gathered rows.
template <class T>
void gemm_avx2(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
               const std::int64_t* a_rows, PackBBlock<T> pack, const void* ctx, T* c, std::int64_t ldc);

}  // namespace isa_avx2

using isa_avx2::gemm_avx2;
using isa_avx2::kGemmMR;
using isa_avx2::kGemmNR;
using isa_avx2::PackBBlock;
using isa_avx2::PackedB;

}  // namespace tapeflow::kernels::internal
