// The reductions' inner loops (tape/kernels/ukernels/internal/reduce_loops.h), compiled once per
// instruction-set level into kernels::isa_<level> (TAPEFLOW_KERNEL_ISA; tape/CMakeLists.txt).
// Plain loops over explicit lanes, which GCC and clang vectorize at the level's width without
// reordering anything: a run's 128 bytes of lanes are 8 SSE registers at the baseline (16 hold
// them without spilling), 4 at AVX2 and 2 at AVX-512, each its own dependency chain; the row loop
// adds 4 rows per pass over y (one store per 4 additions), in row order. So the order of every
// operation is the source's, the same at every level, and so are the bits.
#ifndef TAPEFLOW_KERNEL_ISA
#error "reduce_loops.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#include <cstdint>

#include "tape/kernels/ukernels/internal/reduce_loops.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {
namespace {

using internal::MaxOp;
using internal::MinOp;
using internal::SumOp;

// acc[j] = op(acc[j], acc[j + kW]) for j < kW, then kW / 2, ..., down to kTo lanes.
template <class Op, int kW, int kTo, class T>
void fold(T* acc) {
  if constexpr (kW >= kTo) {
    for (int j = 0; j < kW; ++j) acc[j] = Op::apply(acc[j], acc[j + kW]);
    fold<Op, kW / 2, kTo>(acc);
  }
}

// The lanes of `acc` (kW of them) over the whole blocks of kW values of x[i, n) that `i` starts at,
// i advanced past them. The first block sets each lane to op(identity, x): the same bits as
// starting the lanes at the identity, without a memset of the lanes.
template <class Op, int kW, class T>
void lanes(T* acc, const T* __restrict x, std::int64_t& i, std::int64_t n) {
  for (int j = 0; j < kW; ++j) acc[j] = Op::apply(Op::identity(), x[i + j]);
  for (i += kW; i + kW <= n; i += kW)
    for (int j = 0; j < kW; ++j) acc[j] = Op::apply(acc[j], x[i + j]);
}

template <class Op, class T>
T run(const T* __restrict x, std::int64_t n) {
  constexpr int kL = internal::kReduceLanes<T>, kS = internal::kReduceShortLanes<T>;
  std::int64_t i = 0;
  T r = Op::identity();
  if (n >= kS) {
    T acc[kL];
    if (n >= kL) {
      lanes<Op, kL>(acc, x, i, n);
      fold<Op, kL / 2, kS>(acc);
      for (; i + kS <= n; i += kS)
        for (int j = 0; j < kS; ++j) acc[j] = Op::apply(acc[j], x[i + j]);
    } else {
      lanes<Op, kS>(acc, x, i, n);
    }
    fold<Op, kS / 2, 1>(acc);
    r = acc[0];
  }
  for (; i < n; ++i) r = Op::apply(r, x[i]);
  return r;
}

template <class Op, class T>
void runs(const T* x, std::int64_t count, std::int64_t len, T* y) {
  for (std::int64_t o = 0; o < count; ++o) y[o] = run<Op>(x + o * len, len);
}

template <class Op, class T>
void rows(T* __restrict y, const T* const* rows, std::int64_t nrows, std::int64_t cols) {
  std::int64_t r = 0;
  for (; r + 4 <= nrows; r += 4) {
    const T* __restrict a = rows[r];
    const T* __restrict b = rows[r + 1];
    const T* __restrict c = rows[r + 2];
    const T* __restrict d = rows[r + 3];
    for (std::int64_t j = 0; j < cols; ++j)
      y[j] = Op::apply(Op::apply(Op::apply(Op::apply(y[j], a[j]), b[j]), c[j]), d[j]);
  }
  for (; r < nrows; ++r) {
    const T* __restrict a = rows[r];
    for (std::int64_t j = 0; j < cols; ++j) y[j] = Op::apply(y[j], a[j]);
  }
}

}  // namespace

template <class T>
void fill_reduce_loops(internal::ReduceLoops<T>& t) {
  t.run[internal::kReduceSum] = run<SumOp<T>, T>;
  t.run[internal::kReduceMax] = run<MaxOp<T>, T>;
  t.run[internal::kReduceMin] = run<MinOp<T>, T>;
  t.runs[internal::kReduceSum] = runs<SumOp<T>, T>;
  t.runs[internal::kReduceMax] = runs<MaxOp<T>, T>;
  t.runs[internal::kReduceMin] = runs<MinOp<T>, T>;
  t.rows[internal::kReduceSum] = rows<SumOp<T>, T>;
  t.rows[internal::kReduceMax] = rows<MaxOp<T>, T>;
  t.rows[internal::kReduceMin] = rows<MinOp<T>, T>;
}

template void fill_reduce_loops<float>(internal::ReduceLoops<float>&);
template void fill_reduce_loops<double>(internal::ReduceLoops<double>&);
template void fill_reduce_loops<std::int32_t>(internal::ReduceLoops<std::int32_t>&);
template void fill_reduce_loops<std::int64_t>(internal::ReduceLoops<std::int64_t>&);

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
