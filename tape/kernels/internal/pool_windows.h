// The pooling kernels' window walks and 2x2 packet helpers (pool.cc), shared with the pool-fused
// convolutions (conv/conv.cc, conv/pool_fused.cc); compiled into each per-level copy (namespace
// isa_<level>, TAPEFLOW_KERNEL_ISA).
#pragma once
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv/internal/common.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

// Calls f(n, oh, ow, i0, i1, j0, j1) for each output pixel in images [b, e): the window's rows
// [i0, i1) and columns [j0, j1) of the input, clipped to the unpadded image (never empty).
template <class F>
void for_windows(const Conv2DGeometry& g, std::int64_t b, std::int64_t e, F&& f) {
  for (std::int64_t n = b; n < e; ++n)
    for (std::int64_t oh = 0; oh < g.ho; ++oh) {
      const std::int64_t h0 = oh * g.sh - g.pad_top;
      const std::int64_t i0 = std::max<std::int64_t>(h0, 0), i1 = std::min(h0 + g.kh, g.h);
      for (std::int64_t ow = 0; ow < g.wo; ++ow) {
        const std::int64_t w0 = ow * g.sw - g.pad_left;
        const std::int64_t j0 = std::max<std::int64_t>(w0, 0), j1 = std::min(w0 + g.kw, g.w);
        f(n, oh, ow, i0, i1, j0, j1);
      }
    }
}

// Grain in images so that a task does at least ~32k window elements.
inline std::int64_t image_grain(const Conv2DGeometry& g) {
  const std::int64_t per_image = std::max<std::int64_t>(g.ho * g.wo * g.c * g.kh * g.kw, 1);
  return std::max<std::int64_t>(1, (1 << 15) / per_image);
}

// Offsets in x of a window's taps, in window order (row-major; a tap's index is its window
// position). Returns the count.
inline std::int64_t window_taps(const Conv2DGeometry& g, std::int64_t n, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                         std::int64_t j1, std::int64_t* off) {
  std::int64_t t = 0;
  for (std::int64_t i = i0; i < i1; ++i)
    for (std::int64_t j = j0; j < j1; ++j) off[t++] = ((n * g.h + i) * g.w + j) * g.c;
  return t;
}

// Max pooling's kernels run per window with channels in packets outermost and the taps inside, so
// the running maximum, its position and the output stay in registers. Per channel: the first
// maximum in window order (strict >, so NaN never replaces and ties keep the first, as TF's CPU
// kernel); its position is held as a T (exact: windows are far smaller than 2^24) so that value and
// position update under one packet select. Explicit packets: GCC turns scalar selects into masked
// stores, which are microcoded and slow on AMD.
template <class T>
struct WindowMax {
  using P = typename ei::packet_traits<T>::type;
  static constexpr std::int64_t L = ei::packet_traits<T>::size;
  const T* x;
  const std::int64_t* off;
  std::int64_t taps;
  // Maximum and its position for the packet of channels at c.
  void packet(std::int64_t c, P& best, P& pos) const {
    best = ei::ploadu<P>(x + off[0] + c);
    pos = ei::pset1<P>(T(0));
    for (std::int64_t t = 1; t < taps; ++t) {
      const P v = ei::ploadu<P>(x + off[t] + c), gt = ei::pcmp_lt(best, v);
      best = ei::pselect(gt, v, best);
      pos = ei::pselect(gt, ei::pset1<P>(static_cast<T>(t)), pos);
    }
  }
  // The same for one channel.
  std::int64_t scalar(std::int64_t c, T& best) const {
    std::int64_t at = 0;
    best = x[off[0] + c];
    for (std::int64_t t = 1; t < taps; ++t)
      if (x[off[t] + c] > best) best = x[off[t] + c], at = t;
    return at;
  }
};

