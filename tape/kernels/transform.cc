#include "tape/kernels/transform.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tape/kernels/internal/strided.h"
#include "tape/kernels/parallel.h"

namespace tapeflow::kernels {
namespace {

constexpr std::int64_t kTile = 32;

// y [rows, cols] = x^T where x is [cols, rows]; tiles of kTile x kTile.
template <class T>
void transpose_2d(const T* x, T* y, std::int64_t rows, std::int64_t cols) {
  const std::int64_t row_tiles = (rows + kTile - 1) / kTile;
  const std::int64_t grain = std::max<std::int64_t>(1, kElementwiseGrain / (kTile * cols));
  parallel_for(row_tiles, grain, [&](std::int64_t tb, std::int64_t te) {
    for (std::int64_t i0 = tb * kTile; i0 < std::min(rows, te * kTile); i0 += kTile) {
      const std::int64_t i1 = std::min(rows, i0 + kTile);
      for (std::int64_t j0 = 0; j0 < cols; j0 += kTile) {
        const std::int64_t j1 = std::min(cols, j0 + kTile);
        for (std::int64_t i = i0; i < i1; ++i)
          for (std::int64_t j = j0; j < j1; ++j) y[i * cols + j] = x[j * rows + i];
      }
    }
  });
}

template <class T>
void copy_plan(const T* x, const internal::StridedPlan<1>& plan, std::int64_t n, T* y) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t s, std::int64_t e) {
    internal::for_each_run<1>(plan, s, e, [&](std::int64_t o, const auto& offs, std::int64_t len, const auto& st) {
      const T* px = x + offs[0];
      if (st[0] == 1) std::copy(px, px + len, y + o);
      else
        for (std::int64_t j = 0; j < len; ++j) y[o + j] = px[j * st[0]];
    });
  });
}

}  // namespace

template <class T>
void transpose(const T* x, const Shape& sx, const int* perm, T* y) {
  const int r = sx.rank();
  bool seen[Shape::kMaxRank] = {};
  std::string ps;
  for (int i = 0; i < r; ++i) ps += (i ? ", " : "") + std::to_string(perm[i]);
  for (int i = 0; i < r; ++i) {
    if (perm[i] < 0 || perm[i] >= r || seen[perm[i]])
      throw std::invalid_argument("transpose: perm [" + ps + "] is not a permutation of the axes of " + sx.to_string());
    seen[perm[i]] = true;
  }
  const std::int64_t n = sx.num_elements();
  if (n == 0) return;
  const auto xs = sx.strides();
  std::int64_t dims[Shape::kMaxRank], st[Shape::kMaxRank];
  for (int i = 0; i < r; ++i) {
    dims[i] = sx[perm[i]];
    st[i] = xs[perm[i]];
  }
  const auto plan = internal::make_plan<1>(r, dims, {st});
  const auto& d = plan.dims;
  const auto& s = plan.strides[0];
  if (plan.rank == 2 && s[0] == 1 && s[1] == d[0]) {
    transpose_2d(x, y, d[0], d[1]);
    return;
  }
  if (plan.rank == 3 && s[0] == d[1] * d[2] && s[1] == 1 && s[2] == d[1]) {
    const std::int64_t m = d[1] * d[2];
    for (std::int64_t b = 0; b < d[0]; ++b) transpose_2d(x + b * m, y + b * m, d[1], d[2]);
    return;
  }
  copy_plan(x, plan, n, y);
}

template <class T>
void slice(const T* x, const Shape& sx, const std::int64_t* begin, const Shape& sy, T* y) {
  if (sx.rank() != sy.rank())
    throw std::invalid_argument("slice: output rank of " + sy.to_string() + " differs from input " + sx.to_string());
  const auto xs = sx.strides();
  std::int64_t base = 0;
  for (int i = 0; i < sx.rank(); ++i) {
    if (begin[i] < 0 || begin[i] + sy[i] > sx[i])
      throw std::invalid_argument("slice: begin " + std::to_string(begin[i]) + " size " + std::to_string(sy[i]) +
                                  " out of bounds on axis " + std::to_string(i) + " of " + sx.to_string());
    base += begin[i] * xs[i];
  }
  const std::int64_t n = sy.num_elements();
  if (n == 0) return;
  const auto plan = internal::make_plan<1>(sy.rank(), sy.begin(), {xs.data()});
  copy_plan(x + base, plan, n, y);
}

template <class T>
void concat(const T* const* xs, const Shape* shapes, int count, int axis, T* y) {
  if (count <= 0) throw std::invalid_argument("concat: needs at least one input, got " + std::to_string(count));
  const Shape& s0 = shapes[0];
  const int a = normalize_axis(axis, s0.rank(), "concat");
  if (s0.rank() == 0) throw std::invalid_argument("concat: cannot concatenate scalars");
  std::int64_t outer = 1, after = 1, row = 0;
  for (int i = 0; i < a; ++i) outer *= s0[i];
  for (int i = a + 1; i < s0.rank(); ++i) after *= s0[i];
  for (int c = 0; c < count; ++c) {
    const Shape& s = shapes[c];
    bool ok = s.rank() == s0.rank();
    for (int i = 0; ok && i < s.rank(); ++i) ok = i == a || s[i] == s0[i];
    if (!ok)
      throw std::invalid_argument("concat: shapes " + s0.to_string() + " and " + s.to_string() +
                                  " differ outside axis " + std::to_string(axis));
    row += s[a] * after;
  }
  if (outer * row == 0) return;
  parallel_for(outer, std::max<std::int64_t>(1, kElementwiseGrain / row), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) {
      T* dst = y + o * row;
      for (int c = 0; c < count; ++c) {
        const std::int64_t len = shapes[c][a] * after;
        std::copy(xs[c] + o * len, xs[c] + (o + 1) * len, dst);
        dst += len;
      }
    }
  });
}

