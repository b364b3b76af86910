// Dataset stages that hold state across elements: shuffle (seeded buffer), batch (row memcpy) and
// prefetch (a oneTBB background producer).
#include <tbb/task_group.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>

#include "data/dataset_internal.h"
#include "tape/core/random.h"

namespace tapeflow::data::internal {
namespace {

// ---- shuffle --------------------------------------------------------------------------------
class ShuffleIterator : public ElementIterator {
 public:
  ShuffleIterator(std::unique_ptr<ElementIterator> in, std::int64_t buffer, std::uint64_t seed)
      : in_(std::move(in)), capacity_(static_cast<std::size_t>(buffer)), gen_(seed) {}
  bool next(Element& out) override {
    while (!exhausted_ && buffer_.size() < capacity_) {
      Element e;
      if (!in_->next(e)) {
        exhausted_ = true;
        break;
      }
      buffer_.push_back(std::move(e));
    }
    if (buffer_.empty()) return false;
    const std::size_t i = static_cast<std::size_t>(gen_.uniform_int(buffer_.size()));
    out = std::move(buffer_[i]);
    if (i + 1 != buffer_.size()) buffer_[i] = std::move(buffer_.back());
    buffer_.pop_back();
    return true;
  }

 private:
  std::unique_ptr<ElementIterator> in_;
  std::size_t capacity_;
  Generator gen_;
  std::vector<Element> buffer_;
  bool exhausted_ = false;
};

class ShuffleNode : public DatasetNode {
 public:
  ShuffleNode(std::shared_ptr<const DatasetNode> in, std::int64_t buffer, std::uint64_t seed, bool reshuffle,
              std::uint64_t first_pass)
      : in_(std::move(in)), buffer_(buffer), seed_(seed), reshuffle_(reshuffle), passes_(first_pass) {}
  std::unique_ptr<ElementIterator> make_iterator() const override {
    const std::uint64_t pass = reshuffle_ ? passes_.fetch_add(1) : 0;
    // Pass k draws from its own stream; Generator's splitmix64 seeding decorrelates nearby seeds.
    const std::uint64_t seed = seed_ ^ (pass * 0x9E3779B97F4A7C15ULL);
    return std::make_unique<ShuffleIterator>(in_->make_iterator(), buffer_, seed);
  }
  std::int64_t cardinality() const override { return in_->cardinality(); }

 private:
  std::shared_ptr<const DatasetNode> in_;
  std::int64_t buffer_;
  std::uint64_t seed_;
  bool reshuffle_;
  mutable std::atomic<std::uint64_t> passes_{0};
};

// ---- batch ----------------------------------------------------------------------------------
std::string describe_example(const Example& e) {
  std::string s;
  for (const Tensor& t : e) s += (s.empty() ? "" : ", ") + t.shape().to_string() + " " + dtype_name(t.dtype());
  return "{" + s + "}";
}

// Stacks materialised examples, checking they agree in structure.
Example stack(const std::vector<Element>& elems) {
  std::vector<Example> ex;
  ex.reserve(elems.size());
  for (const Element& e : elems) ex.push_back(e.materialize());
  const Example& first = ex.front();
  for (std::size_t i = 1; i < ex.size(); ++i) {
    bool same = ex[i].size() == first.size();
    for (std::size_t c = 0; same && c < first.size(); ++c)
      same = ex[i][c].shape() == first[c].shape() && ex[i][c].dtype() == first[c].dtype();
    if (!same)
      throw std::invalid_argument("Dataset::batch: examples in one batch differ: example 0 is " +
                                  describe_example(first) + ", example " + std::to_string(i) + " is " +
                                  describe_example(ex[i]));
  }
  Example out;
  for (std::size_t c = 0; c < first.size(); ++c) {
    Shape shape{static_cast<std::int64_t>(ex.size())};
    for (std::int64_t d : first[c].shape()) shape.push_back(d);
    Tensor t = Tensor::empty(shape, first[c].dtype());
    const std::size_t row = first[c].nbytes();
    char* dst = static_cast<char*>(t.mutable_raw_data());
    for (std::size_t i = 0; i < ex.size(); ++i)
      if (row > 0) std::memcpy(dst + i * row, ex[i][c].raw_data(), row);
    out.push_back(std::move(t));
  }
  return out;
}

// Fast path: every element is a row of the same SliceSource -> one memcpy per row and component.
Example stack_rows(const std::vector<Element>& elems) {
  const SliceSource& src = *elems.front().source;
  Example out;
  for (std::size_t c = 0; c < src.components.size(); ++c) {
    Shape shape{static_cast<std::int64_t>(elems.size())};
    for (std::int64_t d : src.row_shapes[c]) shape.push_back(d);
    Tensor t = Tensor::empty(shape, src.components[c].dtype());
    const std::size_t row = src.row_bytes[c];
    const char* from = static_cast<const char*>(src.components[c].raw_data());
    char* dst = static_cast<char*>(t.mutable_raw_data());
    if (row > 0)
      for (std::size_t i = 0; i < elems.size(); ++i)
        std::memcpy(dst + i * row, from + static_cast<std::size_t>(elems[i].row) * row, row);
    out.push_back(std::move(t));
  }
  return out;
}

class BatchIterator : public ElementIterator {
 public:
  BatchIterator(std::unique_ptr<ElementIterator> in, std::int64_t batch, bool drop)
      : in_(std::move(in)), batch_(static_cast<std::size_t>(batch)), drop_(drop) {}
  bool next(Element& out) override {
    elems_.clear();
    Element e;
    while (elems_.size() < batch_ && in_->next(e)) elems_.push_back(std::move(e));
    if (elems_.empty() || (drop_ && elems_.size() < batch_)) return false;
    bool rows = true;
    for (const Element& x : elems_) rows = rows && x.source && x.source == elems_.front().source;
    out.source.reset();
    out.tensors = rows ? stack_rows(elems_) : stack(elems_);
    return true;
  }