// Disjoint 2x2 windows (2x2 stride 2, no padding): the usual CNN pool. Its kernels below fix the
// four taps (no offset table, no tap loop): W8's pool gradient ran at 8 GB/s on one thread through
// the general kernel, under the memory's 11 GB/s.
inline bool pool_2x2(const Conv2DGeometry& g) {
  return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.pad_top == 0 && g.pad_left == 0 && g.ho == g.h / 2 &&
         g.wo == g.w / 2;
}

// f(n, oh, r0, r1, out) for pooled rows [b, e) of the batch (n * ho rows): the image and row, the
// two input rows of its windows (pointers into the [N, H, W, C] tensor `base`; window ow starts at
// offset 2 * ow * C of each) and the offset of the pooled row in the [N, Ho, Wo, C] output.
template <class T, class F>
void for_pool_2x2_rows(const Conv2DGeometry& g, std::int64_t b, std::int64_t e, T* base, F&& f) {
  for (std::int64_t r = b; r < e; ++r) {
    const std::int64_t n = r / g.ho, oh = r % g.ho;
    T* r0 = base + (n * g.h + 2 * oh) * g.w * g.c;
    f(n, oh, r0, r0 + g.w * g.c, r * g.wo * g.c);
  }
}

// Rows of pooled output per task (~32k input elements).
inline std::int64_t pool_row_grain(const Conv2DGeometry& g) {
  return std::max<std::int64_t>(1, (1 << 15) / std::max<std::int64_t>(4 * g.wo * g.c, 1));
}

// Per channel of one 2x2 window (taps a, b, c, d in window order): the maximum and the masks of
// the first position holding it (strict <, as WindowMax: NaN never replaces, ties keep the first).
template <class T>
struct Max2x2 {
  using P = typename ei::packet_traits<T>::type;
  P best, m1, m2, m3;  // m_t: the maximum moved to tap t (later taps override earlier ones)
  Max2x2(P a, P b, P c, P d) {
    m1 = ei::pcmp_lt(a, b);
    best = ei::pselect(m1, b, a);
    m2 = ei::pcmp_lt(best, c);
    best = ei::pselect(m2, c, best);
    m3 = ei::pcmp_lt(best, d);
    best = ei::pselect(m3, d, best);
  }
  // v at the argmax, 0 at the other three taps.
  void scatter(P v, P& at0, P& at1, P& at2, P& at3) const {
    at3 = ei::pand(m3, v);
    const P before3 = ei::pandnot(v, m3);  // v where the maximum is not at tap 3
    at2 = ei::pand(m2, before3);
    const P before2 = ei::pandnot(before3, m2);
    at1 = ei::pand(m1, before2);
    at0 = ei::pandnot(before2, m1);
  }
};

// Whether the windows tile the input exactly (each element in exactly one window).
inline bool windows_tile_input(const Conv2DGeometry& g) {
  return g.sh == g.kh && g.sw == g.kw && g.pad_top == 0 && g.pad_left == 0 && g.ho * g.kh == g.h &&
         g.wo * g.kw == g.w;
}

// One 2x2 window of the pool gradient's sweep: its tap 0 as an offset into the [N, H, W, C] tensor
// (`at`) and within its image (`in_image`), the offset of its second row (`below`, one image row
// further) and of its pooled element in the [N, Ho, Wo, C] tensor (`pooled`), all at channel 0.
struct Window2x2 {
  std::int64_t at, in_image, below, pooled;
};

