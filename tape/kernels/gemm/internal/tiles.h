// The packed GEMM's per-level parts (gemm/internal/packed.h: the product), between its loops
// (gemm/packed.cc) and the micro-kernel library (tape/kernels/ukernels/):
//   gemm_block (ukernels/gemm.cc): the macro kernel, all register tiles of one packed block,
//     one template over ukernels/internal/vec.h compiled per level: isa_avx2::uk and
//     isa_avx512::uk, float and double;
//   pack_a, pack_a_rows, pack_b (ukernels/gemm_pack.cc): the packing, AVX2 only (isa_avx2::uk;
//     a copy, so its level changes no bit).
// Layouts:  pack_a writes kc groups of kGemmMR values per row panel (zero padded past mc), pack_b
//           kc groups of kGemmNR<T> values per column panel (zero padded past nc), 64-byte
//           aligned; pack_a and pack_a_rows may write up to 8 values past the end (callers leave
//           that slack).
// Facts:    Every element of a tile is the same FMA chain at every level (packed.h); the avx512
//           tiles span two adjacent B panels (32 floats / 16 doubles) and are the only ones with
//           AVX-512 instructions (CTest kernels.avx512_only_in_per_isa_objects).
#pragma once


#include <cstdint>

#include "tape/kernels/gemm/internal/packed.h"

namespace tapeflow::kernels {
namespace internal {

// Fetches the next block of A into L2 a few lines per tile, so that it arrives while the current
// block is multiplied (16384x128x64: 72 -> 84 GFLOP/s): `rows` rows of `lines_per_row` cache
// lines, `stride` bytes apart. Default-constructed it does nothing.
struct GemmPrefetch {
  const char* base = nullptr;
  std::int64_t stride = 0, rows = 0, lines_per_row = 0, per_step = 0, row = 0, line = 0;
  template <class T>
  GemmPrefetch(const T* block, std::int64_t ld, std::int64_t block_rows, std::int64_t row_len, std::int64_t tiles)
      : base(reinterpret_cast<const char*>(block)),
        stride(ld * static_cast<std::int64_t>(sizeof(T))),
        rows(block_rows),
        lines_per_row((row_len * static_cast<std::int64_t>(sizeof(T)) + 63) / 64),
        per_step((block_rows * lines_per_row + tiles - 1) / tiles) {}
  GemmPrefetch() = default;
  // After each tile.
  void step() {
    for (std::int64_t s = 0; s < per_step && row < rows; ++s) {
      __builtin_prefetch(base + row * stride + line * 64, 0, 2);  // prefetcht1: into L2
      if (++line == lines_per_row) line = 0, ++row;
    }
  }
};

// One block of the product for gemm_block: C [mc, nc] (row stride ldc) = (accumulate ? C : 0) +
// A [mc, kc] x B [kc, nc], B packed (pack_b's layout), A packed (a_packed: pack_a's layout) or
// read in place (row i at a + i * lda, not transposed).
template <class T>
struct GemmBlock {
  std::int64_t mc, nc, kc;
  const T* a;
  std::int64_t lda;
  bool a_packed;
  const T* bp;
  T* c;
  std::int64_t ldc;
  bool accumulate;
};

}  // namespace internal

#define TAPEFLOW_GEMM_BLOCK_DECLARE(T) \
  void gemm_block(const internal::GemmBlock<T>& block, internal::GemmPrefetch& prefetch);

namespace isa_avx2::uk {
TAPEFLOW_GEMM_BLOCK_DECLARE(float)
TAPEFLOW_GEMM_BLOCK_DECLARE(double)
// op(A)[0:mc, 0:kc] (ta: A stored transposed, row stride lda) into row panels.
template <class T>
void pack_a(std::int64_t mc, std::int64_t kc, const T* a, std::int64_t lda, bool ta, T* dst);
// pack_a for op(A) = Aᵀ read through a row table: element (i, p) = a[rows[p] * lda + i].
template <class T>
void pack_a_rows(std::int64_t mc, std::int64_t kc, const T* a, std::int64_t lda, const std::int64_t* rows, T* dst);
// op(B)[0:kc, 0:nc] (tb: B stored transposed, row stride ldb) into column panels.
template <class T>
void pack_b(std::int64_t kc, std::int64_t nc, const T* b, std::int64_t ldb, bool tb, T* dst);
}  // namespace isa_avx2::uk
namespace isa_avx512::uk {
TAPEFLOW_GEMM_BLOCK_DECLARE(float)
TAPEFLOW_GEMM_BLOCK_DECLARE(double)
}  // namespace isa_avx512::uk

#undef TAPEFLOW_GEMM_BLOCK_DECLARE

}  // namespace tapeflow::kernels
