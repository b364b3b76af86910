#include "tape/kernels/nn.h"

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <numbers>
#include <string>
#include <type_traits>
#include <utility>

#include "tape/kernels/internal/isa_dispatch.h"
#include "tape/kernels/internal/row_sums.h"
#include "tape/kernels/parallel.h"

// X(name, (parameters), (arguments)) for the softmax row loops of every level
// (ukernels/softmax_loops.cc); T is the element type.
#define TAPEFLOW_SOFTMAX_LOOPS(X)                                                                            \
  X(softmax_rows, (const T* x, std::int64_t r0, std::int64_t r1, std::int64_t cols, T* y), (x, r0, r1, cols, y)) \
  X(softmax_grad_rows, (const T* y, const T* g, std::int64_t r0, std::int64_t r1, std::int64_t cols, T* dx),     \
    (y, g, r0, r1, cols, dx))

namespace tapeflow::kernels {

TAPEFLOW_ISA_DECLARE(TAPEFLOW_SOFTMAX_LOOPS)

// The float GELU loops of every level (ukernels/gelu_loops.cc), over elements [b, e) (T = float).
#define TAPEFLOW_GELU_LOOPS(X)                                                                   \
  X(gelu_run, (const T* x, T* y, std::int64_t b, std::int64_t e), (x, y, b, e))                  \
  X(gelu_grad_run, (const T* dy, const T* x, T* dx, std::int64_t b, std::int64_t e), (dy, x, dx, b, e))
TAPEFLOW_ISA_DECLARE(TAPEFLOW_GELU_LOOPS)

namespace {

TAPEFLOW_SOFTMAX_LOOPS(TAPEFLOW_ISA_DISPATCH)
TAPEFLOW_GELU_LOOPS(TAPEFLOW_ISA_DISPATCH)

template <class T>
T row_max(const T* x, std::int64_t cols) {
  T m = x[0];
  for (std::int64_t j = 1; j < cols; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

using internal::for_row_blocks;
using internal::for_rows;

// log(sum(exp(x))) over one row, shifted by the row max for stability.
template <class T>
T log_sum_exp(const T* x, std::int64_t cols) {
  const T m = row_max(x, cols);
  T s = 0;
  for (std::int64_t j = 0; j < cols; ++j) s += std::exp(x[j] - m);
  return m + std::log(s);
}


// Runs f(begin, end) over [0, n) in parallel chunks of at least kElementwiseGrain.
template <class F>
void for_chunks(std::int64_t n, F&& f) {
  parallel_for(n, kElementwiseGrain, std::forward<F>(f));
}

// The element loops take restrict pointers and scalars by value, and load both select operands
// unconditionally: a conditional load or multiply is control flow GCC will not vectorize (it may
// trap), so the leaky selects are written with Eigen's packet ops (8 floats with AVX).
template <class T>
void tanh_grad_run(const T* __restrict y, const T* __restrict dy, T* __restrict dx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (T(1) - y[i] * y[i]);
}
template <class T>
void relu_grad_run(const T* __restrict dy, const T* __restrict y, T* __restrict dx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T d = dy[i];
    dx[i] = y[i] > T(0) ? d : T(0);
  }
}
// dx = dy · (y < 0 ? y + 1 : 1), in packets (a select, no branch on the sign).
template <class T>
void elu_grad_run(const T* __restrict dy, const T* __restrict y, T* __restrict dx, std::int64_t n) {
  namespace ei = Eigen::internal;
  using P = typename ei::packet_traits<T>::type;
  constexpr std::int64_t kLanes = ei::packet_traits<T>::size;
  const P zero = ei::pset1<P>(T(0)), one = ei::pset1<P>(T(1));
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const P yi = ei::ploadu<P>(y + i);
    const P factor = ei::pselect(ei::pcmp_lt(yi, zero), ei::padd(yi, one), one);
    ei::pstoreu(dx + i, ei::pmul(ei::ploadu<P>(dy + i), factor));
  }
  for (; i < n; ++i) dx[i] = dy[i] * (y[i] < T(0) ? y[i] + T(1) : T(1));
}
// out = x > 0 ? v : alpha·v (leaky_relu: v = x; leaky_relu_grad: v = dy).
template <class T>
void leaky_select_run(const T* __restrict x, const T* __restrict v, T alpha, T* __restrict out, std::int64_t n) {
  namespace ei = Eigen::internal;
  using P = typename ei::packet_traits<T>::type;
  constexpr std::int64_t kLanes = ei::packet_traits<T>::size;
  const P zero = ei::pset1<P>(T(0)), pa = ei::pset1<P>(alpha);
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const P vi = ei::ploadu<P>(v + i);
    ei::pstoreu(out + i, ei::pselect(ei::pcmp_lt(zero, ei::ploadu<P>(x + i)), vi, ei::pmul(pa, vi)));
  }
  for (; i < n; ++i) out[i] = x[i] > T(0) ? v[i] : alpha * v[i];
}

}  // namespace

