// An open-addressing hash map from positive int64 ids to int64 values (the tape's id -> producer
// index table): one probe per lookup and no allocation per insert, unlike std::unordered_map.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tapeflow::internal {

class FlatIdMap {
 public:
  static constexpr std::int64_t kAbsent = -0x7fffffffffffffffLL;

  // Value for `id`, or kAbsent.
  std::int64_t find(std::int64_t id) const {
    if (slots_.empty()) return kAbsent;
    for (std::size_t i = hash(id);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == id) return s.value;
      if (s.key == 0) return kAbsent;
    }
  }
  bool contains(std::int64_t id) const { return find(id) != kAbsent; }
  // Inserts or overwrites.
  void set(std::int64_t id, std::int64_t value) { *slot(id) = value; }
  // Inserts if absent; returns true if inserted.
  bool insert(std::int64_t id, std::int64_t value) {
    std::size_t before = size_;
    std::int64_t* v = slot(id);
    if (size_ == before) return false;
    *v = value;
    return true;
  }
  void clear() {
    slots_.clear();
    size_ = 0;
    mask_ = 0;
  }
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::int64_t key = 0;  // ids start at 1, so 0 marks an empty slot
    std::int64_t value = 0;
  };
  std::size_t hash(std::int64_t id) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ULL) >> 20) & mask_;
  }
  std::int64_t* slot(std::int64_t id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    for (std::size_t i = hash(id);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == id) return &s.value;
      if (s.key == 0) {
        s.key = id;
        ++size_;
        return &s.value;
      }
    }
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    size_ = 0;
    for (const Slot& s : old)
      if (s.key != 0) *slot(s.key) = s.value;
  }
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

// A vector whose elements never move (fixed chunks of kChunk), so references stay valid while it
// grows. Chunks are small enough (well under glibc's mmap threshold) to be recycled by malloc
// rather than faulted in fresh from the kernel on every tape.
template <typename T, std::size_t kChunk = 32>
class StableVector {
 public:
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return chunks_[i / kChunk][i % kChunk]; }
  const T& operator[](std::size_t i) const { return chunks_[i / kChunk][i % kChunk]; }
  T& emplace_back() {
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<T[]>(kChunk));
    return (*this)[size_++];
  }
  void clear() {
    chunks_.clear();
    size_ = 0;
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::size_t size_ = 0;
};

}  // namespace tapeflow::internal
