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
  SmallVector(std::initializer_list<T> items) {
    for (const T& t : items) push_back(t);
  }
  explicit SmallVector(std::size_t n) { resize(n); }
  template <typename It>
  SmallVector(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return size_ <= N ? inline_.data() : heap_.data(); }
  const T* data() const { return size_ <= N ? inline_.data() : heap_.data(); }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& back() { return data()[size_ - 1]; }
  operator std::span<const T>() const { return {data(), size_}; }
  operator std::span<T>() { return {data(), size_}; }

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
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  void resize(std::size_t n) {
    while (size_ < n) push_back(T{});
    while (size_ > n) pop_back();
  }
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
  void clear() {
    for (std::size_t i = 0; i < N && i < size_; ++i) inline_[i] = T{};
    heap_.clear();
    size_ = 0;
  }
  std::vector<T> to_vector() const { return {begin(), end()}; }

 private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;
  std::size_t size_ = 0;
};

}  // namespace tapeflow
