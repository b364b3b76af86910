// Compiled for AVX2 + FMA only (tape/CMakeLists.txt, tapeflow_per_isa_sources); its exported
// functions are in internal::isa_avx2, and every other symbol that the baseline code could also
// define (inline functions and templates from std and project headers) is renamed in this object
// after compiling (cmake/isa_localize.cmake), so the linker never hands AVX2 code to a baseline caller.
#include "tape/kernels/internal/gemm_avx2.h"

#if !TAPEFLOW_GEMM_AVX2
#error "gemm_avx2.cc is compiled with -mavx2 -mfma only (tape/CMakeLists.txt)"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "tape/kernels/internal/gemm.h"
#include "tape/kernels/internal/simd512.h"
#include "tape/kernels/internal/gemm_pack_avx2.h"
#include "tape/kernels/ukernels/internal/gemm_tiles_512.h"

namespace tapeflow::kernels::internal::isa_avx2 {
namespace {

constexpr std::int64_t kMR = kGemmMR;

// C tile [R, W * L] (row stride ldc) = (accumulate ? C : 0) + sum_p A(0:R, p) * bp[p], one FMA
// per element and p, p ascending: the same arithmetic for every R and W, so edge tiles round like
// full ones. bp: kc groups of NR values, 64-byte aligned (W = 1 reads the first half).
template <class T, int R, int W, class Panel>
void micro_kernel(std::int64_t kc, Panel ap, const T* __restrict bp, T* __restrict c, std::int64_t ldc,
                  bool accumulate) {
  using S = Simd<T>;
  using V = typename S::V;
  constexpr int L = S::kLanes;
  V x[R][W];
  if (accumulate) {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w) x[i][w] = S::loadu(c + i * ldc + w * L);
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w) x[i][w] = S::zero();
      // The tile is written at the end; fetch its lines while the loop runs.
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + W * L - 1), _MM_HINT_T0);
    }
  }
#pragma GCC unroll 4
  for (std::int64_t p = 0; p < kc; ++p) {
    V b[W];
#pragma GCC unroll 2
    for (int w = 0; w < W; ++w) b[w] = S::load(bp + w * L);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const V a = S::bcast(ap.at(i));
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w) x[i][w] = S::fma(a, b[w], x[i][w]);
    }
    ap.next();
    bp += 2 * L;
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int w = 0; w < W; ++w) S::storeu(c + i * ldc + w * L, x[i][w]);
}

// micro_kernel with R = mr (1..MR) rows.
template <class T, int W, class Panel>
void rows_kernel(std::int64_t mr, std::int64_t kc, Panel ap, const T* bp, T* c, std::int64_t ldc, bool accumulate) {
  switch (mr) {
    case 6: return micro_kernel<T, 6, W>(kc, ap, bp, c, ldc, accumulate);
    case 5: return micro_kernel<T, 5, W>(kc, ap, bp, c, ldc, accumulate);
    case 4: return micro_kernel<T, 4, W>(kc, ap, bp, c, ldc, accumulate);
    case 3: return micro_kernel<T, 3, W>(kc, ap, bp, c, ldc, accumulate);
    case 2: return micro_kernel<T, 2, W>(kc, ap, bp, c, ldc, accumulate);
    default: return micro_kernel<T, 1, W>(kc, ap, bp, c, ldc, accumulate);
  }
}

// One tile of mr <= MR rows and nr <= NR columns. Widths of one or two vectors are stored in
// place; others go through a tile on the stack (only nr columns are copied back).
template <class T, class Panel>
void tile(std::int64_t mr, std::int64_t nr, std::int64_t kc, Panel ap, const T* bp, T* c, std::int64_t ldc,
          bool accumulate) {
  constexpr std::int64_t L = Simd<T>::kLanes, NR = kGemmNR<T>;
  if (nr == NR) return rows_kernel<T, 2>(mr, kc, ap, bp, c, ldc, accumulate);
  if (nr == L) return rows_kernel<T, 1>(mr, kc, ap, bp, c, ldc, accumulate);
  alignas(64) T buf[kMR * NR];
  if (accumulate)
    for (std::int64_t i = 0; i < mr; ++i) std::copy(c + i * ldc, c + i * ldc + nr, buf + i * NR);
  if (nr < L) rows_kernel<T, 1>(mr, kc, ap, bp, buf, NR, accumulate);
  else rows_kernel<T, 2>(mr, kc, ap, bp, buf, NR, accumulate);
  for (std::int64_t i = 0; i < mr; ++i) std::copy(buf + i * NR, buf + i * NR + nr, c + i * ldc);
}


