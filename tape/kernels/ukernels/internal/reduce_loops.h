// The inner loops of the reductions (tape/kernels/reduce.h), one table per element type, taken
// from the copy of ukernels/reduce_loops.cc compiled for cpu_isa()'s level (tape/CMakeLists.txt).
// Facts:    run[op](x, n) reduces n contiguous values in L = kReduceLanes<T> lanes (128 bytes:
//           32 floats / int32, 16 doubles / int64), each starting from the identity: lane j takes
//           x[j], x[j + L], x[j + 2L], ... of the first L·floor(n / L) values; the lanes fold
//           pairwise down to S = kReduceShortLanes<T> (32 bytes: 8 floats, 4 doubles; lane j with
//           j + L/2, then j + L/4, ...), which take the next whole blocks of S values the same
//           way, then fold down to one (j with j + S/2, ..., j + 1), and the last n mod S values
//           follow in order; runs[op] does so for `count` consecutive runs. rows[op](y, rows,
//           nrows, cols) sets y[j] = op(y[j], rows[0][j]), then rows[1][j], ... (row order per
//           column). Both orders are fixed by the source, so every level gives the same bits.
//           op: kReduceSum, kReduceMax, kReduceMin (max/min: NaN propagates, reduce.h).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace tapeflow::kernels::internal {

enum ReduceOpIndex { kReduceSum = 0, kReduceMax = 1, kReduceMin = 2 };

// The reductions: identity() and apply(accumulated, value). Max / min keep a NaN on either side.
template <class T>
struct SumOp {
  static constexpr int kIndex = kReduceSum;
  static T identity() { return T(0); }
  static T apply(T a, T b) { return a + b; }
};
template <class T>
struct MaxOp {
  static constexpr int kIndex = kReduceMax;
  static T identity() {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  static T apply(T a, T b) { return (a > b || a != a) ? a : b; }
};
template <class T>
struct MinOp {
  static constexpr int kIndex = kReduceMin;
  static T identity() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
  }
  static T apply(T a, T b) { return (a < b || a != a) ? a : b; }
};

template <class T>
inline constexpr int kReduceLanes = 128 / static_cast<int>(sizeof(T));

template <class T>
inline constexpr int kReduceShortLanes = 32 / static_cast<int>(sizeof(T));

template <class T>
struct ReduceLoops {
  T (*run[3])(const T* x, std::int64_t n);
  void (*runs[3])(const T* x, std::int64_t count, std::int64_t len, T* y);  // y[o] = run(x + o len, len)
  void (*rows[3])(T* y, const T* const* rows, std::int64_t nrows, std::int64_t cols);
};

// The loops of cpu_isa()'s level.
template <class T>
const ReduceLoops<T>& reduce_loops();

}  // namespace tapeflow::kernels::internal
