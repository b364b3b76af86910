// Element types of tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace tapeflow {

// The element type of a Tensor.
// Ref: tf.dtypes (float32 is the default for floating literals, as in TensorFlow).
enum class DType : std::uint8_t { kFloat32, kFloat64, kInt32, kInt64, kBool };

// Size in bytes of one element of `dtype`.
std::size_t dtype_size(DType dtype);
// TensorFlow's name: "float32", "float64", "int32", "int64", "bool".
const char* dtype_name(DType dtype);
// Parses a TensorFlow dtype name. Errors: std::invalid_argument for an unknown name.
DType dtype_from_name(const std::string& name);
// True for float32 and float64: the dtypes that can be differentiated.
inline bool is_floating(DType d) { return d == DType::kFloat32 || d == DType::kFloat64; }
// True for int32 and int64 (bool is not an integer dtype here).
inline bool is_integer(DType d) { return d == DType::kInt32 || d == DType::kInt64; }

// Maps a C++ element type to its DType: dtype_of<float>() == DType::kFloat32.
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::kInt64;
  else if constexpr (std::is_same_v<T, bool>) return DType::kBool;
  else static_assert(sizeof(T) == 0, "unsupported element type");
}

// Calls f(T{}) with T the C++ type of `dtype` (bool is stored as one byte, `bool`).
template <typename F>
decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kInt32: return f(std::int32_t{});
    case DType::kInt64: return f(std::int64_t{});
    case DType::kBool: return f(bool{});
  }
  return f(float{});
}

// Like dispatch_dtype, for the numeric dtypes only (bool is rejected before any bool code is
// instantiated). Errors: std::invalid_argument naming `op`.
template <typename F>
decltype(auto) dispatch_numeric(DType dtype, const char* op, F&& f);

// Like dispatch_dtype, for float32/float64 only. Errors: std::invalid_argument naming `op`.
template <typename F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f);

}  // namespace tapeflow

#include <stdexcept>
namespace tapeflow {
template <typename F>
decltype(auto) dispatch_numeric(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat64: return f(double{});
    case DType::kInt32: return f(std::int32_t{});
    case DType::kInt64: return f(std::int64_t{});
    case DType::kBool: throw std::invalid_argument(std::string(op) + ": bool tensors are not supported");
    default: return f(float{});
  }
}

template <typename F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  if (dtype == DType::kFloat64) return f(double{});
  if (dtype != DType::kFloat32)
    throw std::invalid_argument(std::string(op) + ": expected a floating dtype, got " + dtype_name(dtype));
  return f(float{});
}
}  // namespace tapeflow