// Grow-only 64-byte aligned scratch.
template <class T>
struct Scratch {
  T* data = nullptr;
  std::int64_t size = 0;
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::free(data); }
  T* get(std::int64_t n) {
    if (n > size) {
      std::free(data);
      const std::size_t bytes = (static_cast<std::size_t>(n) * sizeof(T) + 63) / 64 * 64;
      data = static_cast<T*>(std::aligned_alloc(64, bytes));
      if (!data) {
        size = 0;
        throw std::bad_alloc();
      }
      size = n;
    }
    return data;
  }
};

struct Blocking {
  std::int64_t kc, mc, nc;
};

// KC: one packed B micro-panel (KC x NR) fills 3/4 of L1 (1/2 measured 1-2% slower at k >= 512);
// MC: the packed A block (MC x KC) half of L2; NC: the packed B block (KC x NC) a quarter of L3.
template <class T>
const Blocking& max_blocking() {
  static const Blocking b = [] {
    const CacheSizes& cs = cpu_cache_sizes();
    const std::int64_t l1 = cs.l1 > 0 ? cs.l1 : 32 * 1024, l2 = cs.l2 > 0 ? cs.l2 : 512 * 1024;
    const std::int64_t l3 = cs.l3 > 0 ? cs.l3 : 4 * l2;
    constexpr std::int64_t NR = kGemmNR<T>;
    Blocking r;
    r.kc = std::clamp<std::int64_t>(l1 * 3 / 4 / (NR * sizeof(T)) / 8 * 8, 64, 1024);
    r.mc = std::clamp<std::int64_t>(l2 / 2 / (r.kc * sizeof(T)) / kMR * kMR, kMR * 4, 1020);
    r.nc = std::clamp<std::int64_t>(l3 / 4 / (r.kc * sizeof(T)) / NR * NR, NR * 16, 8192);
    return r;
  }();
  return b;
}

// n split into ceil(n / cap) near-equal blocks, rounded up to a multiple of unit.
std::int64_t balanced(std::int64_t n, std::int64_t cap, std::int64_t unit) {
  const std::int64_t blocks = (n + cap - 1) / cap;
  const std::int64_t size = (n + blocks - 1) / blocks;
  return (size + unit - 1) / unit * unit;
}

// Fetches the next block of A into L2 a few lines per tile, so that it arrives while the current
// block is multiplied (16384x128x64: 72 -> 84 GFLOP/s): `rows` rows of `lines_per_row` cache
// lines, `stride` bytes apart. Default-constructed it does nothing.
struct Prefetcher {
  const char* base = nullptr;
  std::int64_t stride = 0, rows = 0, lines_per_row = 0, per_step = 0, row = 0, line = 0;
  template <class T>
  Prefetcher(const T* block, std::int64_t ld, std::int64_t block_rows, std::int64_t row_len, std::int64_t tiles)
      : base(reinterpret_cast<const char*>(block)),
        stride(ld * static_cast<std::int64_t>(sizeof(T))),
        rows(block_rows),
        lines_per_row((row_len * static_cast<std::int64_t>(sizeof(T)) + 63) / 64),
        per_step((block_rows * lines_per_row + tiles - 1) / tiles) {}
  Prefetcher() = default;
  void step() {
    for (std::int64_t s = 0; s < per_step && row < rows; ++s) {
      _mm_prefetch(base + row * stride + line * 64, _MM_HINT_T1);
      if (++line == lines_per_row) line = 0, ++row;
    }
  }
};