// One pooled row of the 2x2 pool gradient's sweep (pool_2x2): image n, pooled row oh; o0 and o1
// receive the dx values of its two input rows (g.w x C each; past 2 * wo, zeros). masks(window, c,
// dy packet, &t0..&t3) fills the packets of channels [c, c + L); tap(window, c) is the argmax tap
// (0-3, window order) of one channel, for the channels past the last whole packet. The window
// offsets (Window2x2) are those of dx; o0, o1 may point elsewhere (a row buffer).
template <class T, class Masks, class Tap>
void scatter_2x2_row(const T* dy, const Conv2DGeometry& g, std::int64_t n, std::int64_t oh, T* o0, T* o1, bool stream,
                     Masks&& masks, Tap&& tap) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  const std::int64_t image = g.h * g.w * g.c, C = g.c;
  const std::int64_t row0 = (n * g.h + 2 * oh) * g.w * C, out = (n * g.ho + oh) * g.wo * C;
  for (std::int64_t ow = 0; ow < g.wo; ++ow) {
    const std::int64_t q = 2 * ow * C;
    const Window2x2 w{row0 + q, row0 - n * image + q, row0 + g.w * C + q, out + ow * C};
    const T* d = dy + w.pooled;
    std::int64_t c = 0;
    for (; c + L <= C; c += L) {
      P t0, t1, t2, t3;
      masks(w, c, ei::ploadu<P>(d + c), t0, t1, t2, t3);
      if (stream) {
        stream_packet(o0 + q + c, t0);
        stream_packet(o0 + q + C + c, t1);
        stream_packet(o1 + q + c, t2);
        stream_packet(o1 + q + C + c, t3);
        continue;
      }
      ei::pstoreu(o0 + q + c, t0);
      ei::pstoreu(o0 + q + C + c, t1);
      ei::pstoreu(o1 + q + c, t2);
      ei::pstoreu(o1 + q + C + c, t3);
    }
    for (; c < C; ++c) {
      const int at = tap(w, c);
      T* dst[4] = {o0 + q + c, o0 + q + C + c, o1 + q + c, o1 + q + C + c};
      for (int t = 0; t < 4; ++t) *dst[t] = t == at ? d[c] : T(0);
    }
  }
  // An odd width leaves the last column outside every window.
  if (g.w % 2) {
    std::fill(o0 + 2 * g.wo * C, o0 + g.w * C, T(0));
    std::fill(o1 + 2 * g.wo * C, o1 + g.w * C, T(0));
  }
}

// The 2x2 pool gradient's sweep (pool_2x2) over all of dx: scatter_2x2_row per pooled row.
// Outputs of kConvStreamBytes or more are written with streaming stores.
template <class T, class Masks, class Tap>
void scatter_2x2(const T* dy, T* dx, const Conv2DGeometry& g, Masks&& masks, Tap&& tap) {
  constexpr std::int64_t L = WindowMax<T>::L;
  const std::int64_t image = g.h * g.w * g.c, C = g.c;
  // Packets land on packet-aligned addresses when C is a whole number of packets.
  const bool stream = C % L == 0 && stream_output(dx, g.n * image * static_cast<std::int64_t>(sizeof(T)));
  parallel_for(g.n * g.ho, pool_row_grain(g), [&](std::int64_t b, std::int64_t e) {
    const StreamFence fence(stream);
    for_pool_2x2_rows(g, b, e, dx, [&](std::int64_t n, std::int64_t oh, T* o0, T* o1, std::int64_t) {
      scatter_2x2_row(dy, g, n, oh, o0, o1, stream, masks, tap);
      // An odd height leaves the last row outside every window.
      if (g.h % 2 && oh == g.ho - 1) std::fill(dx + (n * g.h + g.h - 1) * g.w * C, dx + (n + 1) * image, T(0));
    });
  });
}

// The first maximum's tap (0-3, window order) of one 2x2 window's channel: the scalar Max2x2.
template <class T>
int max_tap_2x2(const T (&v)[4]) {
  int at = 0;
  for (int t = 1; t < 4; ++t)
    if (v[at] < v[t]) at = t;
  return at;
}



// Flat in-image index of argmax (h * W + w) * C + c, int32 (the op checks that images fit).
using ArgmaxIndex = std::int32_t;

