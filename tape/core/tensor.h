// Tensor: an immutable n-dimensional array value with shared storage and a unique id.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tape/core/dtype.h"
#include "tape/core/shape.h"

namespace tapeflow {

// Reference-counted, 64-byte aligned raw memory (from oneTBB's scalable allocator).
class Buffer {
 public:
  // Errors: std::bad_alloc when memory is exhausted.
  static std::shared_ptr<Buffer> allocate(std::size_t bytes);
  // Zero-filled memory. From kZeroedMapBytes up it is a fresh anonymous mapping, whose pages the
  // kernel zeroes on first touch: a large, mostly-zero tensor (a jacobian through independent
  // examples) costs only the pages written, not a memset of the whole (as calloc / numpy.zeros).
  // Errors: std::bad_alloc when memory is exhausted.
  static std::shared_ptr<Buffer> allocate_zeroed(std::size_t bytes);
  // allocate_zeroed maps fresh pages from this size up (16 MiB); smaller blocks are allocated and memset.
  static constexpr std::size_t kZeroedMapBytes = std::size_t{1} << 24;
  // allocate(): freed blocks of at least this size stay cached for reuse (see tensor.cc).
  static constexpr std::size_t kKeptBlockBytes = std::size_t{1} << 20;
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  // The first byte (64-byte aligned).
  void* data() const { return data_; }
  // The size in bytes, as requested.
  std::size_t size() const { return size_; }

 private:
  Buffer(void* data, std::size_t size, bool mapped = false) : data_(data), size_(size), mapped_(mapped) {}
  void* data_;
  std::size_t size_;
  bool mapped_;  // from mmap (allocate_zeroed), released with munmap
};

namespace internal {
// Storage of one tensor. Small tensors (<= kInlineBytes) keep their elements inline,
// so a scalar op costs one allocation.
struct TensorImpl {
  static constexpr std::size_t kInlineBytes = 64;
  TensorImpl() {}  // user-provided: make_shared must not zero the inline buffer
  Shape shape;
  DType dtype = DType::kFloat32;
  std::int64_t id = 0;
  void* data = nullptr;
  std::shared_ptr<Buffer> buffer;  // null when inline
  alignas(64) unsigned char inline_data[kInlineBytes];
};
// A fresh process-unique id (tensor ids and variable handle ids share this counter).
std::int64_t next_id();
}  // namespace internal

// An immutable value: shape, dtype and elements. Copies share storage (cheap); every
// tensor produced by an op has a new id, which is how GradientTape tracks it.
// DTypes: float32 (default for floating literals, as in TF), float64, int32, int64, bool.
// A default-constructed Tensor is "undefined" (defined() == false); using it throws std::logic_error.
// Ref: tf.Tensor
class Tensor {
 public:
  Tensor() = default;
  // A scalar from a number: double and float give float32 (TF's default dtype for Python floats),
  // int gives int32 (TF's default for Python ints). A template, so that a braced list never
  // selects it: Tensor({x}) is the [1] tensor below on every compiler (with plain overloads
  // Tensor(double) clang 16 took Tensor({x}) as a scalar and GCC 12 as [1]).
  template <typename T>
    requires(std::is_same_v<T, double> || std::is_same_v<T, float> || std::is_same_v<T, int>)
  Tensor(T value) : Tensor(from_number(value)) {}  // NOLINT(google-explicit-constructor): tensors are values
  // A float32 array from nested lists of any depth: {1., 2.} and {x} are [2] and [1], {{4.}} is [1, 1].
  // Errors: std::invalid_argument for ragged lists.
  class NestedList;
  // A float32 array from nested braces (see NestedList): Tensor{{1., 2.}, {3., 4.}} is [2, 2].
  // Errors: std::invalid_argument "Tensor: ragged nested list" when sibling lists differ in length or depth.
  Tensor(std::initializer_list<NestedList> values);