// The MR x NR tiles of C [mc, nc] (row stride ldc) for one K block: B packed, A through `panel(ir)`.
template <class T, class PanelAt>
void tiles(std::int64_t mc, std::int64_t nc, std::int64_t kc, PanelAt panel, const T* bp, T* c, std::int64_t ldc,
           bool accumulate, Prefetcher& pf) {
  constexpr std::int64_t NR = kGemmNR<T>;
  // Floats on AVX-512: two B panels per tile while two full ones remain (simd512.h).
  const bool wide = avx512_tiles<T>();
  for (std::int64_t jr = 0; jr < nc;) {
    const std::int64_t nr = std::min(NR, nc - jr), width = wide && nc - jr >= 2 * NR ? 2 * NR : NR;
    const T* bpanel = bp + jr * kc;
    for (std::int64_t ir = 0; ir < mc; ir += kMR) {
      const std::int64_t mr = std::min(kMR, mc - ir);
      if (accumulate) {
        // The next tile starts by loading its C, which a large C (a filter gradient's [256, 3200])
        // holds far from L1: fetch it while this tile runs (W9 convT1's filter gradient on one
        // thread: 207 -> 150 ms; 1024^3 product: 38 -> 29 ms).
        const std::int64_t ni = ir + kMR < mc ? ir + kMR : 0, nj = ir + kMR < mc ? jr : jr + width;
        if (nj < nc)
          for (std::int64_t i = ni; i < std::min(ni + kMR, mc); ++i) {
            const T* row = c + i * ldc + nj;
            _mm_prefetch(reinterpret_cast<const char*>(row), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(row + NR - 1), _MM_HINT_T0);
            if (width > NR) _mm_prefetch(reinterpret_cast<const char*>(row + 2 * NR - 1), _MM_HINT_T0);
          }
      }
#if TAPEFLOW_HAVE_AVX512_KERNELS
      if constexpr (std::is_same_v<T, float>)
        if (width > NR) {
          tile_512(mr, kc, panel(ir), bpanel, c + ir * ldc + jr, ldc, accumulate);
          pf.step();
          continue;
        }
#endif
      tile<T>(mr, nr, kc, panel(ir), bpanel, c + ir * ldc + jr, ldc, accumulate);
      pf.step();
    }
    jr += width;
  }
}

// Packs the block op(B)[pc:pc+kc, jc:jc+nc] into dst (pack_b's layout): per call in gemm_avx2, once
// per block in PackedB.
template <class T>
void pack_b_block(const T* b, std::int64_t ldb, bool tb, std::int64_t jc, std::int64_t nc, std::int64_t pc,
                  std::int64_t kc, T* dst) {
  pack_b(kc, nc, tb ? b + jc * ldb + pc : b + pc * ldb + jc, ldb, tb, dst);
}

// K and N block sizes for op(B) [k, n]: a function of k and n alone (PackedB relies on it).
template <class T>
std::int64_t kc_step_for(std::int64_t k) {
  return balanced(k, max_blocking<T>().kc, 1);
}
template <class T>
std::int64_t nc_step_for(std::int64_t n) {
  return balanced(n, max_blocking<T>().nc, kGemmNR<T>);
}

