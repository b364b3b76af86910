// Element-wise kernels: unary and binary maps with NumPy broadcasting, where, broadcast_to,
// sum_to_shape (the "unbroadcast" of gradients) and cast.
// Facts:    Pure compute on raw pointers; outputs are contiguous row-major and must not alias
//           inputs unless the shapes are equal. Large inputs run in parallel (kElementwiseGrain).
// DTypes:   map/map2/where/cast/broadcast_to: any element type (broadcast_to is instantiated for
//           float, double, int32, int64, bool); sum_to_shape: float, double, int32, int64.
// Errors:   std::invalid_argument if a shape does not broadcast to the output shape.
#pragma once

#include <cstdint>

#include "tape/core/shape.h"
#include "tape/kernels/internal/strided.h"
#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {

// y[i] = f(x[i]) for i < n.
template <class T, class R, class F>
void map(const T* x, R* y, std::int64_t n, F f) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

// y = f(a, b) with a (sa) and b (sb) broadcast to sy (already computed by the caller).
// Shapes:   sa, sb broadcastable to sy.
template <class T, class R, class F>
void map2(const T* a, const Shape& sa, const T* b, const Shape& sb, R* y, const Shape& sy, F f) {
  const std::int64_t n = sy.num_elements();
  if (n == 0) return;
  const std::int64_t na = sa.num_elements(), nb = sb.num_elements();
  if (na == n && nb == n) {  // same shape (up to leading 1s)
    parallel_for(n, kElementwiseGrain, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t i = s; i < e; ++i) y[i] = f(a[i], b[i]);
    });
    return;
  }
  if (na == 1 && nb == n) {
    const T av = a[0];
    parallel_for(n, kElementwiseGrain, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t i = s; i < e; ++i) y[i] = f(av, b[i]);
    });
    return;
  }
  if (nb == 1 && na == n) {
    const T bv = b[0];
    parallel_for(n, kElementwiseGrain, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t i = s; i < e; ++i) y[i] = f(a[i], bv);
    });
    return;
  }
  // Trailing row broadcast: a [..., c] with b [c] (or the mirror).
  const std::int64_t c = sy.rank() > 0 ? sy[sy.rank() - 1] : 1;
  const bool b_row = na == n && nb == c && sb.rank() > 0 && sb[sb.rank() - 1] == c;
  const bool a_row = nb == n && na == c && sa.rank() > 0 && sa[sa.rank() - 1] == c;
  if ((b_row || a_row) && c > 1) {
    const std::int64_t rows = n / c;
    const std::int64_t grain = (kElementwiseGrain + c - 1) / c;
    parallel_for(rows, grain, [&](std::int64_t rs, std::int64_t re) {
      for (std::int64_t r = rs; r < re; ++r) {
        const std::int64_t o = r * c;
        if (b_row)
          for (std::int64_t j = 0; j < c; ++j) y[o + j] = f(a[o + j], b[j]);
        else
          for (std::int64_t j = 0; j < c; ++j) y[o + j] = f(a[j], b[o + j]);
      }
    });
    return;
  }
  const auto plan = internal::make_broadcast_plan<2>({&sa, &sb}, sy, "map2");
  parallel_for(n, kElementwiseGrain, [&](std::int64_t s, std::int64_t e) {
    internal::for_each_run<2>(plan, s, e, [&](std::int64_t o, const auto& offs, std::int64_t len, const auto& st) {
      const T* pa = a + offs[0];
      const T* pb = b + offs[1];
      R* py = y + o;
      if (st[0] == 1 && st[1] == 1)
        for (std::int64_t j = 0; j < len; ++j) py[j] = f(pa[j], pb[j]);
      else if (st[0] == 0 && st[1] == 1)
        for (std::int64_t j = 0; j < len; ++j) py[j] = f(pa[0], pb[j]);
      else if (st[0] == 1 && st[1] == 0)
        for (std::int64_t j = 0; j < len; ++j) py[j] = f(pa[j], pb[0]);
      else
        for (std::int64_t j = 0; j < len; ++j) py[j] = f(pa[j * st[0]], pb[j * st[1]]);
    });
  });
}

