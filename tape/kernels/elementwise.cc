#include "tape/kernels/elementwise.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "tape/kernels/internal/isa_dispatch.h"
#include "tape/kernels/reduce.h"
#include "tape/kernels/ukernels/internal/elementwise_loops.h"

namespace tapeflow::kernels {

// The copies of ukernels/elementwise_loops.cc (tape/CMakeLists.txt).
TAPEFLOW_ISA_DECLARE_FILL(ElementwiseLoops, fill_elementwise_loops)

template <class T>
void broadcast_to(const T* x, const Shape& sx, T* y, const Shape& sy) {
  const std::int64_t n = sy.num_elements();
  if (n == 0) return;
  const auto plan = internal::make_broadcast_plan<1>({&sx}, sy, "broadcast_to");
  parallel_for(n, kElementwiseGrain, [&](std::int64_t s, std::int64_t e) {
    internal::for_each_run<1>(plan, s, e, [&](std::int64_t o, const auto& offs, std::int64_t len, const auto& st) {
      if (st[0] == 1) std::copy(x + offs[0], x + offs[0] + len, y + o);
      else if (st[0] == 0) std::fill(y + o, y + o + len, x[offs[0]]);
      else
        for (std::int64_t j = 0; j < len; ++j) y[o + j] = x[offs[0] + j * st[0]];
    });
  });
}

template <class T>
void sum_to_shape(const T* x, const Shape& sx, T* y, const Shape& sy) {
  auto fail = [&] {
    throw std::invalid_argument("sum_to_shape: " + sy.to_string() + " does not broadcast to " + sx.to_string());
  };
  // Drop leading 1s of sy beyond the rank of sx.
  Shape t;
  int extra = sy.rank() - sx.rank();
  for (int i = 0; i < sy.rank(); ++i) {
    if (i < extra) {
      if (sy[i] != 1) fail();
    } else {
      t.push_back(sy[i]);
    }
  }
  const int off = sx.rank() - t.rank();
  if (off < 0) fail();
  std::uint32_t mask = 0;
  for (int i = 0; i < sx.rank(); ++i) {
    const std::int64_t d = i < off ? 1 : t[i - off];
    if (d == sx[i]) continue;
    if (d != 1) fail();
    mask |= 1u << i;
  }
  reduce_sum(x, sx, mask, y);
}

template <class T>
void binary_map(BinaryOp op, const T* a, const Shape& sa, const T* b, const Shape& sb, T* y, const Shape& sy) {
  const std::int64_t n = sy.num_elements();
  if (n == 0) return;
  const std::int64_t na = sa.num_elements(), nb = sb.num_elements();
  const std::int64_t c = sy.rank() > 0 ? sy[sy.rank() - 1] : 1;
  int form = -1;
  if (na == n && nb == n) form = internal::kSame;
  else if (na == 1 && nb == n) form = internal::kScalarA;
  else if (nb == 1 && na == n) form = internal::kScalarB;
  else if (c > 1 && na == n && nb == c && sb.rank() > 0 && sb[sb.rank() - 1] == c) form = internal::kRowB;
  else if (c > 1 && nb == n && na == c && sa.rank() > 0 && sa[sa.rank() - 1] == c) form = internal::kRowA;
  if (form < 0) {  // a general broadcast: map2's strided runs
    switch (op) {
      case BinaryOp::kAdd: return map2(a, sa, b, sb, y, sy, [](T u, T v) { return u + v; });
      case BinaryOp::kSub: return map2(a, sa, b, sb, y, sy, [](T u, T v) { return u - v; });
      case BinaryOp::kMul: return map2(a, sa, b, sb, y, sy, [](T u, T v) { return u * v; });
      case BinaryOp::kDiv: return map2(a, sa, b, sb, y, sy, [](T u, T v) { return u / v; });
      case BinaryOp::kMaximum: return map2(a, sa, b, sb, y, sy, [](T u, T v) { return u >= v ? u : v; });
      case BinaryOp::kMinimum: return map2(a, sa, b, sb, y, sy, [](T u, T v) { return u <= v ? u : v; });
    }
  }
  auto* const loop = internal::elementwise_loops<T>().binary;
  const int o = static_cast<int>(op);
  if (form == internal::kRowA || form == internal::kRowB) {  // whole rows per task
    const std::int64_t grain = (kElementwiseGrain + c - 1) / c;
    const bool b_row = form == internal::kRowB;
    parallel_for(n / c, grain, [&](std::int64_t rs, std::int64_t re) {
      const std::int64_t s = rs * c;
      loop(o, form, b_row ? a + s : a, b_row ? b : b + s, y + s, (re - rs) * c, c);
    });
    return;
  }
  parallel_for(n, kElementwiseGrain, [&](std::int64_t s, std::int64_t e) {
    loop(o, form, form == internal::kScalarA ? a : a + s, form == internal::kScalarB ? b : b + s, y + s, e - s, 1);
  });
}

template <class T>
void unary_map(UnaryOp op, const T* x, T* y, std::int64_t n) {
  auto* const loop = internal::elementwise_loops<T>().unary;
  parallel_for(n, kElementwiseGrain,
               [&](std::int64_t s, std::int64_t e) { loop(static_cast<int>(op), x + s, y + s, e - s); });
}

template <class T>
void apply_keep_bits(const T* x, const std::uint32_t* words, T scale, std::int64_t n, std::int64_t repeats, T* y) {
  if (n == 0 || repeats == 0) return;
  auto* const loop = internal::elementwise_loops<T>().keep_bits;
  const std::int64_t full = n / 32, rest = n % 32;
  // Tasks of whole words of one repeat (kElementwiseGrain elements or more).
  const std::int64_t grain = std::max<std::int64_t>(1, kElementwiseGrain / 32);
  parallel_for(repeats * full, grain, [&](std::int64_t s, std::int64_t e) {
    while (s < e) {
      const std::int64_t r = s / full, v = s % full, m = std::min(e - s, full - v);
      loop(x + r * n + 32 * v, words + v, scale, y + r * n + 32 * v, m);
      s += m;
    }
  });
  if (rest == 0) return;
  for (std::int64_t r = 0; r < repeats; ++r) {  // the last, partial word through a padded one
    T xb[32] = {}, yb[32];
    std::copy(x + r * n + 32 * full, x + r * n + n, xb);
    loop(xb, words + full, scale, yb, 1);
    std::copy(yb, yb + rest, y + r * n + 32 * full);
  }
}
template void apply_keep_bits<float>(const float*, const std::uint32_t*, float, std::int64_t, std::int64_t, float*);
template void apply_keep_bits<double>(const double*, const std::uint32_t*, double, std::int64_t, std::int64_t,
                                      double*);

namespace internal {
TAPEFLOW_ISA_TABLE(ElementwiseLoops, elementwise_loops, fill_elementwise_loops)
}  // namespace internal

#define TAPEFLOW_ELEMENTWISE_MAPS(T)                                                                            \
  template void binary_map<T>(BinaryOp, const T*, const Shape&, const T*, const Shape&, T*, const Shape&); \
  template void unary_map<T>(UnaryOp, const T*, T*, std::int64_t);
TAPEFLOW_ELEMENTWISE_MAPS(float)
TAPEFLOW_ELEMENTWISE_MAPS(double)
#undef TAPEFLOW_ELEMENTWISE_MAPS

#define TAPEFLOW_BROADCAST(T) template void broadcast_to<T>(const T*, const Shape&, T*, const Shape&);
TAPEFLOW_BROADCAST(float)
TAPEFLOW_BROADCAST(double)
TAPEFLOW_BROADCAST(std::int32_t)
TAPEFLOW_BROADCAST(std::int64_t)
TAPEFLOW_BROADCAST(bool)
#undef TAPEFLOW_BROADCAST

#define TAPEFLOW_SUM_TO(T) template void sum_to_shape<T>(const T*, const Shape&, T*, const Shape&);
TAPEFLOW_SUM_TO(float)
TAPEFLOW_SUM_TO(double)
TAPEFLOW_SUM_TO(std::int32_t)
TAPEFLOW_SUM_TO(std::int64_t)
#undef TAPEFLOW_SUM_TO

}  // namespace tapeflow::kernels
