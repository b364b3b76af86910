#include "tape/kernels/rnn.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tape/core/tensor.h"
#include "tape/kernels/internal/conv_isa.h"  // TAPEFLOW_HAS_AVX2_KERNELS
#include "tape/kernels/gemm/internal/packed.h"
#include "tape/kernels/matmul.h"
#include "tape/kernels/parallel.h"
#include "tape/kernels/ukernels/internal/lstm_cell.h"

namespace tapeflow::kernels {

namespace {

// The float cell rows of cpu_isa()'s level (ukernels/lstm_cell.cc).
struct FloatCellRows {
  decltype(&isa_baseline::uk::lstm_cell_rows) forward;
  decltype(&isa_baseline::uk::lstm_cell_grad_rows) backward;
};
FloatCellRows float_cell_rows() {
#if TAPEFLOW_HAS_AVX2_KERNELS
#if !defined(TAPEFLOW_NO_AVX512_TILES)
  if (cpu_isa() == CpuIsa::kAvx512) return {isa_avx512::uk::lstm_cell_rows, isa_avx512::uk::lstm_cell_grad_rows};
#endif
  if (cpu_isa() >= CpuIsa::kAvx2) return {isa_avx2::uk::lstm_cell_rows, isa_avx2::uk::lstm_cell_grad_rows};
#endif
  return {isa_baseline::uk::lstm_cell_rows, isa_baseline::uk::lstm_cell_grad_rows};
}

// Scratch of n elements from Buffer::allocate (large blocks are reused, not fresh pages that fault).
template <class T>
struct Scratch {
  explicit Scratch(std::int64_t n) : buf(Buffer::allocate(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(T))) {}
  T* get() const { return static_cast<T*>(buf->data()); }
  std::shared_ptr<Buffer> buf;
};

// The gate activations of one row: σ on i, f, o and tanh on g; Eigen's packet logistic / tanh for
// float (as the Sigmoid and Tanh ops), the scalar functions for double.
template <class T>
void gate_activations(const T* zr, T* gr, std::int64_t u) {
  if constexpr (std::is_same_v<T, float>) {
    using Map = Eigen::Map<Eigen::ArrayXf>;
    using CMap = Eigen::Map<const Eigen::ArrayXf>;
    Map(gr, 2 * u) = CMap(zr, 2 * u).logistic();
    Map(gr + 2 * u, u) = CMap(zr + 2 * u, u).tanh();
    Map(gr + 3 * u, u) = CMap(zr + 3 * u, u).logistic();
  } else {
    const auto sig = [](T v) { return v >= 0 ? T(1) / (T(1) + std::exp(-v)) : std::exp(v) / (T(1) + std::exp(v)); };
    for (std::int64_t j = 0; j < 2 * u; ++j) gr[j] = sig(zr[j]);
    for (std::int64_t j = 2 * u; j < 3 * u; ++j) gr[j] = std::tanh(zr[j]);
    for (std::int64_t j = 3 * u; j < 4 * u; ++j) gr[j] = sig(zr[j]);
  }
}

// One row of lstm_cell: zr [4u], cp [u] -> hr, cr, tr [u], gr [4u].
template <class T>
void cell_row(const T* zr, const T* cp, std::int64_t u, T* hr, T* cr, T* gr, T* tr) {
  gate_activations(zr, gr, u);
  for (std::int64_t j = 0; j < u; ++j) cr[j] = gr[u + j] * cp[j] + gr[j] * gr[2 * u + j];
  if constexpr (std::is_same_v<T, float>) {
    Eigen::Map<Eigen::ArrayXf>(tr, u) = Eigen::Map<const Eigen::ArrayXf>(cr, u).tanh();
  } else {
    for (std::int64_t j = 0; j < u; ++j) tr[j] = std::tanh(cr[j]);
  }
  for (std::int64_t j = 0; j < u; ++j) hr[j] = gr[3 * u + j] * tr[j];
}

// One row of the cell's backward (lstm_sequence_grad's formulas): dh, dc [u] (the gradients of h and
// c, with the recurrence's parts), gg [4u] / gt [u] (of gates / tc, null: zeros), the saved cp, gr, tr
// -> dzr [4u] and dcp [u] (the gradient of c_prev).
template <class T>
void cell_grad_row(const T* dh, const T* dc, const T* gg, const T* gt, const T* cp, const T* gr, const T* tr,
                   std::int64_t u, T* dzr, T* dcp) {
  for (std::int64_t j = 0; j < u; ++j) {
    const T i = gr[j], f = gr[u + j], g = gr[2 * u + j], o = gr[3 * u + j], t = tr[j];
    const T gc = dc[j] + ((gt ? gt[j] : T(0)) + dh[j] * o) * (T(1) - t * t);
    dzr[j] = (gc * g + (gg ? gg[j] : T(0))) * i * (T(1) - i);
    dzr[u + j] = (gc * cp[j] + (gg ? gg[u + j] : T(0))) * f * (T(1) - f);
    dzr[2 * u + j] = (gc * i + (gg ? gg[2 * u + j] : T(0))) * (T(1) - g * g);
    dzr[3 * u + j] = (dh[j] * t + (gg ? gg[3 * u + j] : T(0))) * o * (T(1) - o);
    dcp[j] = gc * f;
  }
}

// Runs f(r0, r1) over blocks of the `rows` independent rows, each of >= 8 rows and >= kMatmulSerialWork
// multiply-adds per step (`work` per step in all). On the packed GEMM (AVX2 and up), whose bits do not
// depend on a row's block, one block per thread; below it (Eigen's GEMM, whose bits do depend on the
// block's rows), as many blocks as that bound allows for any thread count, so that the results do
// not depend on the thread count either.
std::int64_t row_block_count(std::int64_t rows, std::int64_t work) {
  const std::int64_t most = work / kMatmulSerialWork;
  return std::clamp<std::int64_t>(cpu_isa() >= CpuIsa::kAvx2 ? std::min<std::int64_t>(num_threads(), most) : most, 1,
                                  std::max<std::int64_t>(1, rows / 8));
}
template <class F>
void over_row_blocks(std::int64_t rows, std::int64_t work, F&& f) {
  const std::int64_t blocks = row_block_count(rows, work);
  parallel_for(blocks, 1, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t q = s; q < e; ++q) f(rows * q / blocks, rows * (q + 1) / blocks);
  });
}

