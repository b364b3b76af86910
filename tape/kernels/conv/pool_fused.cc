// The filter and bias gradients of the fused Conv2D(+relu) -> MaxPool (conv.h:
// conv2d_backprop_filter_bias_with_argmax): dz rows made from the pool's argmax in cache and fed
// to the direct filter gradient (conv/direct.h), never materialised.
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include "tape/kernels/conv/internal/direct.h"
#include "tape/kernels/conv/internal/forced_algorithm.h"
#include "tape/kernels/internal/pool_windows.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

// Pairs of dz rows made from the argmax as scatter_2x2_row makes them in dx, on the fast path: no
// dz is materialised, each task makes the rows it needs in cache (W8's conv1: an 11 MB dz written
// once and read twice per step otherwise). Rows are summed for the bias as reduce_sum sums dz.
template <class T>
bool conv2d_backprop_filter_bias_with_argmax(const T* x, const T* dy, const ArgmaxIndex* argmax, T* dfilter,
                                             T* dbias, const Conv2DGeometry& g, const Conv2DGeometry& pool,
                                             const T* relu_y) {
  if (pool.n != g.n || pool.h != g.ho || pool.w != g.wo || pool.c != g.f)
    throw std::logic_error("conv2d_backprop_filter_bias_with_argmax: the pool's input " + std::to_string(pool.h) +
                           "x" + std::to_string(pool.w) + "x" + std::to_string(pool.c) +
                           " is not the convolution's output " + std::to_string(g.ho) + "x" + std::to_string(g.wo) +
                           "x" + std::to_string(g.f));
  const std::int64_t pixels = g.out_pixels(), F = g.f, WF = g.wo * g.f;
  if (pixels * F == 0 || g.patch_size() == 0) {
    std::fill(dfilter, dfilter + g.patch_size() * F, T(0));
    std::fill(dbias, dbias + F, T(0));
    return true;
  }
  // A forced algorithm (conv/internal/forced_algorithm.h): kPoolFused takes the fast path below or
  // throws; any other runs conv2d_backprop_filter, which applies it, on a materialised dz.
  const internal::ConvAlgorithm forced = internal::forced_conv_algorithm();
  const bool fast = direct(g) && pool_2x2(pool) && F != 1;
  if (forced == internal::ConvAlgorithm::kPoolFused && !fast)
    internal::throw_forced_conv_algorithm("conv2d_backprop_filter_bias_with_argmax",
                                          "does not take this shape (C <= 4, a 2x2 stride-2 pool, F > 1)");
  if (!fast || (forced != internal::ConvAlgorithm::kAuto && forced != internal::ConvAlgorithm::kPoolFused)) {
    const std::unique_ptr<T, void (*)(void*)> z(
        static_cast<T*>(scalable_aligned_malloc(static_cast<std::size_t>(pixels * F) * sizeof(T), 64)),
        scalable_aligned_free);
    if (!z) throw std::bad_alloc();
    std::vector<T> masked(relu_y ? static_cast<std::size_t>(pool.out_pixels() * F) : 0);
    if (relu_y) {
      relu_grad(dy, relu_y, masked.data(), pool.out_pixels() * F);
      dy = masked.data();
    }
    if (!max_pool2d_grad_with_argmax(dy, argmax, z.get(), pool)) return false;
    conv2d_backprop_filter(x, z.get(), dfilter, g);
    reduce_sum(z.get(), Shape{pixels, F}, 1u, dbias);
    return true;
  }
  std::atomic<bool> bad{false};
  const ArgmaxTaps2x2<T> taps{argmax, pool, &bad};
  const ReluArgmaxTaps2x2<T> relu_taps{taps, relu_y};
  // Per task: a buffer of two rows (the pooled row made last) and a row of zeros (an odd height's
  // last row, in no window).
  const auto dz_rows = [&] {
    return [&, buf = std::vector<T>(static_cast<std::size_t>(3 * WF), T(0)),
            made = std::int64_t{-1}](std::int64_t r) mutable -> const T* {
      const std::int64_t n = r / g.ho, oh = r % g.ho, ph = oh / 2;
      if (ph >= pool.ho) return buf.data() + 2 * WF;
      if (const std::int64_t pair = n * pool.ho + ph; pair != made) {
        if (relu_y)
          scatter_2x2_row(dy, pool, n, ph, buf.data(), buf.data() + WF, false, relu_taps, relu_taps);
        else
          scatter_2x2_row(dy, pool, n, ph, buf.data(), buf.data() + WF, false, taps, taps);
        made = pair;
      }
      return buf.data() + (oh % 2) * WF;
    };
  };
  // The bias: per partial of `per` pixels, the pixels' rows summed in order from 0; then the
  // partials in order (reduce_sum's order over [pixels, F]). A partial whose rows all lie in one
  // tile of the filter gradient is summed there, as the rows are made; the others (at most one
  // per tile boundary) afterwards, their rows made again.
  const std::int64_t per = reduce_sum_rows_per_partial(1, pixels, F), chunks = (pixels + per - 1) / per;
  const std::int64_t per_tile = direct_filter_rows_per_tile(g);
  std::vector<T> part(static_cast<std::size_t>(chunks * F), T(0));
  const auto in_one_tile = [&](std::int64_t c) {
    return c * per / g.wo / per_tile == (std::min(pixels, (c + 1) * per) - 1) / g.wo / per_tile;
  };
  // Adds the pixels of row r (values `row`) that lie in partial c: per channel the same adds in
  // pixel order, a packet of channels held in a register along the row (adding through memory
  // stalled on a store-to-load round trip per pixel).
  const auto add_row = [&](const T* row, std::int64_t r, std::int64_t c) {
    using P = typename ei::packet_traits<T>::type;
    constexpr std::int64_t L = ei::packet_traits<T>::size;
    T* pr = part.data() + c * F;
    const std::int64_t p0 = std::max(r * g.wo, c * per), p1 = std::min({(r + 1) * g.wo, (c + 1) * per, pixels});
    const T *first = row + (p0 - r * g.wo) * F, *end = row + (p1 - r * g.wo) * F;
    std::int64_t j = 0;
    for (; j + L <= F; j += L) {
      P acc = ei::ploadu<P>(pr + j);
      for (const T* v = first + j; v < end; v += F) acc = ei::padd(acc, ei::ploadu<P>(v));
      ei::pstoreu(pr + j, acc);
    }
    for (; j < F; ++j) {
      T acc = pr[j];
      for (const T* v = first + j; v < end; v += F) acc = acc + *v;
      pr[j] = acc;
    }
  };
  const auto partials_of = [&](std::int64_t r) {
    return std::pair<std::int64_t, std::int64_t>{r * g.wo / per, ((r + 1) * g.wo - 1) / per};
  };
  std::fill(dfilter, dfilter + g.patch_size() * F, T(0));
  conv2d_backprop_filter_direct_rows(
      x,
      [&] {
        return [&, make = dz_rows()](std::int64_t r) mutable -> const T* {
          const T* row = make(r);
          const auto [c0, c1] = partials_of(r);
          for (std::int64_t c = c0; c <= c1; ++c)
            if (in_one_tile(c)) add_row(row, r, c);
          return row;
        };
      },
      dfilter, g);
  std::vector<std::int64_t> rest;
  for (std::int64_t c = 0; c < chunks; ++c)
    if (!in_one_tile(c)) rest.push_back(c);
  parallel_for(static_cast<std::int64_t>(rest.size()), 1, [&](std::int64_t b, std::int64_t e) {
    auto row = dz_rows();
    for (std::int64_t i = b; i < e; ++i) {
      const std::int64_t c = rest[static_cast<std::size_t>(i)], last = (std::min(pixels, (c + 1) * per) - 1) / g.wo;
      for (std::int64_t r = c * per / g.wo; r <= last; ++r) add_row(row(r), r, c);
    }
  });
  std::fill(dbias, dbias + F, T(0));
  for (std::int64_t c = 0; c < chunks; ++c)
    for (std::int64_t j = 0; j < F; ++j) dbias[j] = dbias[j] + part[static_cast<std::size_t>(c * F + j)];
  return !bad.load();
}

template bool conv2d_backprop_filter_bias_with_argmax<float>(const float*, const float*, const std::int32_t*, float*,
                                                             float*, const Conv2DGeometry&, const Conv2DGeometry&,
                                                             const float*);
template bool conv2d_backprop_filter_bias_with_argmax<double>(const double*, const double*, const std::int32_t*,
                                                              double*, double*, const Conv2DGeometry&,
                                                              const Conv2DGeometry&, const double*);

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