  // Uninitialised storage for `shape` and `dtype`: for kernels and creation functions only;
  // fill it through mutable_data() before the tensor is shared.
  static Tensor empty(const Shape& shape, DType dtype);
  // A tensor with `shape` viewing the same elements (num_elements must match). Keeps storage shared.
  Tensor with_shape(const Shape& shape) const;
  // The same elements and shape under a new id (used for variable reads and custom gradients).
  Tensor alias() const;
  // The same elements under a given id (a variable's handle as seen by tapes). Internal.
  Tensor with_id(std::int64_t id) const;

  // False for a default-constructed or moved-from Tensor (every other member then throws std::logic_error).
  bool defined() const { return impl_ != nullptr; }
  // The dimensions. Errors: std::logic_error on an undefined tensor (as every accessor below).
  const Shape& shape() const { return impl().shape; }
  // The element type.
  DType dtype() const { return impl().dtype; }
  // Number of dimensions (0 for a scalar).
  int rank() const { return impl().shape.rank(); }
  // Product of the dims (1 for a scalar, 0 if a dim is 0).
  std::int64_t num_elements() const { return impl().shape.num_elements(); }
  // The process-unique id GradientTape tracks this value by (new for every op result and alias()).
  std::int64_t id() const { return impl().id; }
  // Size of the elements in bytes: num_elements() · dtype_size(dtype()).
  std::size_t nbytes() const { return static_cast<std::size_t>(num_elements()) * dtype_size(dtype()); }

  // Typed read access. Errors: std::invalid_argument if T does not match dtype().
  template <typename T>
  const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(impl().data);
  }
  // The row-major elements, untyped (for kernels and I/O; see data<T>() for a checked view).
  const void* raw_data() const { return impl().data; }
  // Write access for code that just created this tensor with empty().
  template <typename T>
  T* mutable_data() const {
    check_type(dtype_of<T>());
    return static_cast<T*>(impl().data);
  }
  // Untyped write access, for code that just created this tensor with empty() (tensors are immutable
  // once shared).
  void* mutable_raw_data() const { return impl().data; }

  // The single element as double (any dtype). Errors: std::invalid_argument unless num_elements() == 1.
  double item() const;
  // The single element converted to T (static_cast of item()): t.item<std::int64_t>(). Errors: as item().
  template <typename T>
  T item() const {
    return static_cast<T>(item());
  }
  // Element at a multi-index as double. Errors: std::out_of_range.
  double at(std::initializer_list<std::int64_t> index) const;
  // All elements converted to T, row-major.
  template <typename T>
  std::vector<T> to_vector() const;

  // TensorFlow's eager repr: "tf.Tensor(6.0, shape=(), dtype=float32)".
  std::string to_string() const;
  // Just the values as NumPy prints them: "[1. 8. 27.]".
  std::string values_string() const;

  // True if both handles refer to the same tensor (same id).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // Number of handles sharing this tensor's storage (used for copy-on-write of variables).
  long use_count() const;

 private:
  explicit Tensor(std::shared_ptr<internal::TensorImpl> impl) : impl_(std::move(impl)) {}
  static Tensor make(const Shape& shape, DType dtype, bool zeroed);  // empty() and zeros()
  friend Tensor zeros(const Shape& shape, DType dtype);
  static Tensor from_number(double value);
  static Tensor from_number(float value);
  static Tensor from_number(int value);
  const internal::TensorImpl& impl() const {
    if (!impl_) throw std::logic_error("Tensor: use of an undefined (empty or moved-from) tensor");
    return *impl_;
  }
  void check_type(DType requested) const {
    if (impl().dtype != requested) throw_type_mismatch(requested);
  }
  [[noreturn]] void throw_type_mismatch(DType requested) const;
  std::shared_ptr<internal::TensorImpl> impl_;
  friend class Variable;
};

// Writes t.to_string(), TensorFlow's eager repr: "tf.Tensor(6.0, shape=(), dtype=float32)".
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// One level of a nested initializer list: a number or a list of NestedList.
class Tensor::NestedList {
 public:
  // A number (a leaf of the nested list).
  NestedList(double value) : value_(value), leaf_(true) {}  // NOLINT: list element
  // A list of numbers or of lists (one more dimension).
  NestedList(std::initializer_list<NestedList> items) : items_(items) {}
  // True for a number, false for a list.
  bool leaf() const { return leaf_; }
  // The number of a leaf (0 for a list).
  double value() const { return value_; }
  // The elements of a list (empty for a leaf).
  const std::vector<NestedList>& items() const { return items_; }

