// Helpers shared by op families: forward templates for element-wise ops and gradient utilities.
#pragma once

#include <cmath>
#include <span>
#include <stdexcept>
#include <string>

#include "tape/kernels/elementwise.h"
#include "tape/runtime/op_def.h"

namespace tapeflow::ops_internal {

inline std::string describe(const Tensor& t) {
  return t.shape().to_string() + " " + dtype_name(t.dtype());
}

inline void check_arity(const char* op, std::span<const Tensor> in, std::size_t n) {
  if (in.size() != n)
    throw std::invalid_argument(std::string(op) + ": expected " + std::to_string(n) + " inputs, got " +
                                std::to_string(in.size()));
}

inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(std::string(op) + ": dtypes differ: " + describe(a) + " and " + describe(b));
}

enum class Kinds { kFloat, kNumeric, kAll };

template <Kinds K, typename F>
decltype(auto) dispatch_kind(const char* op, DType d, F&& f) {
  if constexpr (K == Kinds::kFloat) {
    return dispatch_floating(d, op, std::forward<F>(f));
  } else if constexpr (K == Kinds::kNumeric) {
    return dispatch_numeric(d, op, std::forward<F>(f));
  } else {
    return dispatch_dtype(d, std::forward<F>(f));
  }
}

// Forward of a unary element-wise op: y[i] = f(x[i]) in the input dtype.
template <Kinds K, typename F>
TensorList unary_forward(const char* op, std::span<const Tensor> in, F f) {
  check_arity(op, in, 1);
  const Tensor& x = in[0];
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_kind<K>(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      kernels::map(x.data<T>(), y.mutable_data<T>(), x.num_elements(), [&](T v) { return static_cast<T>(f(v)); });
    else
      kernels::map(x.data<bool>(), y.mutable_data<bool>(), x.num_elements(), [&](bool v) { return static_cast<bool>(f(v)); });
  });
  return {y};
}

// Forward of a binary element-wise op with broadcasting; R = result type (void = input type).
template <Kinds K, bool kBoolResult, typename F>
TensorList binary_forward(const char* op, std::span<const Tensor> in, F f) {
  check_arity(op, in, 2);
  const Tensor &a = in[0], &b = in[1];
  check_same_dtype(op, a, b);
  Shape sy = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor y = Tensor::empty(sy, kBoolResult ? DType::kBool : a.dtype());
  dispatch_kind<K>(op, a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<kBoolResult, bool, T>;
    kernels::map2(a.data<T>(), a.shape(), b.data<T>(), b.shape(), y.mutable_data<R>(), sy,
                  [&](T u, T v) { return static_cast<R>(f(u, v)); });
  });
  return {y};
}

}  // namespace tapeflow::ops_internal
