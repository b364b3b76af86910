#include "data/dataset.h"

#include <cstring>
#include <stdexcept>

#include "data/dataset_internal.h"

namespace tapeflow::data {
namespace internal {

Example Element::materialize() const {
  if (!source) return tensors;
  Example out;
  out.reserve(source->components.size());
  for (std::size_t c = 0; c < source->components.size(); ++c) {
    const Tensor& src = source->components[c];
    Tensor t = Tensor::empty(source->row_shapes[c], src.dtype());
    const std::size_t n = source->row_bytes[c];
    if (n > 0)
      std::memcpy(t.mutable_raw_data(), static_cast<const char*>(src.raw_data()) + n * row, n);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace internal

namespace {

using internal::DatasetNode;
using internal::Element;
using internal::ElementIterator;
using internal::SliceSource;

std::string shapes_of(const std::vector<Tensor>& ts) {
  std::string s;
  for (const Tensor& t : ts) s += (s.empty() ? "" : ", ") + (t.defined() ? t.shape().to_string() : "undefined");
  return "{" + s + "}";
}

// ---- from_tensor_slices -------------------------------------------------------------------
class SlicesIterator : public ElementIterator {
 public:
  explicit SlicesIterator(std::shared_ptr<const SliceSource> src) : src_(std::move(src)) {}
  bool next(Element& out) override {
    if (row_ >= src_->rows) return false;
    out.source = src_;
    out.row = row_++;
    out.tensors.clear();
    return true;
  }

 private:
  std::shared_ptr<const SliceSource> src_;
  std::int64_t row_ = 0;
};

class SlicesNode : public DatasetNode {
 public:
  explicit SlicesNode(std::shared_ptr<const SliceSource> src) : src_(std::move(src)) {}
  std::unique_ptr<ElementIterator> make_iterator() const override {
    return std::make_unique<SlicesIterator>(src_);
  }
  std::int64_t cardinality() const override { return src_->rows; }

 private:
  std::shared_ptr<const SliceSource> src_;
};

// ---- from_tensors -------------------------------------------------------------------------
class SingleIterator : public ElementIterator {
 public:
  explicit SingleIterator(Example e) : example_(std::move(e)) {}
  bool next(Element& out) override {
    if (done_) return false;
    done_ = true;
    out.source.reset();
    out.tensors = example_;
    return true;
  }

 private:
  Example example_;
  bool done_ = false;
};

class SingleNode : public DatasetNode {
 public:
  explicit SingleNode(Example e) : example_(std::move(e)) {}
  std::unique_ptr<ElementIterator> make_iterator() const override {
    return std::make_unique<SingleIterator>(example_);
  }
  std::int64_t cardinality() const override { return 1; }

 private:
  Example example_;
};

// ---- map ----------------------------------------------------------------------------------
using MapFn = std::function<Example(const Example&)>;

class MapIterator : public ElementIterator {
 public:
  MapIterator(std::unique_ptr<ElementIterator> in, MapFn fn) : in_(std::move(in)), fn_(std::move(fn)) {}
  bool next(Element& out) override {
    Element e;
    if (!in_->next(e)) return false;
    out.tensors = fn_(e.materialize());
    out.source.reset();
    return true;
  }

 private:
  std::unique_ptr<ElementIterator> in_;
  MapFn fn_;  // a copy: the iterator may outlive the Dataset
};

class MapNode : public DatasetNode {
 public:
  MapNode(std::shared_ptr<const DatasetNode> in, MapFn fn) : in_(std::move(in)), fn_(std::move(fn)) {}
  std::unique_ptr<ElementIterator> make_iterator() const override {
    return std::make_unique<MapIterator>(in_->make_iterator(), fn_);
  }
  std::int64_t cardinality() const override { return in_->cardinality(); }

 private:
  std::shared_ptr<const DatasetNode> in_;
  MapFn fn_;
};

// ---- repeat / take ------------------------------------------------------------------------
class RepeatIterator : public ElementIterator {
 public:
  RepeatIterator(std::shared_ptr<const DatasetNode> in, std::int64_t count) : in_(std::move(in)), count_(count) {}
  bool next(Element& out) override {
    while (count_ < 0 || pass_ < count_) {
      if (!it_) it_ = in_->make_iterator();
      if (it_->next(out)) {
        produced_in_pass_ = true;
        return true;
      }
      it_.reset();
      ++pass_;
      if (!produced_in_pass_ && count_ < 0) return false;  // an empty input repeated forever is empty
      produced_in_pass_ = false;
    }
    return false;
  }

 private:
  std::shared_ptr<const DatasetNode> in_;
  std::int64_t count_;
  std::int64_t pass_ = 0;
  bool produced_in_pass_ = false;
  std::unique_ptr<ElementIterator> it_;
};

class RepeatNode : public DatasetNode {
 public:
  RepeatNode(std::shared_ptr<const DatasetNode> in, std::int64_t count) : in_(std::move(in)), count_(count) {}
  std::unique_ptr<ElementIterator> make_iterator() const override {
    return std::make_unique<RepeatIterator>(in_, count_);
  }
  std::int64_t cardinality() const override {
    const std::int64_t n = in_->cardinality();
    if (n == 0 || count_ == 0) return 0;
    if (n == kInfiniteCardinality || count_ < 0) return kInfiniteCardinality;
    if (n == kUnknownCardinality) return kUnknownCardinality;
    return n * count_;
  }

 private:
  std::shared_ptr<const DatasetNode> in_;
  std::int64_t count_;
};

class TakeIterator : public ElementIterator {
 public:
  TakeIterator(std::unique_ptr<ElementIterator> in, std::int64_t count) : in_(std::move(in)), left_(count) {}
  bool next(Element& out) override {
    if (left_ == 0) return false;
    if (!in_->next(out)) return false;
    if (left_ > 0) --left_;
    return true;
  }

 private:
  std::unique_ptr<ElementIterator> in_;
  std::int64_t left_;
};

class TakeNode : public DatasetNode {
 public:
  TakeNode(std::shared_ptr<const DatasetNode> in, std::int64_t count) : in_(std::move(in)), count_(count) {}
  std::unique_ptr<ElementIterator> make_iterator() const override {
    return std::make_unique<TakeIterator>(in_->make_iterator(), count_);
  }
  std::int64_t cardinality() const override {
    const std::int64_t n = in_->cardinality();
    if (count_ < 0) return n;
    if (n == kInfiniteCardinality) return count_;
    if (n == kUnknownCardinality) return kUnknownCardinality;
    return std::min(n, count_);
  }

 private:
  std::shared_ptr<const DatasetNode> in_;
  std::int64_t count_;
};

// ---- shard --------------------------------------------------------------------------------
class ShardIterator : public ElementIterator {
 public:
  ShardIterator(std::unique_ptr<ElementIterator> in, std::int64_t num_shards, std::int64_t index)
      : in_(std::move(in)), num_shards_(num_shards), index_(index) {}
  bool next(Element& out) override {
    // Element i of the input belongs to this shard iff i % num_shards == index.
    while (in_->next(out)) {
      const std::int64_t i = position_++;
      if (i % num_shards_ == index_) return true;
    }
    return false;
  }

 private:
  std::unique_ptr<ElementIterator> in_;
  std::int64_t num_shards_, index_;
  std::int64_t position_ = 0;
};

class ShardNode : public DatasetNode {
 public:
  ShardNode(std::shared_ptr<const DatasetNode> in, std::int64_t num_shards, std::int64_t index)
      : in_(std::move(in)), num_shards_(num_shards), index_(index) {}
  std::unique_ptr<ElementIterator> make_iterator() const override {
    return std::make_unique<ShardIterator>(in_->make_iterator(), num_shards_, index_);
  }
  std::int64_t cardinality() const override {
    const std::int64_t n = in_->cardinality();
    if (n < 0) return n;  // infinite or unknown stays so
    return n > index_ ? (n - index_ + num_shards_ - 1) / num_shards_ : 0;
  }

 private:
  std::shared_ptr<const DatasetNode> in_;
  std::int64_t num_shards_, index_;
};

}  // namespace


// ---- Dataset ------------------------------------------------------------------------------
Dataset Dataset::from_tensor_slices(const std::vector<Tensor>& components) {
  if (components.empty())
    throw std::invalid_argument("Dataset::from_tensor_slices: no components given");
  auto src = std::make_shared<SliceSource>();
  for (const Tensor& t : components) {
    if (!t.defined() || t.rank() == 0)
      throw std::invalid_argument("Dataset::from_tensor_slices: every component needs rank >= 1, got " +
                                  shapes_of(components));
    if (t.shape()[0] != components[0].shape()[0])
      throw std::invalid_argument(
          "Dataset::from_tensor_slices: components differ in their first dimension: " + shapes_of(components));
    Shape row(t.shape().begin() + 1, t.shape().end());
    src->row_shapes.push_back(row);
    src->row_bytes.push_back(static_cast<std::size_t>(row.num_elements()) * dtype_size(t.dtype()));
    src->components.push_back(t);
  }
  src->rows = components[0].shape()[0];
  return Dataset(std::make_shared<SlicesNode>(std::move(src)));
}

Dataset Dataset::from_tensors(const std::vector<Tensor>& components) {
  if (components.empty()) throw std::invalid_argument("Dataset::from_tensors: no components given");
  for (const Tensor& t : components)
    if (!t.defined())
      throw std::invalid_argument("Dataset::from_tensors: undefined component in " + shapes_of(components));
  return Dataset(std::make_shared<SingleNode>(components));
}

Dataset Dataset::shuffle(std::int64_t buffer_size, std::uint64_t seed, bool reshuffle_each_iteration,
                         std::uint64_t first_pass) const {
  if (buffer_size < 1)
    throw std::invalid_argument("Dataset::shuffle: buffer_size must be >= 1, got " + std::to_string(buffer_size));
  return Dataset(internal::make_shuffle_node(node_, buffer_size, seed, reshuffle_each_iteration, first_pass));
}

Dataset Dataset::batch(std::int64_t batch_size, bool drop_remainder) const {
  if (batch_size < 1)
    throw std::invalid_argument("Dataset::batch: batch_size must be >= 1, got " + std::to_string(batch_size));
  return Dataset(internal::make_batch_node(node_, batch_size, drop_remainder));
}

Dataset Dataset::map(std::function<Example(const Example&)> fn) const {
  if (!fn) throw std::invalid_argument("Dataset::map: empty function");
  return Dataset(std::make_shared<MapNode>(node_, std::move(fn)));
}

Dataset Dataset::repeat(std::int64_t count) const { return Dataset(std::make_shared<RepeatNode>(node_, count)); }

Dataset Dataset::take(std::int64_t count) const { return Dataset(std::make_shared<TakeNode>(node_, count)); }

Dataset Dataset::shard(std::int64_t num_shards, std::int64_t index) const {
  if (num_shards < 1)
    throw std::invalid_argument("Dataset::shard: num_shards must be >= 1, got " + std::to_string(num_shards));
  if (index < 0 || index >= num_shards)
    throw std::invalid_argument("Dataset::shard: index must be in [0, " + std::to_string(num_shards) + "), got " +
                                std::to_string(index));
  return Dataset(std::make_shared<ShardNode>(node_, num_shards, index));
}

Dataset Dataset::prefetch(std::int64_t buffer_size) const {
  if (buffer_size < 1)
    throw std::invalid_argument("Dataset::prefetch: buffer_size must be >= 1, got " + std::to_string(buffer_size));
  return Dataset(internal::make_prefetch_node(node_, buffer_size));
}

std::int64_t Dataset::cardinality() const { return node_->cardinality(); }

Dataset::Iterator Dataset::make_iterator() const { return Iterator(node_->make_iterator()); }

Dataset::RangeIterator Dataset::begin() const { return RangeIterator(std::make_shared<Iterator>(make_iterator())); }

std::vector<Example> Dataset::collect() const {
  if (cardinality() == kInfiniteCardinality)
    throw std::logic_error("Dataset::collect: the dataset is infinite (repeat() without a count?)");
  std::vector<Example> out;
  Iterator it = make_iterator();
  while (auto e = it.next()) out.push_back(std::move(*e));
  return out;
}

Dataset::Iterator::Iterator(std::unique_ptr<internal::ElementIterator> impl) : impl_(std::move(impl)) {}
Dataset::Iterator::~Iterator() = default;
Dataset::Iterator::Iterator(Iterator&&) noexcept = default;
Dataset::Iterator& Dataset::Iterator::operator=(Iterator&&) noexcept = default;

std::optional<Example> Dataset::Iterator::next() {
  if (!impl_) throw std::logic_error("Dataset::Iterator::next: iterator was moved from");
  Element e;
  if (!impl_->next(e)) return std::nullopt;
  if (e.source) return e.materialize();
  return std::move(e.tensors);
}

Dataset::RangeIterator::RangeIterator(std::shared_ptr<Iterator> it) : it_(std::move(it)) { ++*this; }

Dataset::RangeIterator& Dataset::RangeIterator::operator++() {
  current_ = it_->next();
  return *this;
}

Tensor gather_rows(const Tensor& t, const std::vector<std::int64_t>& indices) {
  if (t.rank() == 0) throw std::invalid_argument("gather_rows: tensor must have rank >= 1, got a scalar");
  const std::int64_t n = t.shape()[0];
  Shape out_shape = t.shape();
  out_shape[0] = static_cast<std::int64_t>(indices.size());
  Tensor out = Tensor::empty(out_shape, t.dtype());
  const std::size_t row = n > 0 ? t.nbytes() / static_cast<std::size_t>(n) : 0;
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.mutable_raw_data());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::int64_t r = indices[i];
    if (r < 0 || r >= n)
      throw std::invalid_argument("gather_rows: index " + std::to_string(r) + " out of range for shape " +
                                  t.shape().to_string());
    if (row > 0) std::memcpy(dst + i * row, src + static_cast<std::size_t>(r) * row, row);
  }
  return out;
}

}  // namespace tapeflow::data