 private:
  double value_ = 0;
  bool leaf_ = false;
  std::vector<NestedList> items_;
};

// ---- Creation ---------------------------------------------------------------------------
// A scalar of `dtype` holding `value` (converted). Ref: tf.constant.
Tensor scalar(double value, DType dtype = DType::kFloat32);
// A tensor of `shape` from row-major values. Errors: std::invalid_argument if sizes differ.
template <typename T>
Tensor constant(const std::vector<T>& values, const Shape& shape);
// Like above, converting doubles to `dtype`.
Tensor constant(const std::vector<double>& values, const Shape& shape, DType dtype);
// `t` converted to `dtype` without recording (for literals); use cast() inside computations.
Tensor convert(const Tensor& t, DType dtype);
// A tensor of `shape` and `dtype` filled with 0 (large ones from zero pages, see Buffer). Ref: tf.zeros
Tensor zeros(const Shape& shape, DType dtype = DType::kFloat32);
// A tensor of `shape` and `dtype` filled with 1. Ref: tf.ones
Tensor ones(const Shape& shape, DType dtype = DType::kFloat32);
// A tensor of `shape` and `dtype` filled with `value` converted to dtype. Ref: tf.fill
Tensor fill(const Shape& shape, double value, DType dtype = DType::kFloat32);
// zeros(t.shape(), t.dtype()). Ref: tf.zeros_like
Tensor zeros_like(const Tensor& t);
// ones(t.shape(), t.dtype()). Ref: tf.ones_like
Tensor ones_like(const Tensor& t);
// Identity matrix [n, m] (m defaults to n). Ref: tf.eye.
Tensor eye(std::int64_t n, std::int64_t m = -1, DType dtype = DType::kFloat32);
// `num` evenly spaced values from start to stop inclusive. Ref: tf.linspace.
Tensor linspace(double start, double stop, std::int64_t num, DType dtype = DType::kFloat32);
// [start, limit) by delta. Ref: tf.range (int32 for integral arguments there; here dtype given).
Tensor range(double start, double limit, double delta = 1.0, DType dtype = DType::kInt32);

class Generator;
// Samples from N(mean, stddev²) / U[minval, maxval) using an explicitly seeded generator.
// Ref: tf.random.normal, tf.random.uniform (a Generator instead of a global seed).
Tensor random_normal(const Shape& shape, Generator& gen, double mean = 0.0, double stddev = 1.0,
                     DType dtype = DType::kFloat32);
// Samples from U[minval, maxval) (Generator::fill_uniform). DTypes: float32, float64.
// Errors: std::invalid_argument naming random_uniform for another dtype. Ref: tf.random.uniform
Tensor random_uniform(const Shape& shape, Generator& gen, double minval = 0.0, double maxval = 1.0,
                      DType dtype = DType::kFloat32);
// Samples from N(mean, stddev²), each value beyond 2 stddev drawn again (Keras's TruncatedNormal).
// DTypes: float32, float64. Errors: std::invalid_argument naming truncated_normal for another dtype.
// Ref: tf.random.truncated_normal
Tensor truncated_normal(const Shape& shape, Generator& gen, double mean = 0.0, double stddev = 1.0,
                        DType dtype = DType::kFloat32);

// ---- template definitions ----
template <typename T>
Tensor constant(const std::vector<T>& values, const Shape& shape) {
  if (static_cast<std::int64_t>(values.size()) != shape.num_elements())
    throw std::invalid_argument("constant: " + std::to_string(values.size()) +
                                " values do not fill shape " + shape.to_string());
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  if constexpr (std::is_same_v<T, bool>) {
    bool* out = t.mutable_data<bool>();
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  } else if (!values.empty()) {
    std::memcpy(t.mutable_data<T>(), values.data(), values.size() * sizeof(T));
  }
  return t;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> out(static_cast<std::size_t>(num_elements()));
  dispatch_dtype(dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* p = static_cast<const S*>(impl().data);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(p[i]);
  });
  return out;
}

}  // namespace tapeflow