// dz [k, n] stored as the packed GEMM packs op(B) (internal::PackBBlock's layout): panels of NR
// columns one after the other, each holding its k rows of NR values (zeros past n). The dW GEMM's
// B blocks are then contiguous copies, not a pack of a row-major dz (which took as long as a third
// of that GEMM's multiply-adds).
template <class T>
struct DzPanels {
  static constexpr std::int64_t NR = internal::kGemmNR<T>;
  DzPanels(std::int64_t k_, std::int64_t n_) : k(k_), n(n_), panels((n_ + NR - 1) / NR), buf(panels * NR * k_) {}
  // Row p of dz from row [n].
  void store_row(std::int64_t p, const T* row) const {
    const std::int64_t full = n / NR;
    T* d = buf.get() + p * NR;
    for (std::int64_t q = 0; q < full; ++q, d += k * NR) std::memcpy(d, row + q * NR, sizeof(T) * NR);  // one move
    if (full == panels) return;
    const std::int64_t w = n - full * NR;
    std::copy(row + full * NR, row + n, d);
    std::fill(d + w, d + NR, T(0));
  }
  // The columns from panel q0 on, as one product's op(B).
  struct Part {
    const DzPanels* dz;
    std::int64_t q0;
  };
  static void pack(const void* ctx, std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t kc, T* dst) {
    const Part& part = *static_cast<const Part*>(ctx);
    for (std::int64_t q = jc / NR; q < (jc + nc + NR - 1) / NR; ++q, dst += kc * NR) {
      const T* src = part.dz->buf.get() + ((part.q0 + q) * part.dz->k + pc) * NR;
      std::copy(src, src + kc * NR, dst);
    }
  }
  std::int64_t k, n, panels;
  Scratch<T> buf;
};

}  // namespace