template <class T, class I>
void gather(const T* params, const Shape& sp, const I* indices, std::int64_t n_indices, int axis, T* y) {
  if (sp.rank() == 0) throw std::invalid_argument("gather: params must have rank >= 1, got a scalar");
  const int a = normalize_axis(axis, sp.rank(), "gather");
  const std::int64_t dim = sp[a];
  for (std::int64_t j = 0; j < n_indices; ++j)
    if (indices[j] < 0 || indices[j] >= dim)
      throw std::invalid_argument("gather: index " + std::to_string(indices[j]) + " out of range [0, " +
                                  std::to_string(dim) + ")");
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < a; ++i) outer *= sp[i];
  for (int i = a + 1; i < sp.rank(); ++i) inner *= sp[i];
  const std::int64_t rows = outer * n_indices;
  if (rows * inner == 0) return;
  parallel_for(rows, std::max<std::int64_t>(1, kElementwiseGrain / inner), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const std::int64_t o = r / n_indices, j = r % n_indices;
      const T* src = params + (o * dim + static_cast<std::int64_t>(indices[j])) * inner;
      std::copy(src, src + inner, y + r * inner);
    }
  });
}

template <class T, class I>
void unsorted_segment_sum(const T* data, std::int64_t rows, std::int64_t row_size, const I* ids,
                          std::int64_t num_segments, T* y) {
  for (std::int64_t r = 0; r < rows; ++r)
    if (ids[r] >= num_segments)
      throw std::invalid_argument("unsorted_segment_sum: segment id " + std::to_string(ids[r]) +
                                  " out of range [0, " + std::to_string(num_segments) + ")");
  std::fill(y, y + num_segments * row_size, T(0));
  if (row_size == 0) return;
  // Parallel over column blocks; every column adds its rows in order.
  constexpr std::int64_t kBlock = 256;
  const std::int64_t blocks = (row_size + kBlock - 1) / kBlock;
  const std::int64_t grain = std::max<std::int64_t>(1, kElementwiseGrain / std::max<std::int64_t>(1, rows * kBlock));
  parallel_for(blocks, grain, [&](std::int64_t b, std::int64_t e) {
    const std::int64_t j0 = b * kBlock, j1 = std::min(row_size, e * kBlock);
    for (std::int64_t r = 0; r < rows; ++r) {
      if (ids[r] < 0) continue;
      const T* src = data + r * row_size;
      T* dst = y + static_cast<std::int64_t>(ids[r]) * row_size;
      for (std::int64_t j = j0; j < j1; ++j) dst[j] += src[j];
    }
  });
}

template <class T, class I>
void one_hot(const I* indices, std::int64_t n, std::int64_t depth, T on, T off, T* y) {
  std::fill(y, y + n * depth, off);
  for (std::int64_t i = 0; i < n; ++i)
    if (indices[i] >= 0 && indices[i] < depth) y[i * depth + static_cast<std::int64_t>(indices[i])] = on;
}

#define TAPEFLOW_COPY(T)                                                                                  \
  template void transpose<T>(const T*, const Shape&, const int*, T*);                                     \
  template void slice<T>(const T*, const Shape&, const std::int64_t*, const Shape&, T*);                  \
  template void concat<T>(const T* const*, const Shape*, int, int, T*);                                   \
  template void gather<T, std::int32_t>(const T*, const Shape&, const std::int32_t*, std::int64_t, int, T*); \
  template void gather<T, std::int64_t>(const T*, const Shape&, const std::int64_t*, std::int64_t, int, T*);
TAPEFLOW_COPY(float)
TAPEFLOW_COPY(double)
TAPEFLOW_COPY(std::int32_t)
TAPEFLOW_COPY(std::int64_t)
TAPEFLOW_COPY(bool)
#undef TAPEFLOW_COPY

#define TAPEFLOW_SEGMENT(T, I)                                                                             \
  template void unsorted_segment_sum<T, I>(const T*, std::int64_t, std::int64_t, const I*, std::int64_t, T*); \
  template void one_hot<T, I>(const I*, std::int64_t, std::int64_t, T, T, T*);
TAPEFLOW_SEGMENT(float, std::int32_t)
TAPEFLOW_SEGMENT(float, std::int64_t)
TAPEFLOW_SEGMENT(double, std::int32_t)
TAPEFLOW_SEGMENT(double, std::int64_t)
TAPEFLOW_SEGMENT(std::int32_t, std::int32_t)
TAPEFLOW_SEGMENT(std::int32_t, std::int64_t)
TAPEFLOW_SEGMENT(std::int64_t, std::int32_t)
TAPEFLOW_SEGMENT(std::int64_t, std::int64_t)
#undef TAPEFLOW_SEGMENT
template void one_hot<bool, std::int32_t>(const std::int32_t*, std::int64_t, std::int64_t, bool, bool, bool*);
template void one_hot<bool, std::int64_t>(const std::int64_t*, std::int64_t, std::int64_t, bool, bool, bool*);

}  // namespace tapeflow::kernels
