// Helpers shared by op families: forward templates for element-wise ops and gradient utilities.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

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

// OpDef::check_attrs of an op with one "axis" attribute (negative counts from the end).
inline std::function<void(const Attrs&)> check_axis_attr_of(const char* op) {
  return [op](const Attrs& a) { check_int_attr(op, a, "axis", -Shape::kMaxRank, Shape::kMaxRank - 1); };
}
// OpDef::check_attrs of a reduction: normalised "axes" (each in [0, kMaxRank)) and "keepdims".
inline std::function<void(const Attrs&)> check_axes_attrs_of(const char* op) {
  return [op](const Attrs& a) {
    check_ints_attr(op, a, "axes", 0, Shape::kMaxRank, 0, Shape::kMaxRank - 1);
    check_attr_type<bool>(op, a, "keepdims");
  };
}
// The "axis" attribute as an int. Errors: std::invalid_argument beyond +-kMaxRank (never truncated).
inline int axis_attr(const char* op, const Attrs& a) {
  const std::int64_t v = a.get_int("axis");
  if (v < -Shape::kMaxRank || v > Shape::kMaxRank)
    throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(v) + " out of range");
  return static_cast<int>(v);
}
// The bit mask of normalised reduction axes. Errors: std::invalid_argument if one is not an axis of s.
inline std::uint32_t axes_mask(const char* op, const std::vector<std::int64_t>& axes, const Shape& s) {
  std::uint32_t m = 0;
  for (std::int64_t a : axes) {
    if (a < 0 || a >= s.rank())
      throw std::invalid_argument(std::string(op) + ": axes " + ints_to_string(axes) + " out of range for shape " +
                                  s.to_string());
    m |= 1u << a;
  }
  return m;
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

// Forward of a unary element-wise op: y[i] = f(x[i]) in the input dtype. With `loop`, float and
// double run kernels::unary_map(*loop) (per-level loops), which computes what f does.
template <Kinds K, typename F>
TensorList unary_forward(const char* op, std::span<const Tensor> in, F f,
                         std::optional<kernels::UnaryOp> loop = std::nullopt) {
  check_arity(op, in, 1);
  const Tensor& x = in[0];
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_kind<K>(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (loop) return kernels::unary_map<T>(*loop, x.data<T>(), y.mutable_data<T>(), x.num_elements());
    }
    if constexpr (!std::is_same_v<T, bool>)
      kernels::map(x.data<T>(), y.mutable_data<T>(), x.num_elements(), [&](T v) { return static_cast<T>(f(v)); });
    else
      kernels::map(x.data<bool>(), y.mutable_data<bool>(), x.num_elements(), [&](bool v) { return static_cast<bool>(f(v)); });
  });
  return {y};
}

// Forward of a binary element-wise op with broadcasting; R = result type (void = input type).
// With `loop`, float and double run kernels::binary_map(*loop) (per-level loops), which computes
// what f does.
template <Kinds K, bool kBoolResult, typename F>
TensorList binary_forward(const char* op, std::span<const Tensor> in, F f,
                          std::optional<kernels::BinaryOp> loop = std::nullopt) {
  check_arity(op, in, 2);
  const Tensor &a = in[0], &b = in[1];
  check_same_dtype(op, a, b);
  Shape sy = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor y = Tensor::empty(sy, kBoolResult ? DType::kBool : a.dtype());
  dispatch_kind<K>(op, a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<kBoolResult, bool, T>;
    if constexpr (!kBoolResult && std::is_floating_point_v<T>) {
      if (loop) return kernels::binary_map<T>(*loop, a.data<T>(), a.shape(), b.data<T>(), b.shape(), y.mutable_data<T>(), sy);
    }
    kernels::map2(a.data<T>(), a.shape(), b.data<T>(), b.shape(), y.mutable_data<R>(), sy,
                  [&](T u, T v) { return static_cast<R>(f(u, v)); });
  });
  return {y};
}

}  // namespace tapeflow::ops_internal