template <class T>
void lstm_cell(const T* z, const T* c_prev, std::int64_t rows, std::int64_t u, T* h, T* c, T* gates, T* tc) {
  const std::int64_t grain = std::max<std::int64_t>(1, kElementwiseGrain / std::max<std::int64_t>(4 * u, 1));
  [[maybe_unused]] FloatCellRows uk{};
  if constexpr (std::is_same_v<T, float>) uk = float_cell_rows();
  parallel_for(rows, grain, [&](std::int64_t b0, std::int64_t b1) {
    if constexpr (std::is_same_v<T, float>) {
      uk.forward(z + b0 * 4 * u, nullptr, nullptr, c_prev + b0 * u, b1 - b0, u, h + b0 * u, c + b0 * u,
                 gates + b0 * 4 * u, tc + b0 * u);
    } else {
      for (std::int64_t b = b0; b < b1; ++b)
        cell_row(z + b * 4 * u, c_prev + b * u, u, h + b * u, c + b * u, gates + b * 4 * u, tc + b * u);
    }
  });
}

template <class T>
void lstm_sequence(const T* x, const T* wx, const T* wh, const T* b, const T* h0, const T* c0, std::int64_t steps,
                   std::int64_t rows, std::int64_t in, std::int64_t u, T* h, T* c, T* gates, T* tc) {
  if (steps <= 0 || rows <= 0 || u <= 0) return;
  const std::int64_t su = rows * u, sz = rows * 4 * u;
  // The input projection x_t wx: per block and step (wx packed once) where every block's product
  // takes the packed GEMM as the whole one would (the same bits, and no [steps, rows, 4u] round
  // trip through memory); else all steps in one GEMM up front.
  const std::int64_t least_rows = rows / row_block_count(rows, rows * 4 * u * u);
  const bool per_block = internal::packed_gemm_runs() && in > 0 && 4 * u >= internal::kGemmMR &&
                         least_rows >= internal::kGemmMR && least_rows * 4 * u * in >= kMatmulSerialWork;
  std::optional<Scratch<T>> xp;
  std::optional<MatmulRhs<T>> rhs_x;
  if (per_block) {
    rhs_x.emplace(wx, in, 4 * u, false);
  } else {
    xp.emplace(steps * sz);
    matmul(x, wx, xp->get(), 1, steps * rows, in, 4 * u, false, false, 0, 0);
  }
  const MatmulRhs<T> rhs(wh, u, 4 * u, false);
  [[maybe_unused]] FloatCellRows uk{};
  if constexpr (std::is_same_v<T, float>) uk = float_cell_rows();
  over_row_blocks(rows, rows * 4 * u * u, [&](std::int64_t r0, std::int64_t r1) {
    const Scratch<T> zb((r1 - r0) * 4 * u * (per_block ? 2 : 1));
    T* z = zb.get();
    for (std::int64_t t = 0; t < steps; ++t) {
      const T* hp = t == 0 ? h0 : h + (t - 1) * su;
      const T* cp = t == 0 ? c0 : c + (t - 1) * su;
      rhs.multiply(hp + r0 * u, r1 - r0, z);
      const T* p = xp ? xp->get() + t * sz + r0 * 4 * u : z + (r1 - r0) * 4 * u;
      if (rhs_x) rhs_x->multiply(x + (t * rows + r0) * in, r1 - r0, z + (r1 - r0) * 4 * u);
      const std::int64_t o = t * su + r0 * u;
      if constexpr (std::is_same_v<T, float>) {
        // z_t = (xp_t + b) + h_{t-1} wh inside the cell rows, as the step by step ops add.
        uk.forward(p, b, z, cp + r0 * u, r1 - r0, u, h + o, c + o, gates + t * sz + r0 * 4 * u, tc + o);
      } else {
        for (std::int64_t r = 0; r < r1 - r0; ++r)
          for (std::int64_t j = 0; j < 4 * u; ++j) z[r * 4 * u + j] = (p[r * 4 * u + j] + b[j]) + z[r * 4 * u + j];
        for (std::int64_t r = r0; r < r1; ++r)
          cell_row(z + (r - r0) * 4 * u, cp + r * u, u, h + t * su + r * u, c + t * su + r * u,
                   gates + t * sz + r * 4 * u, tc + t * su + r * u);
      }
    }
  });
}

