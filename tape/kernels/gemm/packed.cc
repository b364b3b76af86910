// The packed GEMM's loops (gemm/internal/packed.h): the blocking from the cache sizes, the
// GotoBLAS loops over K, N and M blocks, the packing buffers and PackedB. The register tiles and
// the packing are the per-level micro-kernels of gemm/internal/tiles.h (tape/kernels/ukernels/),
// chosen once per call for cpu_isa(); this file holds no SIMD code.
#include "tape/kernels/gemm/internal/packed.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>

#include "tape/kernels/gemm/internal/tiles.h"
#include "tape/kernels/internal/conv_isa.h"  // TAPEFLOW_HAS_AVX2_KERNELS

namespace tapeflow::kernels::internal {
namespace {

constexpr std::int64_t kMR = kGemmMR;

// Reads a cache size like "32K" or "32768K" or "1M"; 0 if absent.
std::int64_t read_cache_size(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s.empty()) return 0;
  std::int64_t v = 0;
  std::size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) v = v * 10 + (s[i++] - '0');
  if (i < s.size() && (s[i] == 'K' || s[i] == 'k')) v *= 1024;
  else if (i < s.size() && (s[i] == 'M' || s[i] == 'm')) v *= 1024 * 1024;
  return v;
}

// The level's tiles for one block, the packing (avx2; gemm/internal/tiles.h).
template <class T>
using BlockFn = void (*)(const GemmBlock<T>&, GemmPrefetch&);

#if TAPEFLOW_HAS_AVX2_KERNELS
template <class T>
BlockFn<T> block_fn() {
#if !defined(TAPEFLOW_NO_AVX512_TILES)
  if (cpu_isa() == CpuIsa::kAvx512) return static_cast<BlockFn<T>>(&isa_avx512::uk::gemm_block);
#endif
  return static_cast<BlockFn<T>>(&isa_avx2::uk::gemm_block);
}
using isa_avx2::uk::pack_a;
using isa_avx2::uk::pack_a_rows;
using isa_avx2::uk::pack_b;
#else
[[noreturn]] inline void no_tiles() {
  throw std::logic_error("packed_gemm: this build has no AVX2 tiles (check packed_gemm_runs() first)");
}
template <class T>
BlockFn<T> block_fn() {
  no_tiles();
}
template <class T>
void pack_a(std::int64_t, std::int64_t, const T*, std::int64_t, bool, T*) {
  no_tiles();
}
template <class T>
void pack_a_rows(std::int64_t, std::int64_t, const T*, std::int64_t, const std::int64_t*, T*) {
  no_tiles();
}
template <class T>
void pack_b(std::int64_t, std::int64_t, const T*, std::int64_t, bool, T*) {
  no_tiles();
}
#endif

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

// Packs the block op(B)[pc:pc+kc, jc:jc+nc] into dst (pack_b's layout): per call in packed_gemm,
// once per block in PackedB.
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
  const BlockFn<T> run_block = block_fn<T>();
  const Blocking& mx = max_blocking<T>();
  const std::int64_t kc_step = kc_step_for<T>(k);
  const std::int64_t mc_step = balanced(m, mx.mc, kMR);
  const std::int64_t nc_step = nc_step_for<T>(n);
  // A is read in place when at most two B panels use each A panel: packing it would cost as
  // much as it saves (65536x32x16: 53 -> 84 GFLOP/s). Transposed A is always packed (in place,
  // each p would touch a new cache line for MR values).
  const bool pack_a_block = ta || n > 2 * NR;
  thread_local Scratch<T> a_buf;
  T* ap = a_buf.get(mc_step * kc_step + 8);  // + slack for pack_a
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
          GemmPrefetch none;
          run_block(GemmBlock<T>{mc, nc, kc, ablock, lda, false, bp, cblock, ldc, accumulate}, none);
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
        GemmPrefetch pf;
        if (next_a) {
          const std::int64_t next_mc = std::min(mc_step, m - next_ic), next_kc = std::min(kc_step, k - next_pc);
          const std::int64_t tile_count = ((mc + kMR - 1) / kMR) * ((nc + NR - 1) / NR);
          // next_mc rows of op(A), or next_kc rows of next_mc values of the stored A^T.
          pf = ta ? GemmPrefetch(next_a + next_pc * lda + next_ic, lda, next_kc, next_mc, tile_count)
                  : GemmPrefetch(next_a + next_ic * lda + next_pc, lda, next_mc, next_kc, tile_count);
        }
        if (a_rows)
          pack_a_rows(mc, kc, ablock, lda, a_rows + pc, ap);
        else
          pack_a(mc, kc, ablock, lda, ta, ap);
        run_block(GemmBlock<T>{mc, nc, kc, ap, kc, true, bp, cblock, ldc, accumulate}, pf);
      }
    }
  }
}

// The two packed_gemm overloads with a B-packing callback (a_rows: see gemm_driver).
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

const CacheSizes& cpu_cache_sizes() {
  static const CacheSizes sizes = [] {
    CacheSizes s;
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
      std::ifstream lf(dir + "level"), tf(dir + "type");
      int level = 0;
      std::string type;
      if (!(lf >> level) || !(tf >> type) || type == "Instruction") continue;
      const std::int64_t size = read_cache_size(dir + "size");
      if (level == 1) s.l1 = size;
      else if (level == 2) s.l2 = size;
      else if (level == 3) s.l3 = size;
    }
    return s;
  }();
  return sizes;
}

template <class T>
void packed_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, bool ta, const T* b,
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

template <class T>
void packed_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, bool ta,
                 PackBBlock<T> pack, const void* ctx, T* c, std::int64_t ldc) {
  gemm_packing_b(m, n, k, a, lda, ta, nullptr, pack, ctx, c, ldc);
}

template <class T>
void packed_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
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
void packed_gemm(std::int64_t m, const T* a, std::int64_t lda, bool ta, const PackedB<T>& b, T* c, std::int64_t ldc,
                 const T* a_next) {
  gemm_driver<T>(m, b.n(), b.k(), a, lda, ta,
                 [&](std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t) { return b.block(jc, pc, nc); }, c,
                 ldc, a_next);
}

#define TAPEFLOW_INSTANTIATE(T)                                                                                     \
  template class PackedB<T>;                                                                                        \
  template void packed_gemm<T>(std::int64_t, const T*, std::int64_t, bool, const PackedB<T>&, T*, std::int64_t,     \
                               const T*);                                                                           \
  template void packed_gemm<T>(std::int64_t, std::int64_t, std::int64_t, const T*, std::int64_t, bool, const T*,    \
                               std::int64_t, bool, T*, std::int64_t, const T*);                                     \
  template void packed_gemm<T>(std::int64_t, std::int64_t, std::int64_t, const T*, std::int64_t, bool,              \
                               PackBBlock<T>, const void*, T*, std::int64_t);                                       \
  template void packed_gemm<T>(std::int64_t, std::int64_t, std::int64_t, const T*, std::int64_t,                   \
                               const std::int64_t*, PackBBlock<T>, const void*, T*, std::int64_t);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::kernels::internal