// y = c ? a : b with c, a and b broadcast to sy.
template <class T>
void where(const bool* c, const Shape& sc, const T* a, const Shape& sa, const T* b, const Shape& sb, T* y,
           const Shape& sy) {
  const std::int64_t n = sy.num_elements();
  if (n == 0) return;
  if (sc.num_elements() == n && sa.num_elements() == n && sb.num_elements() == n) {
    // Both operands loaded unconditionally and the condition read as bytes: GCC vectorizes that
    // select, not a conditional load or a select on bool.
    const auto* cb = reinterpret_cast<const unsigned char*>(c);
    parallel_for(n, kElementwiseGrain, [cb, a, b, y](std::int64_t s, std::int64_t e) {
      for (std::int64_t i = s; i < e; ++i) {
        const T av = a[i], bv = b[i];
        y[i] = cb[i] != 0 ? av : bv;
      }
    });
    return;
  }
  const auto plan = internal::make_broadcast_plan<3>({&sc, &sa, &sb}, sy, "where");
  parallel_for(n, kElementwiseGrain, [&](std::int64_t s, std::int64_t e) {
    internal::for_each_run<3>(plan, s, e, [&](std::int64_t o, const auto& offs, std::int64_t len, const auto& st) {
      for (std::int64_t j = 0; j < len; ++j)
        y[o + j] = c[offs[0] + j * st[0]] ? a[offs[1] + j * st[1]] : b[offs[2] + j * st[2]];
    });
  });
}

// The binary arithmetic ops with loops per instruction-set level (binary_map).
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMaximum, kMinimum };
// The unary arithmetic ops with loops per instruction-set level (unary_map).
enum class UnaryOp { kNegative, kSquare, kSqrt, kRsqrt, kReciprocal, kAbs, kRelu };

// y = a op b with a (sa) and b (sb) broadcast to sy, as map2 with op's function: a + b, a - b,
// a b, a / b, a >= b ? a : b (maximum), a <= b ? a : b (minimum).
// Shapes:   sa, sb broadcastable to sy.
// DTypes:   float, double.
// Facts:    The same shape, a scalar on either side and a trailing row ([..., c] with [c]) run
//           the copy of ukernels/elementwise_loops.cc for cpu_isa(); other broadcasts run map2.
//           Every element is one IEEE operation: the same bits at every level and thread count.
template <class T>
void binary_map(BinaryOp op, const T* a, const Shape& sa, const T* b, const Shape& sb, T* y, const Shape& sy);

// y[i] = op(x[i]) for i < n: -v, v², sqrt(v), 1 / sqrt(v), 1 / v, v < 0 ? -v : v (abs),
// v > 0 ? v : 0 (relu). DTypes: float, double. Facts: as binary_map (sqrt is correctly rounded).
template <class T>
void unary_map(UnaryOp op, const T* x, T* y, std::int64_t n);

// Dropout's keep mask in packed form: y[r n + i] = x[r n + i] · (bit i % 32 of words[i / 32] ? scale
// : 0) for each of `repeats` blocks of n elements (the same bits as x times a mask of scale / 0
// values: one IEEE multiply per element, at every level).
// DTypes: float, double.
template <class T>
void apply_keep_bits(const T* x, const std::uint32_t* words, T scale, std::int64_t n, std::int64_t repeats, T* y);

// Broadcasts x (sx) to y (sy). Shapes: sx broadcastable to sy.
template <class T>
void broadcast_to(const T* x, const Shape& sx, T* y, const Shape& sy);

// Sums x (sx) down to y (sy) where sy broadcasts to sx; sy may have lower rank. Deterministic.
// Errors: std::invalid_argument if sy does not broadcast to sx.
template <class T>
void sum_to_shape(const T* x, const Shape& sx, T* y, const Shape& sy);

// y[i] = static_cast<To>(x[i]) for i < n (to bool: x != 0).
template <class From, class To>
void cast(const From* x, To* y, std::int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) y[i] = static_cast<To>(x[i]);
  });
}

}  // namespace tapeflow::kernels
