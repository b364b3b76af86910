// The pooling kernels of conv.h (max and average pooling, their gradients, the argmax variants),
// in packets; compiled once per instruction-set level into kernels::isa_<level>
// (TAPEFLOW_KERNEL_ISA), dispatched by conv/dispatch.cc.
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/internal/pool_windows.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

template <class T>
void max_pool2d(const T* x, T* y, const Conv2DGeometry& g) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  if (pool_2x2(g)) {
    const std::int64_t C = g.c;
    parallel_for(g.n * g.ho, pool_row_grain(g), [&](std::int64_t b, std::int64_t e) {
      for_pool_2x2_rows(g, b, e, x, [&](auto, auto, const T* r0, const T* r1, std::int64_t out) {
        for (std::int64_t ow = 0; ow < g.wo; ++ow) {
          const T *a = r0 + 2 * ow * C, *d = r1 + 2 * ow * C;
          T* o = y + out + ow * C;
          std::int64_t c = 0;
          for (; c + L <= C; c += L)
            ei::pstoreu(o + c, Max2x2<T>(ei::ploadu<P>(a + c), ei::ploadu<P>(a + C + c), ei::ploadu<P>(d + c),
                                         ei::ploadu<P>(d + C + c)).best);
          for (; c < C; ++c) {
            T m = a[c];
            for (T v : {a[C + c], d[c], d[C + c]}) m = m < v ? v : m;
            o[c] = m;
          }
        }
      });
    });
    return;
  }
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int64_t> off(static_cast<std::size_t>(g.kh * g.kw));
    for_windows(g, b, e, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
      T* out = y + ((n * g.ho + oh) * g.wo + ow) * g.c;
      const WindowMax<T> w{x, off.data(), window_taps(g, n, i0, i1, j0, j1, off.data())};
      std::int64_t c = 0;
      for (; c + L <= g.c; c += L) {
        P best, pos;
        w.packet(c, best, pos);
        ei::pstoreu(out + c, best);
      }
      for (; c < g.c; ++c) w.scalar(c, out[c]);
    });
  });
}

// dx gets each window's dy at its argmax, through a select per tap (no per-channel offsets or
// scattered writes). When the windows tile the input (2x2 stride 2 on an even image) every element
// is written once and dx needs no zeroing; otherwise an image's dx is zeroed just before its
// windows add into it, while it is in cache.
template <class T>
void max_pool2d_grad(const T* x, const T* dy, T* dx, const Conv2DGeometry& g) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  const std::int64_t image = g.h * g.w * g.c;
  if (pool_2x2(g)) {
    const std::int64_t C = g.c;
    scatter_2x2(
        dy, dx, g,
        [&](const Window2x2& w, std::int64_t c, const P& d, P& t0, P& t1, P& t2, P& t3) {
          const T *r0 = x + w.at + c, *r1 = x + w.below + c;
          Max2x2<T>(ei::ploadu<P>(r0), ei::ploadu<P>(r0 + C), ei::ploadu<P>(r1), ei::ploadu<P>(r1 + C))
              .scatter(d, t0, t1, t2, t3);
        },
        [&](const Window2x2& w, std::int64_t c) {
          const T v[4] = {x[w.at + c], x[w.at + C + c], x[w.below + c], x[w.below + C + c]};
          return max_tap_2x2(v);
        });
    return;
  }
  const bool assign = windows_tile_input(g);
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int64_t> off(static_cast<std::size_t>(g.kh * g.kw));
    const P zero = ei::pset1<P>(T(0));
    for (std::int64_t m = b; m < e; ++m) {
      if (!assign) std::fill(dx + m * image, dx + (m + 1) * image, T(0));
      for_windows(g, m, m + 1, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
        const T* d = dy + ((n * g.ho + oh) * g.wo + ow) * g.c;
        const WindowMax<T> w{x, off.data(), window_taps(g, n, i0, i1, j0, j1, off.data())};
        std::int64_t c = 0;
        for (; c + L <= g.c; c += L) {
          P best, pos;
          w.packet(c, best, pos);
          const P dv = ei::ploadu<P>(d + c);
          for (std::int64_t t = 0; t < w.taps; ++t) {
            T* o = dx + off[static_cast<std::size_t>(t)] + c;
            const P v = ei::pselect(ei::pcmp_eq(pos, ei::pset1<P>(static_cast<T>(t))), dv, zero);
            ei::pstoreu(o, assign ? v : ei::padd(ei::ploadu<P>(o), v));
          }
        }
        for (; c < g.c; ++c) {
          T best;
          const std::int64_t at = w.scalar(c, best);
          for (std::int64_t t = 0; t < w.taps; ++t) {
            T& o = dx[off[static_cast<std::size_t>(t)] + c];
            const T v = t == at ? d[c] : T(0);
            o = assign ? v : o + v;
          }
        }
      });
    }
  });
}

