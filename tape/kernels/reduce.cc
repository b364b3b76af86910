#include "tape/kernels/reduce.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tape/kernels/internal/isa_dispatch.h"
#include "tape/kernels/ukernels/internal/reduce_loops.h"
#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {

// The copies of ukernels/reduce_loops.cc (tape/CMakeLists.txt).
TAPEFLOW_ISA_DECLARE_FILL(ReduceLoops, fill_reduce_loops)

namespace internal {
TAPEFLOW_ISA_TABLE(ReduceLoops, reduce_loops, fill_reduce_loops)
template const ReduceLoops<float>& reduce_loops<float>();
template const ReduceLoops<double>& reduce_loops<double>();
template const ReduceLoops<std::int32_t>& reduce_loops<std::int32_t>();
template const ReduceLoops<std::int64_t>& reduce_loops<std::int64_t>();
}  // namespace internal

namespace {

using internal::MaxOp;
using internal::MinOp;
using internal::SumOp;

// Mixed-radix walk over a set of (size, stride) groups, outermost first.
struct Radix {
  int n = 0;
  std::int64_t size[Shape::kMaxRank];
  std::int64_t stride[Shape::kMaxRank];
  void add(std::int64_t s, std::int64_t st) {
    size[n] = s;
    stride[n] = st;
    ++n;
  }
  std::int64_t total() const {
    std::int64_t t = 1;
    for (int i = 0; i < n; ++i) t *= size[i];
    return t;
  }
  std::int64_t offset(std::int64_t idx) const {
    std::int64_t off = 0;
    for (int i = n - 1; i >= 0; --i) {
      off += (idx % size[i]) * stride[i];
      idx /= size[i];
    }
    return off;
  }
  // Calls f(offset) for the linear indices [begin, end), in order.
  template <class F>
  void for_range(std::int64_t begin, std::int64_t end, F&& f) const {
    std::int64_t idx[Shape::kMaxRank];
    std::int64_t rem = begin, off = 0;
    for (int i = n - 1; i >= 0; --i) {
      idx[i] = rem % size[i];
      rem /= size[i];
      off += idx[i] * stride[i];
    }
    for (std::int64_t q = begin; q < end; ++q) {
      f(off);
      for (int i = n - 1; i >= 0; --i) {
        off += stride[i];
        if (++idx[i] < size[i]) break;
        off -= idx[i] * stride[i];
        idx[i] = 0;
      }
    }
  }
};

// Column blocks of a kept-innermost reduction (one task each).
constexpr std::int64_t kColBlock = 2048;

// Reduction of a contiguous run: fixed-size chunks reduced in parallel, combined in order.
// Rows handed to the row loop at once (pointers gathered from the mixed-radix walk).
constexpr std::int64_t kRowBatch = 64;

// Calls loop(rows, count) for batches of the row offsets [begin, end) of `red`, in order.
template <class T, class F>
void for_row_batches(const Radix& red, std::int64_t begin, std::int64_t end, const T* base, F&& loop) {
  const T* batch[kRowBatch];
  std::int64_t k = 0;
  red.for_range(begin, end, [&](std::int64_t off) {
    batch[k++] = base + off;
    if (k == kRowBatch) loop(batch, k), k = 0;
  });
  if (k > 0) loop(batch, k);
}

// Reduction of a contiguous run: fixed-size chunks reduced in parallel, combined in order.
template <class Op, class T>
T reduce_contig(T (*run)(const T*, std::int64_t), const T* x, std::int64_t n) {
  if (n <= kReduceChunk) return run(x, n);
  const std::int64_t chunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<T> part(static_cast<std::size_t>(chunks));
  parallel_for(chunks, std::max<std::int64_t>(1, kElementwiseGrain / kReduceChunk), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      const std::int64_t s = c * kReduceChunk;
      part[c] = run(x + s, std::min(kReduceChunk, n - s));
    }
  });
  T r = Op::identity();
  for (const T& p : part) r = Op::apply(r, p);
  return r;
}

