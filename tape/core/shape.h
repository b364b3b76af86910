// Tensor shapes: a small, inline list of dimension sizes.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace tapeflow {

// A shape that cannot exist: rank > kMaxRank, a negative dimension, or more elements (or bytes)
// than int64 holds. execute() prefixes the op's name to its message.
class ShapeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The dimensions of a tensor, outermost first (row-major). Rank 0 is a scalar.
// Stored inline (no heap) because shapes are created on every op.
// Errors: ShapeError (a std::invalid_argument) for rank > kMaxRank or a negative dimension, and
//         from num_elements() / strides() when the product of the dims overflows int64.
class Shape {
 public:
  // The largest rank a Shape holds (8).
  static constexpr int kMaxRank = 8;

  Shape() {}  // user-provided: value-initialisation must not zero the 8 dims
  // The listed dims, outermost first: Shape{2, 3}. Errors: ShapeError (rank > kMaxRank, a dim < 0).
  Shape(std::initializer_list<std::int64_t> dims);
  // The dims of a vector. Errors: ShapeError (rank > kMaxRank, a dim < 0).
  explicit Shape(const std::vector<std::int64_t>& dims);
  template <typename It>
  // The dims of [first, last), each converted to int64. Errors: ShapeError (rank > kMaxRank, a dim < 0).
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }

  // Number of dimensions (0 for a scalar).
  int rank() const { return rank_; }
  // Number of elements (1 for a scalar). Errors: ShapeError if it overflows int64.
  std::int64_t num_elements() const;
  // Dimension i, unchecked (0 <= i < rank(); no negative indexing: see dim()).
  std::int64_t operator[](int i) const { return dims_[i]; }
  // Dimension i, writable and unchecked (0 <= i < rank()); a value written is not checked for < 0.
  std::int64_t& operator[](int i) { return dims_[i]; }
  // Dimension with Python-style negative indexing. Errors: std::out_of_range.
  std::int64_t dim(int i) const;
  // Pointer to the outermost dimension.
  const std::int64_t* begin() const { return dims_.data(); }
  // Pointer past the innermost dimension.
  const std::int64_t* end() const { return dims_.data() + rank_; }
  // Appends an innermost dimension. Errors: ShapeError if the rank would exceed kMaxRank or d < 0.
  void push_back(std::int64_t d);
  // The dims as a std::vector.
  std::vector<std::int64_t> to_vector() const { return {begin(), end()}; }

  // Row-major strides in elements. Errors: ShapeError if one overflows int64 (possible with a 0 dim).
  std::array<std::int64_t, kMaxRank> strides() const;

  // Same rank and same dims.
  bool operator==(const Shape& o) const;
  // Not operator==.
  bool operator!=(const Shape& o) const { return !(*this == o); }

  // "[2, 3]" (used in error messages).
  std::string to_string() const;
  // "(2, 3)" as TensorFlow prints shapes.
  std::string to_tf_string() const;

 private:
  std::array<std::int64_t, kMaxRank> dims_;  // only the first rank_ are meaningful (no zeroing: shapes are made on every op)
  int rank_ = 0;
};

// NumPy broadcasting of two shapes.
// Errors: std::invalid_argument "<op>: incompatible shapes for broadcasting: [..] and [..]".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Normalises a possibly negative axis into [0, rank). Errors: std::invalid_argument naming `op`.
int normalize_axis(int axis, int rank, const char* op);

}  // namespace tapeflow