// y[window] = ddx at the window's argmax.
template <class T>
void max_pool2d_grad_grad(const T* x, const T* ddx, T* y, const Conv2DGeometry& g) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int64_t> off(static_cast<std::size_t>(g.kh * g.kw));
    for_windows(g, b, e, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
      T* out = y + ((n * g.ho + oh) * g.wo + ow) * g.c;
      const WindowMax<T> w{x, off.data(), window_taps(g, n, i0, i1, j0, j1, off.data())};
      std::int64_t c = 0;
      for (; c + L <= g.c; c += L) {
        P best, pos, r = ei::pset1<P>(T(0));
        w.packet(c, best, pos);
        for (std::int64_t t = 0; t < w.taps; ++t)
          r = ei::pselect(ei::pcmp_eq(pos, ei::pset1<P>(static_cast<T>(t))),
                          ei::ploadu<P>(ddx + off[static_cast<std::size_t>(t)] + c), r);
        ei::pstoreu(out + c, r);
      }
      for (; c < g.c; ++c) {
        T best;
        out[c] = ddx[off[static_cast<std::size_t>(w.scalar(c, best))] + c];
      }
    });
  });
}



template <class T>
void max_pool2d_with_argmax(const T* x, T* y, ArgmaxIndex* argmax, const Conv2DGeometry& g) {
  using P = typename WindowMax<T>::P;
  constexpr std::int64_t L = WindowMax<T>::L;
  const std::int64_t image = g.h * g.w * g.c;
  if (pool_2x2(g)) {
    parallel_for(g.n * g.ho, pool_row_grain(g), [&](std::int64_t b, std::int64_t e) {
      for_pool_2x2_rows(g, b, e, x, [&](std::int64_t n, auto, const T* r0, const T* r1, std::int64_t out) {
        pool_2x2_row_with_argmax(r0, r1, g, (r0 - x) - n * image, y + out, argmax + out);
      });
    });
    return;
  }
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int64_t> off(static_cast<std::size_t>(g.kh * g.kw));
    for_windows(g, b, e, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
      const std::int64_t o = ((n * g.ho + oh) * g.wo + ow) * g.c;
      const WindowMax<T> w{x, off.data(), window_taps(g, n, i0, i1, j0, j1, off.data())};
      std::int64_t c = 0;
      for (; c + L <= g.c; c += L) {
        P best, pos;
        w.packet(c, best, pos);
        ei::pstoreu(y + o + c, best);
        T at[L];
        ei::pstoreu(at, pos);
        for (std::int64_t l = 0; l < L; ++l)
          argmax[o + c + l] =
              static_cast<ArgmaxIndex>(off[static_cast<std::size_t>(at[l])] - n * image + c + l);
      }
      for (; c < g.c; ++c)
        argmax[o + c] = static_cast<ArgmaxIndex>(off[static_cast<std::size_t>(w.scalar(c, y[o + c]))] - n * image + c);
    });
  });
}



