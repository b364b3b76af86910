// The contiguous loops of the arithmetic element-wise ops (tape/kernels/elementwise.h:
// binary_map, unary_map), one copy per instruction-set level (ukernels/elementwise_loops.cc).
// Facts:    binary_loop(op, form, a, b, y, n, c) computes n outputs: kSame y[i] = a[i] op b[i];
//           kScalarA a[0] op b[i]; kScalarB a[i] op b[0]; kRowB a[i] op b[i mod c] (n a multiple
//           of c); kRowA a[i mod c] op b[i]. unary_loop(op, x, y, n): y[i] = op(x[i]).
//           keep_bits(x, words, scale, y, w): y[32 v + k] = x[32 v + k] · (bit k of words[v] ? scale
//           : 0) for the w words v (32 w elements; the multiply by 0 keeps x's NaN). Each element
//           is one IEEE operation (sqrt and division correctly rounded at every width), so every
//           level gives the same bits.
#pragma once

#include <cstdint>

namespace tapeflow::kernels::internal {

enum BinaryForm { kSame = 0, kScalarA = 1, kScalarB = 2, kRowB = 3, kRowA = 4 };

template <class T>
struct ElementwiseLoops {
  void (*binary)(int op, int form, const T* a, const T* b, T* y, std::int64_t n, std::int64_t c);
  void (*unary)(int op, const T* x, T* y, std::int64_t n);
  void (*keep_bits)(const T* x, const std::uint32_t* words, T scale, T* y, std::int64_t w);
};

// The loops of cpu_isa()'s level.
template <class T>
const ElementwiseLoops<T>& elementwise_loops();

}  // namespace tapeflow::kernels::internal
