// The packed GEMM (GotoBLAS / BLIS scheme), float and double, row-major: the product the other
// kernels (matmul, the convolutions, the LSTM, Cholesky) call directly.
// Shapes:   C [m, n] (row stride ldc) = op(A) [m, k] @ op(B) [k, n], with
//           op(A)(i, p) = ta ? a[p * lda + i] : a[i * lda + p] and
//           op(B)(p, j) = tb ? b[j * ldb + p] : b[p * ldb + j]. C is overwritten (beta = 0);
//           m, n, k >= 1.
// Facts:    Runs at the kernels' level avx2 or better (packed_gemm_runs(): callers check first).
//           The loops, packing buffers and blocking are gemm/packed.cc; the register tiles are
//           one source over ukernels/internal/vec.h (ukernels/gemm.cc), compiled per level:
//           kGemmMR x 2 vectors, i.e. 6 x 16 floats / 6 x 8 doubles at avx2 and 6 x 32 / 6 x 16
//           at avx512 (two adjacent B panels); the packing is
//           ukernels/gemm_pack.cc (avx2). B is packed in KC x NR panels, A in MC x KC blocks of
//           MR-row panels (read in place when n <= 2 NR and A is not transposed); KC, MC, NC from
//           the cache sizes in /sys (cpu_cache_sizes).
//           Serial on the calling thread; packing buffers are thread_local and only grow, so
//           repeated calls do not allocate.
//           Each element of C is one FMA chain c = fma(a_p, b_p, c) over p = 0, 1, ..., k-1
//           from c = 0; between K blocks the chain goes through C unchanged. Its bits therefore
//           depend on neither the blocking, nor m, n, nor the tile it falls in, nor the level
//           (avx2 and avx512 fuse alike): callers may split C into calls (threads) freely and get
//           the same result.
//           TAPEFLOW_GEMM_AVX2 says whether the including file itself is compiled for AVX2 + FMA
//           (the per-level kernels whose avx2 copy calls the packed GEMM).
#pragma once

#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#define TAPEFLOW_GEMM_AVX2 1
#else
#define TAPEFLOW_GEMM_AVX2 0
#endif

#include "tape/core/cpu_isa.h"

namespace tapeflow::kernels::internal {

struct CacheSizes {
  std::int64_t l1 = 0, l2 = 0, l3 = 0;  // data caches, bytes
};
// Reads /sys/devices/system/cpu/cpu0/cache once (thread-safe); a level that is absent reads 0.
// (The VM reports a bogus L3 through cpuid, so /sys is the source.) Eigen's blocking uses them too.
const CacheSizes& cpu_cache_sizes();

// Whether packed_gemm may run: the build has the per-level tiles and the kernels' level
// (tape/core/cpu_isa.h) is AVX2 or better.
inline bool packed_gemm_runs() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  return cpu_isa() >= CpuIsa::kAvx2;
#else
  return false;
#endif
}

// Micro-tile rows (MR) and the columns of one packed B panel (NR) for T: the avx2 tile's width.
inline constexpr std::int64_t kGemmMR = 6;
template <class T>
inline constexpr std::int64_t kGemmNR = 32 / sizeof(T) * 2;

// a_next: the A of the call that follows on this thread (same m, k, lda, ta), or null; its first
// block is fetched into L2 while this call ends.
template <class T>
void packed_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, bool ta, const T* b,
                 std::int64_t ldb, bool tb, T* c, std::int64_t ldc, const T* a_next = nullptr);

// op(B) [k, n] packed once, in the layout packed_gemm packs it into for every call (its K and N
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

// packed_gemm with B packed beforehand: bit-identical to packed_gemm(m, b.n(), b.k(), a, ..., B, ...).
template <class T>
void packed_gemm(std::int64_t m, const T* a, std::int64_t lda, bool ta, const PackedB<T>& b, T* c, std::int64_t ldc,
                 const T* a_next = nullptr);

// Writes op(B)[pc:pc+kc, jc:jc+nc] in the packed layout: ceil(nc / kGemmNR) panels one after the
// other, panel q holding kc groups of kGemmNR values (row pc + p, columns jc + q NR ..), zeros past nc.
template <class T>
using PackBBlock = void (*)(const void* ctx, std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t kc,
                            T* dst);

// packed_gemm with op(B) [k, n] packed block by block by `pack(ctx, ...)`, on the calling thread:
// for a B that is never stored whole, such as a convolution's patch matrix, which the filter
// gradient packs straight from the image. Same arithmetic (and bits) as packed_gemm on the stored B.
template <class T>
void packed_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, bool ta,
                 PackBBlock<T> pack, const void* ctx, T* c, std::int64_t ldc);

// The same with op(A) = Aᵀ over a subset of the stored A's rows: op(A)(i, p) = a[a_rows[p] * lda + i]
// for p < k, so a product over some of a matrix's rows (the filter gradient over the pixels whose
// gradient is not all zero) needs no gathered copy. Same arithmetic (and bits) as packed_gemm with
// ta on the gathered rows.
template <class T>
void packed_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
                 const std::int64_t* a_rows, PackBBlock<T> pack, const void* ctx, T* c, std::int64_t ldc);

}  // namespace tapeflow::kernels::internal