// Packets of int32 indices as wide as T's packets (float on AVX2; Eigen 3.4's packet_traits<int>
// stays on SSE's 4 lanes, so named here), else none: the index work then runs per channel. Not
// when AVX-512F is on for the whole file (clang -march=native: float packets are Packet16f, and
// Eigen 3.4 declares but never defines preinterpret<Packet16f>(Packet8i), so nothing linked).
template <class T>
struct IndexPacket {
  static constexpr bool kOn = false;
};
#if defined(__AVX2__) && !defined(__AVX512F__)
template <>
struct IndexPacket<float> {
  static constexpr bool kOn = true;
  using type = ei::Packet8i;
};
#endif
template <class T>
constexpr bool kIndexPackets = IndexPacket<T>::kOn;
// Lane numbers, loaded as an index packet (channel offsets within a packet).
alignas(64) inline constexpr ArgmaxIndex kIndexLanes[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// Pools one pair of rows r0, r1 ([>= 2 wo, C] each, r0 starting at flat in-image index idx0, r1 one
// image row of w x C below) into out [wo, C] and its argmax, as max_pool2d's 2x2 path and
// max_pool2d_grad's tap rule.
template <class T>
void pool_2x2_row_with_argmax(const T* r0, const T* r1, const Conv2DGeometry& g, std::int64_t idx0, T* out,
                              ArgmaxIndex* argmax) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  const std::int64_t C = g.c, WC = g.w * g.c;
  for (std::int64_t ow = 0; ow < g.wo; ++ow) {
    const T *a = r0 + 2 * ow * C, *d = r1 + 2 * ow * C;
    const std::int64_t base = idx0 + 2 * ow * C;
    std::int64_t c = 0;
    if constexpr (kIndexPackets<T>) {
      using PI = typename IndexPacket<T>::type;
      const PI lanes = ei::ploadu<PI>(kIndexLanes);
      // The taps' offsets from tap 0 as bit patterns in T's packets, so that the masks select them.
      const P off1 = ei::preinterpret<P>(ei::pset1<PI>(static_cast<ArgmaxIndex>(C)));
      const P off2 = ei::preinterpret<P>(ei::pset1<PI>(static_cast<ArgmaxIndex>(WC)));
      const P off3 = ei::preinterpret<P>(ei::pset1<PI>(static_cast<ArgmaxIndex>(WC + C)));
      const P zero = ei::pset1<P>(T(0));
      for (; c + L <= C; c += L) {
        const Max2x2<T> m(ei::ploadu<P>(a + c), ei::ploadu<P>(a + C + c), ei::ploadu<P>(d + c),
                          ei::ploadu<P>(d + C + c));
        ei::pstoreu(out + ow * C + c, m.best);
        const P off = ei::pselect(m.m3, off3, ei::pselect(m.m2, off2, ei::pselect(m.m1, off1, zero)));
        const PI idx = ei::padd(ei::preinterpret<PI>(off),
                                ei::padd(lanes, ei::pset1<PI>(static_cast<ArgmaxIndex>(base + c))));
        ei::pstoreu(argmax + ow * C + c, idx);
      }
    }
    for (; c < C; ++c) {
      const T v[4] = {a[c], a[C + c], d[c], d[C + c]};
      const int at = max_tap_2x2(v);
      out[ow * C + c] = v[at];
      argmax[ow * C + c] = static_cast<ArgmaxIndex>(base + c + (at & 1) * C + (at >> 1) * WC);
    }
  }
}

// Whether flat in-image index idx lies in the window of pooled element i (in-image) and has its channel.
inline bool in_window(const Conv2DGeometry& g, std::int64_t i, std::int64_t idx) {
  const std::int64_t c = i % g.c, ow = i / g.c % g.wo, oh = i / (g.c * g.wo);
  if (idx < 0 || idx % g.c != c) return false;
  const std::int64_t h = idx / (g.c * g.w), w = idx / g.c % g.w;
  const std::int64_t h0 = oh * g.sh - g.pad_top, w0 = ow * g.sw - g.pad_left;
  return h < g.h && h >= std::max<std::int64_t>(h0, 0) && h < h0 + g.kh && w >= std::max<std::int64_t>(w0, 0) &&
         w < w0 + g.kw;
}



