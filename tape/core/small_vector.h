// A vector that keeps up to N elements inline (no heap allocation), for per-op lists.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

namespace tapeflow {

// Holds up to N elements in an inline array and spills all of them to a std::vector beyond that.
// T must be default-constructible and cheap to default-construct (Tensor, int64_t, Shape).
template <typename T, std::size_t N>
class SmallVector {
 public:
  SmallVector() = default;
  // The listed elements, in order.
  SmallVector(std::initializer_list<T> items) {
    for (const T& t : items) push_back(t);
  }
  // n default-constructed elements.
  explicit SmallVector(std::size_t n) { resize(n); }
  template <typename It>
  // The elements of [first, last), in order.
  SmallVector(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }

  // Number of elements.
  std::size_t size() const { return size_; }
  // True when there are no elements.
  bool empty() const { return size_ == 0; }
  // The contiguous elements (inline up to N, on the heap beyond); invalidated by a size change that
  // crosses N, as by any push_back / pop_back / resize.
  T* data() { return size_ <= N ? inline_.data() : heap_.data(); }
  // The contiguous elements, read-only (as data()).
  const T* data() const { return size_ <= N ? inline_.data() : heap_.data(); }
  // Element i, unchecked (i < size()).
  T& operator[](std::size_t i) { return data()[i]; }
  // Element i, read-only and unchecked (i < size()).
  const T& operator[](std::size_t i) const { return data()[i]; }
  // Pointer to the first element.
  T* begin() { return data(); }
  // Pointer past the last element.
  T* end() { return data() + size_; }
  // Pointer to the first element, read-only.
  const T* begin() const { return data(); }
  // Pointer past the last element, read-only.
  const T* end() const { return data() + size_; }
  // The last element (undefined when empty).
  T& back() { return data()[size_ - 1]; }
  // A read-only view of the elements (so a SmallVector passes where a span is taken).
  operator std::span<const T>() const { return {data(), size_}; }
  // A writable view of the elements.
  operator std::span<T>() { return {data(), size_}; }

  // Appends `value`; the N+1-th element moves every element to the heap.
  void push_back(T value) {
    if (size_ < N) {
      inline_[size_++] = std::move(value);
      return;
    }
    if (size_ == N) {  // spill: move the inline elements out first
      heap_.reserve(2 * N + 1);
      for (std::size_t i = 0; i < N; ++i) heap_.push_back(std::move(inline_[i]));
      for (std::size_t i = 0; i < N; ++i) inline_[i] = T{};
    }
    heap_.push_back(std::move(value));
    ++size_;
  }
  template <typename... Args>
  // Appends T(args...) and returns it.
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  // Appends default-constructed elements or removes trailing ones until size() == n.
  void resize(std::size_t n) {
    while (size_ < n) push_back(T{});
    while (size_ > n) pop_back();
  }
  // Removes the last element (undefined when empty); back to N elements, they move inline again.
  void pop_back() {
    if (size_ <= N) {
      inline_[--size_] = T{};
      return;
    }
    heap_.pop_back();
    if (--size_ == N) {  // back to inline storage
      for (std::size_t i = 0; i < N; ++i) inline_[i] = std::move(heap_[i]);
      heap_.clear();
    }
  }
  // Removes every element (size() == 0, inline storage again).
  void clear() {
    for (std::size_t i = 0; i < N && i < size_; ++i) inline_[i] = T{};
    heap_.clear();
    size_ = 0;
  }
  // A std::vector copy of the elements.
  std::vector<T> to_vector() const { return {begin(), end()}; }

 private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;
  std::size_t size_ = 0;
};

}  // namespace tapeflow