// As max_pool2d_grad, the taps found from argmax instead of x: the same values in the same order.
template <class T>
bool max_pool2d_grad_with_argmax(const T* dy, const ArgmaxIndex* argmax, T* dx, const Conv2DGeometry& g) {
  const std::int64_t image = g.h * g.w * g.c, pooled = g.ho * g.wo * g.c;
  std::atomic<bool> bad{false};
  if (pool_2x2(g)) {
    const ArgmaxTaps2x2<T> taps{argmax, g, &bad};
    scatter_2x2(dy, dx, g, taps, taps);
    return !bad.load();
  }
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) {
      T* d = dx + n * image;
      std::fill(d, d + image, T(0));
      const ArgmaxIndex* am = argmax + n * pooled;
      for (std::int64_t i = 0; i < pooled; ++i) {
        if (!in_window(g, i, am[i])) {
          bad.store(true, std::memory_order_relaxed);
          return;
        }
        d[am[i]] += dy[n * pooled + i];
      }
    }
  });
  return !bad.load();
}


template <class T>
bool max_pool2d_grad_grad_with_argmax(const T* ddx, const ArgmaxIndex* argmax, T* y, const Conv2DGeometry& g) {
  const std::int64_t image = g.h * g.w * g.c, pooled = g.ho * g.wo * g.c;
  std::atomic<bool> bad{false};
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n)
      for (std::int64_t i = 0; i < pooled; ++i) {
        const ArgmaxIndex a = argmax[n * pooled + i];
        if (!in_window(g, i, a)) {
          bad.store(true, std::memory_order_relaxed);
          return;
        }
        y[n * pooled + i] = ddx[n * image + a];
      }
  });
  return !bad.load();
}


template <class T>
void avg_pool2d(const T* x, T* y, const Conv2DGeometry& g) {
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    for_windows(g, b, e, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
      T* out = y + ((n * g.ho + oh) * g.wo + ow) * g.c;
      std::fill(out, out + g.c, T(0));
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = j0; j < j1; ++j) {
          const T* in = x + ((n * g.h + i) * g.w + j) * g.c;
          for (std::int64_t c = 0; c < g.c; ++c) out[c] += in[c];
        }
      const T count = static_cast<T>((i1 - i0) * (j1 - j0));
      for (std::int64_t c = 0; c < g.c; ++c) out[c] /= count;
    });
  });
}

template <class T>
void avg_pool2d_grad(const T* dy, T* dx, const Conv2DGeometry& g) {
  std::fill(dx, dx + g.n * g.h * g.w * g.c, T(0));
  parallel_for(g.n, image_grain(g), [&](std::int64_t b, std::int64_t e) {
    for_windows(g, b, e, [&](auto n, auto oh, auto ow, auto i0, auto i1, auto j0, auto j1) {
      const T* d = dy + ((n * g.ho + oh) * g.wo + ow) * g.c;
      const T count = static_cast<T>((i1 - i0) * (j1 - j0));
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = j0; j < j1; ++j) {
          T* out = dx + ((n * g.h + i) * g.w + j) * g.c;
          for (std::int64_t c = 0; c < g.c; ++c) out[c] += d[c] / count;
        }
    });
  });
}

#define TAPEFLOW_INSTANTIATE(T)                                                                                     \
  template void max_pool2d<T>(const T*, T*, const Conv2DGeometry&);                                                 \
  template void max_pool2d_grad<T>(const T*, const T*, T*, const Conv2DGeometry&);                                  \
  template void max_pool2d_grad_grad<T>(const T*, const T*, T*, const Conv2DGeometry&);                             \
  template void max_pool2d_with_argmax<T>(const T*, T*, std::int32_t*, const Conv2DGeometry&);                      \
  template bool max_pool2d_grad_with_argmax<T>(const T*, const std::int32_t*, T*, const Conv2DGeometry&);           \
  template bool max_pool2d_grad_grad_with_argmax<T>(const T*, const std::int32_t*, T*, const Conv2DGeometry&);      \
  template void avg_pool2d<T>(const T*, T*, const Conv2DGeometry&);                                                 \
  template void avg_pool2d_grad<T>(const T*, T*, const Conv2DGeometry&);
TAPEFLOW_INSTANTIATE(float)
TAPEFLOW_INSTANTIATE(double)
#undef TAPEFLOW_INSTANTIATE

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