 private:
  std::unique_ptr<ElementIterator> in_;
  std::size_t batch_;
  bool drop_;
  std::vector<Element> elems_;
};

class BatchNode : public DatasetNode {
 public:
  BatchNode(std::shared_ptr<const DatasetNode> in, std::int64_t batch, bool drop)
      : in_(std::move(in)), batch_(batch), drop_(drop) {}
  std::unique_ptr<ElementIterator> make_iterator() const override {
    return std::make_unique<BatchIterator>(in_->make_iterator(), batch_, drop_);
  }
  std::int64_t cardinality() const override {
    const std::int64_t n = in_->cardinality();
    if (n < 0) return n;
    return drop_ ? n / batch_ : (n + batch_ - 1) / batch_;
  }

 private:
  std::shared_ptr<const DatasetNode> in_;
  std::int64_t batch_;
  bool drop_;
};

// ---- prefetch -------------------------------------------------------------------------------
// A producer task fills a bounded queue and ends when it is full; next() schedules it again.
// When the queue is empty and the task has not started (e.g. no free TBB worker), next() runs it
// itself through task_group::wait(), so a single thread never deadlocks.
class PrefetchIterator : public ElementIterator {
 public:
  PrefetchIterator(std::unique_ptr<ElementIterator> in, std::int64_t buffer)
      : in_(std::move(in)), capacity_(static_cast<std::size_t>(buffer)) {}
  ~PrefetchIterator() override {
    stop_ = true;
    group_->wait();
  }
  bool next(Element& out) override {
    std::unique_lock lock(mu_);
    schedule_locked();
    for (;;) {
      if (!queue_.empty()) {
        out = std::move(queue_.front());
        queue_.pop_front();
        schedule_locked();
        return true;
      }
      if (done_) {
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
        return false;
      }
      if (started_) {
        cv_.wait(lock, [&] { return !queue_.empty() || done_ || !running_; });
      } else {
        lock.unlock();
        group_->wait();  // runs the pending producer here if no worker took it
        lock.lock();
      }
      schedule_locked();
    }
  }

 private:
  void schedule_locked() {
    if (running_ || done_ || stop_ || queue_.size() >= capacity_) return;
    running_ = true;
    started_ = false;
    group_->run([this] { produce(); });
  }
  void produce() {
    std::unique_lock lock(mu_);
    started_ = true;
    while (!stop_ && !done_ && queue_.size() < capacity_) {
      lock.unlock();
      Element e;
      bool ok = false;
      std::exception_ptr err;
      try {
        ok = in_->next(e);
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (err || !ok) {
        error_ = err;
        done_ = true;
      } else {
        queue_.push_back(std::move(e));
      }
      cv_.notify_all();
    }
    running_ = false;
    cv_.notify_all();
  }

  std::unique_ptr<ElementIterator> in_;
  std::size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Element> queue_;
  bool running_ = false, started_ = false, done_ = false;
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::unique_ptr<tbb::task_group> group_ = std::make_unique<tbb::task_group>();
};

class PrefetchNode : public DatasetNode {
 public:
  PrefetchNode(std::shared_ptr<const DatasetNode> in, std::int64_t buffer) : in_(std::move(in)), buffer_(buffer) {}
  std::unique_ptr<ElementIterator> make_iterator() const override {
    return std::make_unique<PrefetchIterator>(in_->make_iterator(), buffer_);
  }
  std::int64_t cardinality() const override { return in_->cardinality(); }

 private:
  std::shared_ptr<const DatasetNode> in_;
  std::int64_t buffer_;
};

}  // namespace

std::shared_ptr<const DatasetNode> make_shuffle_node(std::shared_ptr<const DatasetNode> in, std::int64_t buffer,
                                                     std::uint64_t seed, bool reshuffle, std::uint64_t first_pass) {
  return std::make_shared<ShuffleNode>(std::move(in), buffer, seed, reshuffle, first_pass);
}
std::shared_ptr<const DatasetNode> make_batch_node(std::shared_ptr<const DatasetNode> in, std::int64_t batch,
                                                   bool drop_remainder) {
  return std::make_shared<BatchNode>(std::move(in), batch, drop_remainder);
}
std::shared_ptr<const DatasetNode> make_prefetch_node(std::shared_ptr<const DatasetNode> in, std::int64_t buffer) {
  return std::make_shared<PrefetchNode>(std::move(in), buffer);
}

}  // namespace tapeflow::data::internal