template <class Op, class T>
void reduce_impl(const T* x, const Shape& sx, std::uint32_t mask, T* y, const char* name) {
  const int r = sx.rank();
  if ((r < 32 ? (mask >> r) : 0u) != 0)
    throw std::invalid_argument(std::string(name) + ": axes mask " + std::to_string(mask) +
                                " names an axis beyond rank " + std::to_string(r) + " of " + sx.to_string());
  std::int64_t out_n = 1, red_n = 1;
  for (int i = 0; i < r; ++i) ((mask >> i) & 1u ? red_n : out_n) *= sx[i];
  if (out_n == 0) return;
  if (red_n == 0) {
    std::fill(y, y + out_n, Op::identity());
    return;
  }
  // Coalesce into alternating kept/reduced groups (size-1 dims dropped; x is contiguous).
  const auto st = sx.strides();
  std::int64_t gsize[Shape::kMaxRank], gstride[Shape::kMaxRank];
  bool gred[Shape::kMaxRank];
  int ng = 0;
  for (int i = 0; i < r; ++i) {
    if (sx[i] == 1) continue;
    const bool red = (mask >> i) & 1u;
    if (ng > 0 && gred[ng - 1] == red) {
      gsize[ng - 1] *= sx[i];
      gstride[ng - 1] = st[i];
      continue;
    }
    gsize[ng] = sx[i];
    gstride[ng] = st[i];
    gred[ng] = red;
    ++ng;
  }
  if (ng == 0 || (ng == 1 && !gred[0])) {  // nothing is really reduced
    std::copy(x, x + out_n, y);
    return;
  }
  if (gred[ng - 1]) {
    // Innermost group reduced: each output reduces contiguous runs of length len.
    const std::int64_t len = gsize[ng - 1];
    const auto& loops = internal::reduce_loops<T>();
    auto* const run = loops.run[Op::kIndex];
    Radix kept, outer;
    for (int g = 0; g < ng - 1; ++g) (gred[g] ? outer : kept).add(gsize[g], gstride[g]);
    const std::int64_t grain = std::max<std::int64_t>(1, kElementwiseGrain / red_n);
    if (outer.n == 0 && len <= kReduceChunk) {  // consecutive runs, one per output
      auto* const runs = loops.runs[Op::kIndex];
      parallel_for(out_n, grain, [&](std::int64_t b, std::int64_t e) { runs(x + b * len, e - b, len, y + b); });
      return;
    }
    parallel_for(out_n, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o) {
        const T* base = x + kept.offset(o);
        T acc = Op::identity();
        outer.for_range(0, outer.total(), [&](std::int64_t off) { acc = Op::apply(acc, reduce_contig<Op>(run, base + off, len)); });
        y[o] = acc;
      }
    });
    return;
  }
  // Innermost group kept: accumulate rows of length cols.
  const std::int64_t cols = gsize[ng - 1];
  Radix kept, red;
  for (int g = 0; g < ng - 1; ++g) (gred[g] ? red : kept).add(gsize[g], gstride[g]);
  const std::int64_t outer_n = out_n / cols;
  auto* const rows = internal::reduce_loops<T>().rows[Op::kIndex];
  const std::int64_t nb = (cols + kColBlock - 1) / kColBlock;
  if (const std::int64_t rows_per = reduce_sum_rows_per_partial(outer_n, red_n, cols); rows_per < red_n) {
    // Few outputs, long reduction: fixed-size row chunks give partial rows, combined in order.
    const std::int64_t chunks = (red_n + rows_per - 1) / rows_per;
    std::vector<T> part(static_cast<std::size_t>(chunks * out_n), Op::identity());
    parallel_for(chunks, std::max<std::int64_t>(1, kElementwiseGrain / (rows_per * cols)), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t c = b; c < e; ++c) {
        const std::int64_t q0 = c * rows_per, q1 = std::min(red_n, q0 + rows_per);
        for (std::int64_t o = 0; o < outer_n; ++o) {
          T* pr = part.data() + (c * outer_n + o) * cols;
          for_row_batches(red, q0, q1, x + kept.offset(o),
                          [&](const T* const* batch, std::int64_t k) { rows(pr, batch, k, cols); });
        }
      }
    });
    std::fill(y, y + out_n, Op::identity());
    for (std::int64_t c = 0; c < chunks; ++c) {
      const T* pr = part.data() + c * out_n;
      for (std::int64_t j = 0; j < out_n; ++j) y[j] = Op::apply(y[j], pr[j]);
    }
    return;
  }
  const std::int64_t block = std::min(cols, kColBlock);
  const std::int64_t grain = std::max<std::int64_t>(1, kElementwiseGrain / (red_n * block));
  parallel_for(outer_n * nb, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t o = t / nb, j0 = (t % nb) * kColBlock, j1 = std::min(cols, j0 + kColBlock);
      T* yr = y + o * cols;
      std::fill(yr + j0, yr + j1, Op::identity());
      for_row_batches(red, 0, red_n, x + kept.offset(o) + j0,
                      [&](const T* const* batch, std::int64_t k) { rows(yr + j0, batch, k, j1 - j0); });
    }
  });
}