template <class T>
void tanh(const T* x, T* y, std::int64_t n) {
  for_chunks(n, [x, y](std::int64_t b, std::int64_t e) {
    if constexpr (std::is_same_v<T, float>) {
      // Eigen's packet tanh (8 lanes with AVX); its scalar tail uses the same approximation.
      Eigen::Map<Eigen::ArrayXf>(y + b, e - b) = Eigen::Map<const Eigen::ArrayXf>(x + b, e - b).tanh();
    } else {
      for (std::int64_t i = b; i < e; ++i) y[i] = std::tanh(x[i]);
    }
  });
}

template <class T>
void sigmoid(const T* x, T* y, std::int64_t n) {
  for_chunks(n, [x, y](std::int64_t b, std::int64_t e) {
    if constexpr (std::is_same_v<T, float>) {
      Eigen::Map<Eigen::ArrayXf>(y + b, e - b) = Eigen::Map<const Eigen::ArrayXf>(x + b, e - b).logistic();
    } else {
      for (std::int64_t i = b; i < e; ++i)
        y[i] = x[i] >= 0 ? T(1) / (T(1) + std::exp(-x[i])) : std::exp(x[i]) / (T(1) + std::exp(x[i]));
    }
  });
}

template <class T>
void elu(const T* x, T* y, std::int64_t n) {
  for_chunks(n, [x, y](std::int64_t b, std::int64_t e) {
    if constexpr (std::is_same_v<T, float>) {
      // Eigen 3.4's select() is not vectorised (it would call expm1f per element): expm1 over a
      // block first, then keep x where x > 0, in blocks that stay in L1.
      constexpr std::int64_t kBlock = 2048;
      for (std::int64_t s = b; s < e; s += kBlock) {
        const std::int64_t len = std::min(kBlock, e - s);
        Eigen::Map<Eigen::ArrayXf>(y + s, len) = Eigen::Map<const Eigen::ArrayXf>(x + s, len).expm1();
        for (std::int64_t i = s; i < s + len; ++i) y[i] = x[i] > 0.f ? x[i] : y[i];
      }
    } else {
      for (std::int64_t i = b; i < e; ++i) y[i] = x[i] > 0 ? x[i] : std::expm1(x[i]);
    }
  });
}

template <class T>
void tanh_grad(const T* y, const T* dy, T* dx, std::int64_t n) {
  for_chunks(n, [=](std::int64_t b, std::int64_t e) { tanh_grad_run(y + b, dy + b, dx + b, e - b); });
}

template <class T>
void elu_grad(const T* dy, const T* y, T* dx, std::int64_t n) {
  for_chunks(n, [=](std::int64_t b, std::int64_t e) { elu_grad_run(dy + b, y + b, dx + b, e - b); });
}

template <class T>
void relu_grad(const T* dy, const T* y, T* dx, std::int64_t n) {
  for_chunks(n, [=](std::int64_t b, std::int64_t e) { relu_grad_run(dy + b, y + b, dx + b, e - b); });
}

template <class T>
void leaky_relu(const T* x, T alpha, T* y, std::int64_t n) {
  for_chunks(n, [=](std::int64_t b, std::int64_t e) { leaky_select_run(x + b, x + b, alpha, y + b, e - b); });
}

template <class T>
void leaky_relu_grad(const T* dy, const T* x, T alpha, T* dx, std::int64_t n) {
  for_chunks(n, [=](std::int64_t b, std::int64_t e) { leaky_select_run(x + b, dy + b, alpha, dx + b, e - b); });
}

// for_row_blocks' blocks of rows, each through the row loops of cpu_isa()'s level.
template <class T>
void softmax(const T* x, std::int64_t rows, std::int64_t cols, T* y) {
  if (cols == 0) return;
  for_row_blocks(rows, cols, [&](std::int64_t r0, std::int64_t r1) { softmax_rows<T>(x, r0, r1, cols, y); });
}

template <class T>
void softmax_grad(const T* y, const T* g, std::int64_t rows, std::int64_t cols, T* dx) {
  if (cols == 0) return;
  for_row_blocks(rows, cols, [&](std::int64_t r0, std::int64_t r1) { softmax_grad_rows<T>(y, g, r0, r1, cols, dx); });
}

template <class T>
void log_softmax(const T* x, std::int64_t rows, std::int64_t cols, T* y) {
  if (cols == 0) return;
  for_rows(rows, cols, [&](std::int64_t r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const T lse = log_sum_exp(xr, cols);
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = xr[j] - lse;
  });
}