template <class T>
void lstm_sequence_grad(const T* x, const T* wx, const T* wh, const T* h0, const T* c0, const T* h, const T* c,
                        const T* gates, const T* tc, const T* gh, const T* gc, const T* ggates, const T* gtc,
                        std::int64_t steps, std::int64_t rows, std::int64_t in, std::int64_t u, T* dx, T* dwx, T* dwh,
                        T* db, T* dh0, T* dc0) {
  const std::int64_t su = rows * u, sz = rows * 4 * u, n = steps * rows;
  if (steps <= 0 || rows <= 0 || u <= 0) {
    std::fill(dwx, dwx + in * 4 * u, T(0));
    std::fill(dwh, dwh + u * 4 * u, T(0));
    std::fill(db, db + 4 * u, T(0));
    std::fill(dh0, dh0 + su, T(0));
    std::fill(dc0, dc0 + su, T(0));
    if (dx) std::fill(dx, dx + n * in, T(0));
    return;
  }
  // With the packed GEMM, dz goes straight into the dW GEMM's panels (a row-major copy only for dx).
  const bool panels = internal::packed_gemm_runs();
  const std::int64_t k = in + u + 1;  // rows of [dwx; dwh; db]
  std::optional<DzPanels<T>> dzp;
  if (panels) dzp.emplace(n, 4 * u);
  std::optional<Scratch<T>> dz_buf;
  if (!panels || dx) dz_buf.emplace(steps * sz);
  T* dz = dz_buf ? dz_buf->get() : nullptr;
  const MatmulRhs<T> rhs_t(wh, 4 * u, u, true);  // whᵀ [4u, u]
  [[maybe_unused]] FloatCellRows uk{};
  if constexpr (std::is_same_v<T, float>) uk = float_cell_rows();
  over_row_blocks(rows, rows * 4 * u * u, [&](std::int64_t r0, std::int64_t r1) {
    const std::int64_t m = (r1 - r0) * u;
    // dh_rec, dc_rec: the recurrence's parts of the state gradients (zeros after the last step);
    // dzt: this step's dz of the block's rows.
    std::vector<T> dh_rec(static_cast<std::size_t>(m), T(0)), dc_rec(static_cast<std::size_t>(m), T(0));
    const Scratch<T> dzt_buf(m * 4);
    T* dzt = dzt_buf.get();
    std::vector<T> dh, dc;
    if constexpr (!std::is_same_v<T, float>) dh.resize(static_cast<std::size_t>(m)), dc.resize(static_cast<std::size_t>(m));
    for (std::int64_t t = steps - 1; t >= 0; --t) {
      const std::int64_t o = t * su + r0 * u, oz = t * sz + r0 * 4 * u;
      const T* cp = t == 0 ? c0 : c + (t - 1) * su;
      if constexpr (std::is_same_v<T, float>) {
        uk.backward(gh ? gh + o : nullptr, dh_rec.data(), gc ? gc + o : nullptr, dc_rec.data(),
                    ggates ? ggates + oz : nullptr, gtc ? gtc + o : nullptr, cp + r0 * u, gates + oz, tc + o, r1 - r0,
                    u, dzt, dc_rec.data());
      } else {
        for (std::int64_t j = 0; j < m; ++j) {
          dh[j] = (gh ? gh[o + j] : T(0)) + dh_rec[j];
          dc[j] = (gc ? gc[o + j] : T(0)) + dc_rec[j];
        }
        for (std::int64_t r = r0; r < r1; ++r) {
          const std::int64_t ob = t * su + r * u, ozr = t * sz + r * 4 * u, l = (r - r0) * u;
          cell_grad_row(dh.data() + l, dc.data() + l, ggates ? ggates + ozr : nullptr, gtc ? gtc + ob : nullptr,
                        cp + r * u, gates + ozr, tc + ob, u, dzt + l * 4, dc_rec.data() + l);
        }
      }
      rhs_t.multiply(dzt, r1 - r0, dh_rec.data());
      if (dz) std::copy(dzt, dzt + m * 4, dz + oz);
      if (dzp)
        for (std::int64_t r = r0; r < r1; ++r) dzp->store_row(t * rows + r, dzt + (r - r0) * 4 * u);
    }
    std::copy(dh_rec.begin(), dh_rec.end(), dh0 + r0 * u);
    std::copy(dc_rec.begin(), dc_rec.end(), dc0 + r0 * u);
  });
  // [dwx; dwh; db] = [x_t, h_{t-1}, 1]ᵀ dz: one GEMM over every step's rows (dz read once).
  const Scratch<T> a(n * k);
  parallel_for(n, std::max<std::int64_t>(1, kElementwiseGrain / k), [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) {
      T* ai = a.get() + i * k;
      std::copy(x + i * in, x + (i + 1) * in, ai);
      const T* hp = i < rows ? h0 + i * u : h + (i - rows) * u;
      std::copy(hp, hp + u, ai + in);
      ai[in + u] = T(1);
    }
  });
  const Scratch<T> dw(k * 4 * u);
  if (dzp) {
    // The packed GEMM on dz's panels, column blocks of whole panels in parallel (as matmul cuts
    // columns: the same bits as matmul(a, dz, dw, 1, k, n, 4u, true, false) for any thread count).
    const std::int64_t np = dzp->panels, work = k * n * 4 * u;
    const std::int64_t parts =
        std::clamp<std::int64_t>(std::min<std::int64_t>(num_threads(), work / kMatmulSerialWork), 1, np);
    parallel_for(parts, 1, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t q = s; q < e; ++q) {
        const std::int64_t p0 = np * q / parts, p1 = np * (q + 1) / parts;
        const std::int64_t c0 = p0 * DzPanels<T>::NR, c1 = std::min(4 * u, p1 * DzPanels<T>::NR);
        const typename DzPanels<T>::Part part{&*dzp, p0};
        internal::packed_gemm<T>(k, c1 - c0, n, a.get(), k, true, &DzPanels<T>::pack, &part, dw.get() + c0, 4 * u);
      }
    });
  } else {
    matmul(a.get(), dz, dw.get(), 1, k, n, 4 * u, true, false, 0, 0);
  }
  std::copy(dw.get(), dw.get() + in * 4 * u, dwx);
  std::copy(dw.get() + in * 4 * u, dw.get() + (in + u) * 4 * u, dwh);
  std::copy(dw.get() + (in + u) * 4 * u, dw.get() + k * 4 * u, db);
  if (dx) matmul(dz, wx, dx, 1, n, 4 * u, in, false, true, 0, 0);
}

#define TAPEFLOW_INSTANTIATE(T)                                                                                   \
  template void lstm_cell<T>(const T*, const T*, std::int64_t, std::int64_t, T*, T*, T*, T*);                     \
  template void lstm_sequence<T>(const T*, const T*, const T*, const T*, const T*, const T*, std::int64_t,       \
                                 std::int64_t, std::int64_t, std::int64_t, T*, T*, T*, T*);                       \
  template void lstm_sequence_grad<T>(const T*, const T*, const T*, const T*, const T*, const T*, const T*,        \
                                      const T*, const T*, const T*, const T*, const T*, const T*, std::int64_t,    \
                                      std::int64_t, std::int64_t, std::int64_t, T*, T*, T*, T*, T*, T*);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::kernels
