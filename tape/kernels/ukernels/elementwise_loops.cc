// The arithmetic element-wise loops (tape/kernels/ukernels/internal/elementwise_loops.h), compiled once per
// instruction-set level into kernels::isa_<level> (TAPEFLOW_KERNEL_ISA; tape/CMakeLists.txt).
// Plain loops, which GCC and clang vectorize at the level's width; this file alone is compiled
// with -fno-math-errno (sqrt need not set errno, so it vectorizes; its value is the same).
#ifndef TAPEFLOW_KERNEL_ISA
#error "elementwise_loops.cc is compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif

#include <cmath>
#include <cstdint>

#include "tape/kernels/elementwise.h"
#include "tape/kernels/ukernels/internal/elementwise_loops.h"

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {
namespace {

using internal::BinaryForm;

template <class F, class T>
void binary_forms(F f, int form, const T* a, const T* b, T* y, std::int64_t n, std::int64_t c) {
  switch (form) {
    case internal::kSame:
      for (std::int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
      return;
    case internal::kScalarA: {
      const T av = a[0];
      for (std::int64_t i = 0; i < n; ++i) y[i] = f(av, b[i]);
      return;
    }
    case internal::kScalarB: {
      const T bv = b[0];
      for (std::int64_t i = 0; i < n; ++i) y[i] = f(a[i], bv);
      return;
    }
    case internal::kRowB:
      for (std::int64_t o = 0; o < n; o += c)
        for (std::int64_t j = 0; j < c; ++j) y[o + j] = f(a[o + j], b[j]);
      return;
    default:  // kRowA
      for (std::int64_t o = 0; o < n; o += c)
        for (std::int64_t j = 0; j < c; ++j) y[o + j] = f(a[j], b[o + j]);
      return;
  }
}

template <class T>
void binary(int op, int form, const T* a, const T* b, T* y, std::int64_t n, std::int64_t c) {
  switch (static_cast<BinaryOp>(op)) {
    case BinaryOp::kAdd: return binary_forms([](T u, T v) { return u + v; }, form, a, b, y, n, c);
    case BinaryOp::kSub: return binary_forms([](T u, T v) { return u - v; }, form, a, b, y, n, c);
    case BinaryOp::kMul: return binary_forms([](T u, T v) { return u * v; }, form, a, b, y, n, c);
    case BinaryOp::kDiv: return binary_forms([](T u, T v) { return u / v; }, form, a, b, y, n, c);
    case BinaryOp::kMaximum: return binary_forms([](T u, T v) { return u >= v ? u : v; }, form, a, b, y, n, c);
    case BinaryOp::kMinimum: return binary_forms([](T u, T v) { return u <= v ? u : v; }, form, a, b, y, n, c);
  }
}

template <class F, class T>
void unary_each(F f, const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <class T>
void unary(int op, const T* x, T* y, std::int64_t n) {
  switch (static_cast<UnaryOp>(op)) {
    case UnaryOp::kNegative: return unary_each([](T v) { return -v; }, x, y, n);
    case UnaryOp::kSquare: return unary_each([](T v) { return v * v; }, x, y, n);
    case UnaryOp::kSqrt: return unary_each([](T v) { return std::sqrt(v); }, x, y, n);
    case UnaryOp::kRsqrt: return unary_each([](T v) { return T(1) / std::sqrt(v); }, x, y, n);
    case UnaryOp::kReciprocal: return unary_each([](T v) { return T(1) / v; }, x, y, n);
    case UnaryOp::kAbs: return unary_each([](T v) { return v < 0 ? -v : v; }, x, y, n);
    case UnaryOp::kRelu: return unary_each([](T v) { return v > 0 ? v : T(0); }, x, y, n);
  }
}

// The multiply by scale or 0 as Dropout's x · mask (a mask of scale / 0 values) rounds: the same bits.
template <class T>
void keep_bits(const T* __restrict x, const std::uint32_t* __restrict words, T scale, T* __restrict y,
               std::int64_t w) {
  for (std::int64_t v = 0; v < w; ++v) {
    const std::uint32_t word = words[v];
    const T* xv = x + 32 * v;
    T* yv = y + 32 * v;
    for (int k = 0; k < 32; ++k) yv[k] = xv[k] * (((word >> k) & 1u) ? scale : T(0));
  }
}

}  // namespace

template <class T>
void fill_elementwise_loops(internal::ElementwiseLoops<T>& t) {
  t.binary = binary<T>;
  t.unary = unary<T>;
  t.keep_bits = keep_bits<T>;
}
template void fill_elementwise_loops<float>(internal::ElementwiseLoops<float>&);
template void fill_elementwise_loops<double>(internal::ElementwiseLoops<double>&);

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