template <bool kMax, class T>
void arg_impl(const T* x, const Shape& sx, int axis, std::int64_t* y, const char* name) {
  const int a = normalize_axis(axis, sx.rank(), name);
  std::int64_t outer = 1, inner = 1;
  const std::int64_t n = sx.rank() == 0 ? 1 : sx[a];
  for (int i = 0; i < a; ++i) outer *= sx[i];
  for (int i = a + 1; i < sx.rank(); ++i) inner *= sx[i];
  if (outer * inner == 0) return;
  if (n == 0)
    throw std::invalid_argument(std::string(name) + ": reduction axis " + std::to_string(axis) + " is empty in shape " +
                                sx.to_string());
  auto better = [](T v, T best) {
    if constexpr (kMax) return v > best || (v != v && best == best);
    else return v < best || (v != v && best == best);
  };
  parallel_for(outer, std::max<std::int64_t>(1, kElementwiseGrain / (n * inner)), [&](std::int64_t b, std::int64_t e) {
    std::vector<T> best(inner > 1 ? static_cast<std::size_t>(inner) : 0);
    for (std::int64_t o = b; o < e; ++o) {
      const T* xo = x + o * n * inner;
      std::int64_t* yo = y + o * inner;
      if (inner == 1) {
        T bv = xo[0];
        std::int64_t bi = 0;
        for (std::int64_t k = 1; k < n; ++k)
          if (better(xo[k], bv)) bv = xo[k], bi = k;
        yo[0] = bi;
        continue;
      }
      std::copy(xo, xo + inner, best.begin());
      std::fill(yo, yo + inner, 0);
      for (std::int64_t k = 1; k < n; ++k) {
        const T* row = xo + k * inner;
        for (std::int64_t i = 0; i < inner; ++i)
          if (better(row[i], best[i])) best[i] = row[i], yo[i] = k;
      }
    }
  });
}

}  // namespace

std::int64_t reduce_sum_rows_per_partial(std::int64_t outer, std::int64_t rows, std::int64_t cols) {
  // Few outputs and a long reduction: fixed chunks of rows in parallel; otherwise each task sums
  // all the rows of its column block.
  const std::int64_t nb = (cols + kColBlock - 1) / kColBlock;
  if (outer * nb < 4 && rows * cols > 2 * kElementwiseGrain) return std::max<std::int64_t>(1, kReduceChunk / cols);
  return rows;
}

template <class T>
void reduce_sum(const T* x, const Shape& sx, std::uint32_t axes_mask, T* y) {
  reduce_impl<SumOp<T>>(x, sx, axes_mask, y, "reduce_sum");
}
template <class T>
void reduce_max(const T* x, const Shape& sx, std::uint32_t axes_mask, T* y) {
  reduce_impl<MaxOp<T>>(x, sx, axes_mask, y, "reduce_max");
}
template <class T>
void reduce_min(const T* x, const Shape& sx, std::uint32_t axes_mask, T* y) {
  reduce_impl<MinOp<T>>(x, sx, axes_mask, y, "reduce_min");
}
template <class T>
void argmax(const T* x, const Shape& sx, int axis, std::int64_t* y) {
  arg_impl<true>(x, sx, axis, y, "argmax");
}
template <class T>
void argmin(const T* x, const Shape& sx, int axis, std::int64_t* y) {
  arg_impl<false>(x, sx, axis, y, "argmin");
}

#define TAPEFLOW_REDUCE(T)                                                  \
  template void reduce_sum<T>(const T*, const Shape&, std::uint32_t, T*);   \
  template void reduce_max<T>(const T*, const Shape&, std::uint32_t, T*);   \
  template void reduce_min<T>(const T*, const Shape&, std::uint32_t, T*);   \
  template void argmax<T>(const T*, const Shape&, int, std::int64_t*);      \
  template void argmin<T>(const T*, const Shape&, int, std::int64_t*);
TAPEFLOW_REDUCE(float)
TAPEFLOW_REDUCE(double)
TAPEFLOW_REDUCE(std::int32_t)
TAPEFLOW_REDUCE(std::int64_t)
#undef TAPEFLOW_REDUCE

}  // namespace tapeflow::kernels