// The masks and tap callbacks of scatter_2x2 (and scatter_2x2_row) from an argmax instead of x:
// each channel's argmax must be one of its window's four taps with its own channel, else `bad` is
// set (and the channel gets tap 4: nothing).
template <class T>
struct ArgmaxTaps2x2 {
  using P = typename WindowMax<T>::P;
  const ArgmaxIndex* argmax;
  const Conv2DGeometry& g;
  std::atomic<bool>* bad;
  // The argmax's tap (0-3) in its window, 4 if it is none of them.
  int operator()(const Window2x2& w, std::int64_t c) const {
    const std::int64_t rel = argmax[w.pooled + c] - (w.in_image + c), C = g.c, WC = g.w * g.c;
    const int t = rel == 0 ? 0 : rel == C ? 1 : rel == WC ? 2 : rel == WC + C ? 3 : 4;
    if (t == 4) bad->store(true, std::memory_order_relaxed);
    return t;
  }
  void operator()(const Window2x2& w, std::int64_t c, const P& d, P& t0, P& t1, P& t2, P& t3) const {
    const std::int64_t C = g.c, WC = g.w * g.c;
    if constexpr (kIndexPackets<T>) {
      using PI = typename IndexPacket<T>::type;
      const PI idx = ei::ploadu<PI>(argmax + w.pooled + c);
      const PI rel = ei::psub(idx, ei::padd(ei::ploadu<PI>(kIndexLanes),
                                            ei::pset1<PI>(static_cast<ArgmaxIndex>(w.in_image + c))));
      const auto mask = [&](std::int64_t o) {
        return ei::preinterpret<P>(ei::pcmp_eq(rel, ei::pset1<PI>(static_cast<ArgmaxIndex>(o))));
      };
      const P m0 = mask(0), m1 = mask(C), m2 = mask(WC), m3 = mask(WC + C);
      // Every lane's index is one of the four taps.
      if (ei::predux_any(ei::pandnot(ei::ptrue(m0), ei::por(ei::por(m0, m1), ei::por(m2, m3)))))
        bad->store(true, std::memory_order_relaxed);
      t0 = ei::pand(m0, d);
      t1 = ei::pand(m1, d);
      t2 = ei::pand(m2, d);
      t3 = ei::pand(m3, d);
    } else {
      T v[WindowMax<T>::L], out[4][WindowMax<T>::L];
      ei::pstoreu(v, d);
      for (std::int64_t l = 0; l < WindowMax<T>::L; ++l) {
        const int k = (*this)(w, c + l);
        for (int t = 0; t < 4; ++t) out[t][l] = t == k ? v[l] : T(0);
      }
      t0 = ei::ploadu<P>(out[0]);
      t1 = ei::ploadu<P>(out[1]);
      t2 = ei::ploadu<P>(out[2]);
      t3 = ei::ploadu<P>(out[3]);
    }
  }
};

// ArgmaxTaps2x2 fed relu_grad(dy, y) instead of dy: a channel with y <= 0 (or NaN) gets no tap.
template <class T>
struct ReluArgmaxTaps2x2 {
  using P = typename WindowMax<T>::P;
  const ArgmaxTaps2x2<T>& taps;
  const T* y;
  int operator()(const Window2x2& w, std::int64_t c) const {
    const int t = taps(w, c);  // (checks the index either way)
    return y[w.pooled + c] > T(0) ? t : 4;
  }
  void operator()(const Window2x2& w, std::int64_t c, const P& d, P& t0, P& t1, P& t2, P& t3) const {
    const P live = ei::pcmp_lt(ei::pset1<P>(T(0)), ei::ploadu<P>(y + w.pooled + c));
    taps(w, c, ei::pand(live, d), t0, t1, t2, t3);
  }
};

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