template <class T, class I>
void sparse_softmax_xent(const T* logits, const I* labels, std::int64_t rows, std::int64_t cols, T* loss,
                         T* backprop) {
  for (std::int64_t r = 0; r < rows; ++r)
    if (labels[r] < 0 || labels[r] >= cols)
      throw std::invalid_argument("sparse_softmax_cross_entropy_with_logits: label " + std::to_string(labels[r]) +
                                  " at row " + std::to_string(r) + " is outside the valid range [0, " +
                                  std::to_string(cols) + ")");
  for_rows(rows, cols, [&](std::int64_t r) {
    const T* xr = logits + r * cols;
    const T lse = log_sum_exp(xr, cols);
    const std::int64_t label = static_cast<std::int64_t>(labels[r]);
    loss[r] = lse - xr[label];
    if (backprop) {
      T* br = backprop + r * cols;
      for (std::int64_t j = 0; j < cols; ++j) br[j] = std::exp(xr[j] - lse);
      br[label] -= T(1);
    }
  });
}

#define TAPEFLOW_ACTIVATIONS(T)                                                \
  template void tanh<T>(const T*, T*, std::int64_t);                           \
  template void sigmoid<T>(const T*, T*, std::int64_t);                        \
  template void tanh_grad<T>(const T*, const T*, T*, std::int64_t);            \
  template void elu<T>(const T*, T*, std::int64_t);                            \
  template void elu_grad<T>(const T*, const T*, T*, std::int64_t);             \
  template void relu_grad<T>(const T*, const T*, T*, std::int64_t);            \
  template void leaky_relu<T>(const T*, T, T*, std::int64_t);                  \
  template void leaky_relu_grad<T>(const T*, const T*, T, T*, std::int64_t);
TAPEFLOW_ACTIVATIONS(float)
TAPEFLOW_ACTIVATIONS(double)
#undef TAPEFLOW_ACTIVATIONS

template void softmax<float>(const float*, std::int64_t, std::int64_t, float*);
template void softmax<double>(const double*, std::int64_t, std::int64_t, double*);
template void softmax_grad<float>(const float*, const float*, std::int64_t, std::int64_t, float*);
template void softmax_grad<double>(const double*, const double*, std::int64_t, std::int64_t, double*);
template void log_softmax<float>(const float*, std::int64_t, std::int64_t, float*);
template void log_softmax<double>(const double*, std::int64_t, std::int64_t, double*);
template void sparse_softmax_xent<float, std::int32_t>(const float*, const std::int32_t*, std::int64_t, std::int64_t,
                                                       float*, float*);
template void sparse_softmax_xent<float, std::int64_t>(const float*, const std::int64_t*, std::int64_t, std::int64_t,
                                                       float*, float*);
template void sparse_softmax_xent<double, std::int32_t>(const double*, const std::int32_t*, std::int64_t,
                                                        std::int64_t, double*, double*);
template void sparse_softmax_xent<double, std::int64_t>(const double*, const std::int64_t*, std::int64_t,
                                                        std::int64_t, double*, double*);


// float: the per-level loops (Eigen's rational erf and exp as its SSE packets compute them, the
// same bits at every level and position); double: Eigen's arrays (std::erf per element, its
// packet exp).
template <class T>
void gelu(const T* x, T* y, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    parallel_for(n, kElementwiseGrain / 8, [&](std::int64_t b, std::int64_t e) { gelu_run<float>(x, y, b, e); });
  } else {
    const T c = static_cast<T>(std::numbers::sqrt2 / 2);
    parallel_for(n, kElementwiseGrain / 8, [&](std::int64_t b, std::int64_t e) {
      using A = Eigen::Array<T, Eigen::Dynamic, 1>;
      const Eigen::Map<const A> xv(x + b, e - b);
      Eigen::Map<A>(y + b, e - b) = T(0.5) * xv * (T(1) + (xv * c).erf());
    });
  }
}

template <class T>
void gelu_grad(const T* dy, const T* x, T* dx, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    parallel_for(n, kElementwiseGrain / 8,
                 [&](std::int64_t b, std::int64_t e) { gelu_grad_run<float>(dy, x, dx, b, e); });
  } else {
    const T c = static_cast<T>(std::numbers::sqrt2 / 2);
    const T inv_sqrt_2pi = static_cast<T>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
    parallel_for(n, kElementwiseGrain / 8, [&](std::int64_t b, std::int64_t e) {
      using A = Eigen::Array<T, Eigen::Dynamic, 1>;
      const Eigen::Map<const A> xv(x + b, e - b), gv(dy + b, e - b);
      Eigen::Map<A>(dx + b, e - b) =
          gv * (T(0.5) * (T(1) + (xv * c).erf()) + xv * inv_sqrt_2pi * (T(-0.5) * xv.square()).exp());
    });
  }
}

#define TAPEFLOW_GELU_KERNELS(T)                                                            \
  template void gelu<T>(const T*, T*, std::int64_t);                                                 \
  template void gelu_grad<T>(const T*, const T*, T*, std::int64_t);
TAPEFLOW_GELU_KERNELS(float)
TAPEFLOW_GELU_KERNELS(double)
#undef TAPEFLOW_GELU_KERNELS

}  // namespace tapeflow::kernels
