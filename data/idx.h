// Reader for the IDX file format (MNIST, Fashion-MNIST), plain or gzip-compressed.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace tapeflow::data {

// Element type code of an IDX file (third byte of the magic number).
enum class IdxType : std::uint8_t {
  kUInt8 = 0x08,
  kInt8 = 0x09,
  kInt16 = 0x0B,
  kInt32 = 0x0C,
  kFloat32 = 0x0D,
  kFloat64 = 0x0E,
};

// Size in bytes of one element: 1 (uint8, int8), 2 (int16), 4 (int32, float32), 8 (float64), 0 if unknown.
std::size_t idx_type_size(IdxType type);
// The type's name for messages: "uint8", "int8", "int16", "int32", "float32", "float64" ("unknown" else).
const char* idx_type_name(IdxType type);

// Maps a C++ element type to its IdxType: idx_type_of<float>() == IdxType::kFloat32.
template <typename T>
constexpr IdxType idx_type_of() {
  if constexpr (std::is_same_v<T, std::uint8_t>) return IdxType::kUInt8;
  else if constexpr (std::is_same_v<T, std::int8_t>) return IdxType::kInt8;
  else if constexpr (std::is_same_v<T, std::int16_t>) return IdxType::kInt16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return IdxType::kInt32;
  else if constexpr (std::is_same_v<T, float>) return IdxType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return IdxType::kFloat64;
  else static_assert(sizeof(T) == 0, "no IDX type for this element type");
}

// The contents of one IDX file: element type, dimensions and the raw elements.
// Shapes:  bytes holds num_elements() elements in row-major order, converted to host byte order.
struct IdxArray {
  // Element type (the magic number's third byte).
  IdxType type = IdxType::kUInt8;
  // Dimensions in file order (1 to 4 of them as read_idx returns it), e.g. [60000, 28, 28].
  std::vector<std::int64_t> dims;
  // num_elements() * idx_type_size(type) bytes: the elements, row-major, in host byte order.
  std::vector<std::uint8_t> bytes;

  // Product of dims (1 for no dims, 0 if any dim is 0, whatever the others: a header such as
  // [4294967295, 4294967295, 4294967295, 0] must not overflow on the way to 0).
  // Errors: std::overflow_error if the product of non-zero dims exceeds int64 (read_idx never
  // returns such an array).
  std::int64_t num_elements() const {
    for (std::int64_t d : dims)
      if (d == 0) return 0;
    std::int64_t n = 1;
    for (std::int64_t d : dims)
      if (__builtin_mul_overflow(n, d, &n)) throw std::overflow_error("IdxArray: " + describe_dims() + " overflows int64");
    return n;
  }
  // "[d0, d1, ...]".
  std::string describe_dims() const {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }
  // The elements as T. Errors: std::logic_error if T does not match `type`.
  template <typename T>
  const T* as() const {
    if (idx_type_of<T>() != type)
      throw std::logic_error(std::string("IdxArray::as: array holds ") + idx_type_name(type) +
                             ", requested " + idx_type_name(idx_type_of<T>()));
    return reinterpret_cast<const T*>(bytes.data());
  }
};

// "uint8 [60000, 28, 28]": the type and dims of `a`, for messages and logs.
std::string describe(const IdxArray& a);

// Upper bound on the payload a header may announce (16 GiB); larger headers are rejected unread.
inline constexpr std::int64_t kMaxIdxPayloadBytes = std::int64_t{1} << 34;

// Reads an IDX file; gzip is detected by its magic bytes 1f 8b, not by the file name.
// Errors:  std::runtime_error naming `path` for: a file that cannot be opened; a magic number whose
//          first two bytes are not zero; an unknown type code; 0 or more than 4 dimensions; dims whose
//          product overflows or exceeds kMaxIdxPayloadBytes; a zero dimension followed by data; a
//          truncated header or payload (expected vs got bytes); bytes after the payload; a corrupt
//          gzip stream (zlib's message). Memory grows with the data read, never with the header alone.
// Ref:     http://yann.lecun.com/exdb/mnist/ (section "THE IDX FILE FORMAT")
IdxArray read_idx(const std::string& path);

}  // namespace tapeflow::data