// The GotoBLAS loops; b_block(jc, nc, pc, kc) gives op(B)[pc:pc+kc, jc:jc+nc] packed (pack_b's layout).
// a_rows (ta only; null: none): op(A)'s column p is row a_rows[p] of the stored A.
template <class T, class BBlock>
void gemm_driver(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, bool ta, BBlock b_block,
                 T* c, std::int64_t ldc, const T* a_next, const std::int64_t* a_rows = nullptr) {
  constexpr std::int64_t NR = kGemmNR<T>;
  const Blocking& mx = max_blocking<T>();
  const std::int64_t kc_step = kc_step_for<T>(k);
  const std::int64_t mc_step = balanced(m, mx.mc, kMR);
  const std::int64_t nc_step = nc_step_for<T>(n);
  // A is read in place when at most two B panels use each A panel: packing it would cost as
  // much as it saves (65536x32x16: 53 -> 84 GFLOP/s). Transposed A is always packed (in place,
  // each p would touch a new cache line for MR values).
  const bool pack_a_block = ta || n > 2 * NR;
  thread_local Scratch<T> a_buf;
  T* ap = a_buf.get(mc_step * kc_step + 8);  // + slack for pack_rows
  for (std::int64_t jc = 0; jc < n; jc += nc_step) {
    const std::int64_t nc = std::min(nc_step, n - jc);
    for (std::int64_t pc = 0; pc < k; pc += kc_step) {
      const std::int64_t kc = std::min(kc_step, k - pc);
      const bool accumulate = pc > 0;
      const T* bp = b_block(jc, nc, pc, kc);
      for (std::int64_t ic = 0; ic < m; ic += mc_step) {
        const std::int64_t mc = std::min(mc_step, m - ic);
        const T* ablock = a_rows ? a + ic : ta ? a + pc * lda + ic : a + ic * lda + pc;
        T* cblock = c + ic * ldc + jc;
        if (!pack_a_block) {
          Prefetcher none;
          tiles(mc, nc, kc, [&](std::int64_t ir) { return RowsPanel<T>{ablock + ir * lda, lda}; }, bp, cblock, ldc,
                accumulate, none);
          continue;
        }
        // The A block packed next: rows ic + mc.. of this K block, else the first rows of the next
        // K block, else (last block of the call) the first block of a_next (64 x 256x128x64:
        // 64 -> 76 GFLOP/s).
        const T* next_a = a_rows ? nullptr : a;  // (no prefetch through a row table)
        std::int64_t next_ic = ic + mc, next_pc = pc;
        if (next_ic >= m) {
          next_ic = 0;
          next_pc = pc + kc < k ? pc + kc : 0;
          if (pc + kc >= k && jc + nc >= n) next_a = a_next;
        }
        Prefetcher pf;
        if (next_a) {
          const std::int64_t next_mc = std::min(mc_step, m - next_ic), next_kc = std::min(kc_step, k - next_pc);
          const std::int64_t tile_count = ((mc + kMR - 1) / kMR) * ((nc + NR - 1) / NR);
          // next_mc rows of op(A), or next_kc rows of next_mc values of the stored A^T.
          pf = ta ? Prefetcher(next_a + next_pc * lda + next_ic, lda, next_kc, next_mc, tile_count)
                  : Prefetcher(next_a + next_ic * lda + next_pc, lda, next_mc, next_kc, tile_count);
        }
        if (a_rows)
          pack_a_rows(mc, kc, ablock, lda, a_rows + pc, ap);
        else
          pack_a(mc, kc, ablock, lda, ta, ap);
        tiles(mc, nc, kc, [&](std::int64_t ir) { return PackedPanel<T>{ap + ir * kc}; }, bp, cblock, ldc, accumulate,
              pf);
      }
    }
  }
}

}  // namespace

template <class T>
void gemm_avx2(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, bool ta, const T* b,
               std::int64_t ldb, bool tb, T* c, std::int64_t ldc, const T* a_next) {
  thread_local Scratch<T> b_buf;
  T* bp = b_buf.get(kc_step_for<T>(k) * nc_step_for<T>(n));
  gemm_driver<T>(m, n, k, a, lda, ta,
                 [&](std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t kc) {
                   pack_b_block(b, ldb, tb, jc, nc, pc, kc, bp);
                   return static_cast<const T*>(bp);
                 },
                 c, ldc, a_next);
}

namespace {
// The two gemm_avx2 overloads with a B-packing callback (a_rows: see gemm_driver).
template <class T>
void gemm_packing_b(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, bool ta,
                    const std::int64_t* a_rows, PackBBlock<T> pack, const void* ctx, T* c, std::int64_t ldc) {
  thread_local Scratch<T> b_buf;
  T* bp = b_buf.get(kc_step_for<T>(k) * nc_step_for<T>(n));
  gemm_driver<T>(m, n, k, a, lda, ta,
                 [&](std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t kc) {
                   pack(ctx, jc, nc, pc, kc, bp);
                   return static_cast<const T*>(bp);
                 },
                 c, ldc, nullptr, a_rows);
}
}  // namespace

