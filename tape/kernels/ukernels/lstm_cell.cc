// The float LSTM cell rows (ukernels/internal/lstm_cell.h), one template over the level's Eigen
// packet: compiled once per instruction-set level (tape/CMakeLists.txt's register tiles).
#ifndef TAPEFLOW_KERNEL_ISA
#error "lstm_cell.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#include "tape/kernels/ukernels/internal/lstm_cell.h"

// GCC 12 reports its own _mm512_undefined_* placeholders inside Eigen's AVX-512 packets as
// uninitialized (a false positive of avx512fintrin.h); this file alone includes them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>

#include <algorithm>

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk {

namespace {

namespace ei = Eigen::internal;
using P = ei::packet_traits<float>::type;
constexpr std::int64_t L = ei::packet_traits<float>::size;

P ld(const float* p) { return ei::ploadu<P>(p); }
void st(float* p, P v) { ei::pstoreu(p, v); }
P one() { return ei::pset1<P>(1.0f); }

// Eigen's rational logistic (scalar_logistic_op<float>), with the generic exp below -9 on every
// level (Eigen's AVX-512 pexp is another algorithm, whose bits differ from the AVX2 one).
P sigmoid_p(P x_in) {
  const P lt_mask = ei::pcmp_lt(x_in, ei::pset1<P>(-9.f));
#ifdef EIGEN_VECTORIZE_FMA
  const P x = ei::pmin(x_in, ei::pset1<P>(15.7243833541870117f));
#else
  const P x = ei::pmin(x_in, ei::pset1<P>(15.6437711715698242f));
#endif
  const P x2 = ei::pmul(x, x);
  P p = ei::pmadd(x2, ei::pset1<P>(4.37031012579801e-11f), ei::pset1<P>(1.15627324459942e-07f));
  p = ei::pmadd(x2, p, ei::pset1<P>(6.08574864600143e-05f));
  p = ei::pmadd(x2, p, ei::pset1<P>(8.51377133304701e-03f));
  p = ei::pmadd(x2, p, ei::pset1<P>(2.48287947061529e-01f));
  p = ei::pmul(x, p);
  P q = ei::pmadd(x2, ei::pset1<P>(6.10247389755681e-13f), ei::pset1<P>(5.76102136993427e-09f));
  q = ei::pmadd(x2, q, ei::pset1<P>(6.29106785017040e-06f));
  q = ei::pmadd(x2, q, ei::pset1<P>(1.70198817374094e-03f));
  q = ei::pmadd(x2, q, ei::pset1<P>(1.16817656904453e-01f));
  q = ei::pmadd(x2, q, ei::pset1<P>(9.93151921023180e-01f));
  const P logistic = ei::padd(ei::pdiv(p, q), ei::pset1<P>(0.5f));
  if (!ei::predux_any(lt_mask)) return logistic;
  const P e = ei::pexp_float(x_in);
  return ei::pselect(lt_mask, ei::pdiv(e, ei::padd(one(), e)), logistic);
}

P tanh_p(P x) { return ei::generic_fast_tanh_float(x); }

// One packet of L lanes of a row: p, b, zr at gate stride s (4 gates), cp / outputs at stride 1.
template <bool kB, bool kZr>
void cell_packet(const float* p, const float* b, const float* zr, const float* cp, std::int64_t s, float* h, float* c,
                 float* g, float* tc) {
  P z[4];
  for (int k = 0; k < 4; ++k) {
    z[k] = ld(p + k * s);
    if constexpr (kB) z[k] = ei::padd(z[k], ld(b + k * s));
    if constexpr (kZr) z[k] = ei::padd(z[k], ld(zr + k * s));
  }
  const P i = sigmoid_p(z[0]), f = sigmoid_p(z[1]), gg = tanh_p(z[2]), o = sigmoid_p(z[3]);
  const P cv = ei::pmadd(f, ld(cp), ei::pmul(i, gg));
  const P t = tanh_p(cv);
  st(g, i);
  st(g + s, f);
  st(g + 2 * s, gg);
  st(g + 3 * s, o);
  st(c, cv);
  st(tc, t);
  st(h, ei::pmul(o, t));
}

template <bool kB, bool kZr>
void cell_rows(const float* p, const float* b, const float* zr, const float* cp, std::int64_t rows, std::int64_t u,
               float* h, float* c, float* gates, float* tc) {
  const std::int64_t uv = u / L * L, rem = u - uv;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* pr = p + r * 4 * u;
    const float* zrr = kZr ? zr + r * 4 * u : nullptr;
    float* gr = gates + r * 4 * u;
    const std::int64_t o = r * u;
    for (std::int64_t j = 0; j < uv; j += L)
      cell_packet<kB, kZr>(pr + j, kB ? b + j : nullptr, kZr ? zrr + j : nullptr, cp + o + j, u, h + o + j, c + o + j,
                           gr + j, tc + o + j);
    if (rem == 0) continue;
    // The last rem lanes through one padded packet (gate stride L).
    alignas(64) float tp[4 * L], tb[4 * L], tz[4 * L], tcp[L], th[L], tcc[L], tg[4 * L], tt[L];
    std::fill(tp, tp + 4 * L, 0.0f);  // (no braced lists in per-level code: issue 31)
    std::fill(tb, tb + 4 * L, 0.0f);
    std::fill(tz, tz + 4 * L, 0.0f);
    std::fill(tcp, tcp + L, 0.0f);
    for (int k = 0; k < 4; ++k) {
      std::copy(pr + k * u + uv, pr + (k + 1) * u, tp + k * L);
      if (kB) std::copy(b + k * u + uv, b + (k + 1) * u, tb + k * L);
      if (kZr) std::copy(zrr + k * u + uv, zrr + (k + 1) * u, tz + k * L);
    }
    std::copy(cp + o + uv, cp + o + u, tcp);
    cell_packet<kB, kZr>(tp, tb, tz, tcp, L, th, tcc, tg, tt);
    std::copy(th, th + rem, h + o + uv);
    std::copy(tcc, tcc + rem, c + o + uv);
    std::copy(tt, tt + rem, tc + o + uv);
    for (int k = 0; k < 4; ++k) std::copy(tg + k * L, tg + k * L + rem, gr + k * u + uv);
  }
}

// Backward: one packet. dh / dc: the summed state gradients; gg, gt optional (kGg, kGt).
template <bool kGg, bool kGt>
void grad_packet(P dh, P dc, const float* gg, const float* gt, const float* cp, const float* g, const float* tc,
                 std::int64_t s, float* dz, float* dcp) {
  const P i = ld(g), f = ld(g + s), gv = ld(g + 2 * s), o = ld(g + 3 * s), t = ld(tc);
  const P dho = kGt ? ei::pmadd(dh, o, ld(gt)) : ei::pmul(dh, o);
  const P gcv = ei::pmadd(dho, ei::psub(one(), ei::pmul(t, t)), dc);
  P a0 = ei::pmul(gcv, gv), a1 = ei::pmul(gcv, ld(cp)), a2 = ei::pmul(gcv, i), a3 = ei::pmul(dh, t);
  if constexpr (kGg) {
    a0 = ei::padd(a0, ld(gg));
    a1 = ei::padd(a1, ld(gg + s));
    a2 = ei::padd(a2, ld(gg + 2 * s));
    a3 = ei::padd(a3, ld(gg + 3 * s));
  }
  st(dz, ei::pmul(ei::pmul(a0, i), ei::psub(one(), i)));
  st(dz + s, ei::pmul(ei::pmul(a1, f), ei::psub(one(), f)));
  st(dz + 2 * s, ei::pmul(a2, ei::psub(one(), ei::pmul(gv, gv))));
  st(dz + 3 * s, ei::pmul(ei::pmul(a3, o), ei::psub(one(), o)));
  st(dcp, ei::pmul(gcv, f));
}

// a + b over whichever of them is not null.
P sum_of(const float* a, const float* b) {
  if (a && b) return ei::padd(ld(a), ld(b));
  return ld(a ? a : b);
}

template <bool kGg, bool kGt>
void grad_rows(const float* gh, const float* dhr, const float* gc, const float* dcr, const float* gg, const float* gt,
               const float* cp, const float* gates, const float* tc, std::int64_t rows, std::int64_t u, float* dz,
               float* dcp) {
  const std::int64_t uv = u / L * L, rem = u - uv;
  auto at = [](const float* v, std::int64_t o) { return v ? v + o : nullptr; };
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t o = r * u, oz = r * 4 * u;
    for (std::int64_t j = 0; j < uv; j += L) {
      const P dh = sum_of(at(gh, o + j), at(dhr, o + j)), dc = sum_of(at(gc, o + j), at(dcr, o + j));
      grad_packet<kGg, kGt>(dh, dc, kGg ? gg + oz + j : nullptr, kGt ? gt + o + j : nullptr, cp + o + j,
                            gates + oz + j, tc + o + j, u, dz + oz + j, dcp + o + j);
    }
    if (rem == 0) continue;
    // The last rem lanes through one padded packet: v holds gh, dhr, gc, dcr, gt, cp, tc.
    alignas(64) float v[7][L], tg[4 * L], tgg[4 * L], tdz[4 * L], tdcp[L];
    std::fill(&v[0][0], &v[0][0] + 7 * L, 0.0f);
    std::fill(tg, tg + 4 * L, 0.0f);
    std::fill(tgg, tgg + 4 * L, 0.0f);
    const float* srcs[7];
    srcs[0] = gh, srcs[1] = dhr, srcs[2] = gc, srcs[3] = dcr, srcs[4] = gt, srcs[5] = cp, srcs[6] = tc;
    for (int k = 0; k < 7; ++k)
      if (srcs[k]) std::copy(srcs[k] + o + uv, srcs[k] + o + u, v[k]);
    for (int k = 0; k < 4; ++k) {
      std::copy(gates + oz + k * u + uv, gates + oz + (k + 1) * u, tg + k * L);
      if (kGg) std::copy(gg + oz + k * u + uv, gg + oz + (k + 1) * u, tgg + k * L);
    }
    const P dh = sum_of(gh ? v[0] : nullptr, dhr ? v[1] : nullptr), dc = sum_of(gc ? v[2] : nullptr, dcr ? v[3] : nullptr);
    grad_packet<kGg, kGt>(dh, dc, tgg, v[4], v[5], tg, v[6], L, tdz, tdcp);
    for (int k = 0; k < 4; ++k) std::copy(tdz + k * L, tdz + k * L + rem, dz + oz + k * u + uv);
    std::copy(tdcp, tdcp + rem, dcp + o + uv);
  }
}

}  // namespace

