#include "tape/core/shape.h"

#include <stdexcept>

namespace tapeflow {

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  for (auto d : dims) push_back(d);
}

Shape::Shape(const std::vector<std::int64_t>& dims) {
  for (auto d : dims) push_back(d);
}

void Shape::push_back(std::int64_t d) {
  if (rank_ >= kMaxRank)
    throw ShapeError("Shape: rank exceeds the maximum of " + std::to_string(kMaxRank));
  if (d < 0) throw ShapeError("Shape: negative dimension " + std::to_string(d));
  dims_[rank_++] = d;
}

std::int64_t Shape::num_elements() const {
  std::int64_t n = 1;
  bool overflow = false;
  for (int i = 0; i < rank_; ++i) overflow |= __builtin_mul_overflow(n, dims_[i], &n);
  if (overflow) {
    for (int i = 0; i < rank_; ++i)
      if (dims_[i] == 0) return 0;
    throw ShapeError("Shape " + to_string() + ": number of elements overflows int64");
  }
  return n;
}

std::int64_t Shape::dim(int i) const {
  int j = i < 0 ? i + rank_ : i;
  if (j < 0 || j >= rank_)
    throw std::out_of_range("Shape::dim: axis " + std::to_string(i) + " out of range for " + to_string());
  return dims_[j];
}

std::array<std::int64_t, Shape::kMaxRank> Shape::strides() const {
  std::array<std::int64_t, kMaxRank> s{};
  std::int64_t acc = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    s[i] = acc;
    if (__builtin_mul_overflow(acc, dims_[i], &acc) && i > 0)
      throw ShapeError("Shape " + to_string() + ": strides overflow int64");
  }
  return s;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

std::string Shape::to_tf_string() const {
  std::string s = "(";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  if (rank_ == 1) s += ",";
  return s + ")";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  int r = a.rank() > b.rank() ? a.rank() : b.rank();
  Shape out;
  for (int i = 0; i < r; ++i) {
    int ia = a.rank() - r + i, ib = b.rank() - r + i;
    std::int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(std::string(op) + ": incompatible shapes for broadcasting: " +
                                  a.to_string() + " and " + b.to_string());
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

int normalize_axis(int axis, int rank, const char* op) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= (rank == 0 ? 1 : rank))
    throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(axis) +
                                " out of range for rank " + std::to_string(rank));
  return a;
}

}  // namespace tapeflow