template <class T>
void gemm_avx2(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, bool ta,
               PackBBlock<T> pack, const void* ctx, T* c, std::int64_t ldc) {
  gemm_packing_b(m, n, k, a, lda, ta, nullptr, pack, ctx, c, ldc);
}

template <class T>
void gemm_avx2(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
               const std::int64_t* a_rows, PackBBlock<T> pack, const void* ctx, T* c, std::int64_t ldc) {
  gemm_packing_b(m, n, k, a, lda, true, a_rows, pack, ctx, c, ldc);
}

// Layout: N blocks of nc_step columns in order; each holds all of K (its K blocks in order), every
// K block kc x nc rounded up to NR columns, as pack_b writes it. Block (jc, pc) thus starts at
// jc * k + pc * round_up(nc, NR), since every N block before jc is a full, NR-aligned nc_step.
template <class T>
PackedB<T>::PackedB(std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb, bool tb) : k_(k), n_(n) {
  constexpr std::int64_t NR = kGemmNR<T>;
  const std::int64_t kc_step = kc_step_for<T>(k), nc_step = nc_step_for<T>(n);
  const std::int64_t padded = (n + NR - 1) / NR * NR;
  const std::size_t bytes = (static_cast<std::size_t>(k * padded) * sizeof(T) + 63) / 64 * 64;
  data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
  if (!data_) throw std::bad_alloc();
  for (std::int64_t jc = 0; jc < n; jc += nc_step) {
    const std::int64_t nc = std::min(nc_step, n - jc);
    for (std::int64_t pc = 0; pc < k; pc += kc_step) {
      const std::int64_t kc = std::min(kc_step, k - pc);
      pack_b_block(b, ldb, tb, jc, nc, pc, kc, const_cast<T*>(block(jc, pc, nc)));
    }
  }
}
template <class T>
PackedB<T>::~PackedB() {
  std::free(data_);
}
template <class T>
const T* PackedB<T>::block(std::int64_t jc, std::int64_t pc, std::int64_t nc) const {
  constexpr std::int64_t NR = kGemmNR<T>;
  return data_ + jc * k_ + pc * ((nc + NR - 1) / NR * NR);
}

template <class T>
void gemm_avx2(std::int64_t m, const T* a, std::int64_t lda, bool ta, const PackedB<T>& b, T* c, std::int64_t ldc,
               const T* a_next) {
  gemm_driver<T>(m, b.n(), b.k(), a, lda, ta,
                 [&](std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t) { return b.block(jc, pc, nc); }, c,
                 ldc, a_next);
}

template class PackedB<float>;
template class PackedB<double>;
template void gemm_avx2<float>(std::int64_t, const float*, std::int64_t, bool, const PackedB<float>&, float*,
                               std::int64_t, const float*);
template void gemm_avx2<double>(std::int64_t, const double*, std::int64_t, bool, const PackedB<double>&, double*,
                                std::int64_t, const double*);
template void gemm_avx2<float>(std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, bool,
                               const float*, std::int64_t, bool, float*, std::int64_t, const float*);
template void gemm_avx2<float>(std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, bool,
                               PackBBlock<float>, const void*, float*, std::int64_t);
template void gemm_avx2<double>(std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t, bool,
                                PackBBlock<double>, const void*, double*, std::int64_t);
template void gemm_avx2<double>(std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t, bool,
                                const double*, std::int64_t, bool, double*, std::int64_t, const double*);
template void gemm_avx2<float>(std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t,
                               const std::int64_t*, PackBBlock<float>, const void*, float*, std::int64_t);
template void gemm_avx2<double>(std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t,
                                const std::int64_t*, PackBBlock<double>, const void*, double*, std::int64_t);

}  // namespace tapeflow::kernels::internal::isa_avx2