void lstm_cell_rows(const float* p, const float* b, const float* zr, const float* cp, std::int64_t rows,
                    std::int64_t u, float* h, float* c, float* gates, float* tc) {
  if (b && zr) return cell_rows<true, true>(p, b, zr, cp, rows, u, h, c, gates, tc);
  if (b) return cell_rows<true, false>(p, b, zr, cp, rows, u, h, c, gates, tc);
  if (zr) return cell_rows<false, true>(p, b, zr, cp, rows, u, h, c, gates, tc);
  return cell_rows<false, false>(p, b, zr, cp, rows, u, h, c, gates, tc);
}

void lstm_cell_grad_rows(const float* gh, const float* dhr, const float* gc, const float* dcr, const float* gg,
                         const float* gt, const float* cp, const float* gates, const float* tc, std::int64_t rows,
                         std::int64_t u, float* dz, float* dcp) {
  if (gg && gt) return grad_rows<true, true>(gh, dhr, gc, dcr, gg, gt, cp, gates, tc, rows, u, dz, dcp);
  if (gg) return grad_rows<true, false>(gh, dhr, gc, dcr, gg, gt, cp, gates, tc, rows, u, dz, dcp);
  if (gt) return grad_rows<false, true>(gh, dhr, gc, dcr, gg, gt, cp, gates, tc, rows, u, dz, dcp);
  return grad_rows<false, false>(gh, dhr, gc, dcr, gg, gt, cp, gates, tc, rows, u, dz, dcp);
}

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA::uk
