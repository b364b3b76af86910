// Dataset: an input pipeline in the tf.data spirit (slices -> shuffle -> batch -> prefetch).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tape/core/tensor.h"

namespace tapeflow::data {

// One element of a dataset: a fixed number of components (e.g. {x, y}).
using Example = std::vector<Tensor>;

// Cardinality values for datasets whose size is not a finite known number. Ref: tf.data.INFINITE_CARDINALITY
inline constexpr std::int64_t kInfiniteCardinality = -1;
// The cardinality of a dataset whose size cannot be known without iterating it (e.g. take of an
// unknown input). Ref: tf.data.UNKNOWN_CARDINALITY
inline constexpr std::int64_t kUnknownCardinality = -2;

namespace internal {
class DatasetNode;
class ElementIterator;
}  // namespace internal

// A source of examples. A Dataset is an immutable description (copies share it); each
// iteration (begin() / make_iterator()) starts a fresh pass. Rows of from_tensor_slices travel
// down the pipeline as (source, row) references and are only copied by batch() (one memcpy
// per row and component) or when an example is materialised (iteration, map).
// Facts:  shuffle reshuffles on every pass from a seeded stream (pass k of a dataset built with
//         the same seed always yields the same order); prefetch never changes the order.
// Ref:    tf.data.Dataset
class Dataset {
 public:
  // Sequential reader of one pass. next() returns std::nullopt at the end.
  class Iterator {
   public:
    // Wraps the pipeline's element iterator (made by Dataset::make_iterator; not for users).
    explicit Iterator(std::unique_ptr<internal::ElementIterator> impl);
    ~Iterator();
    // Takes over the pass of `other`, which can no longer be read (next() then throws).
    Iterator(Iterator&&) noexcept;
    // Takes over the pass of `other`, ending this iterator's own pass; `other` can no longer be read.
    Iterator& operator=(Iterator&&) noexcept;
    // The next example of the pass, or std::nullopt once the pass is over.
    // Errors:  std::logic_error on a moved-from iterator; whatever the pipeline throws (map's fn,
    //          batch's shape check, prefetch's producer) propagates.
    std::optional<Example> next();

   private:
    std::unique_ptr<internal::ElementIterator> impl_;
  };

  // Range-for support: `for (const Example& e : ds)`.
  class RangeIterator {
   public:
    RangeIterator() = default;
    // Reads the first example of `it`'s pass (Dataset::begin; a default-constructed one is end()).
    explicit RangeIterator(std::shared_ptr<Iterator> it);
    // The current example (valid until the next ++; undefined at the end).
    const Example& operator*() const { return *current_; }
    // The current example's members (as operator*).
    const Example* operator->() const { return &*current_; }
    // Reads the next example (Iterator::next) into this iterator; at the end of the pass it equals end().
    RangeIterator& operator++();
    // True when both are at the end of a pass (end() or exhausted): the only equality range-for needs.
    bool operator==(const RangeIterator& o) const { return !current_ && !o.current_; }
    // Not operator==: true while either iterator still holds an example.
    bool operator!=(const RangeIterator& o) const { return !(*this == o); }

   private:
    std::shared_ptr<Iterator> it_;
    std::optional<Example> current_;
  };

  // Slices every component along its first dimension: example i = {c[i] for c in components}.
  // Shapes:  components [n, ...] (all with the same n, rank >= 1) -> examples of shape [...].
  // Errors:  std::invalid_argument for no components, an undefined or rank-0 component, or
  //          first dimensions that differ (message lists the shapes).
  // Ref:     tf.data.Dataset.from_tensor_slices
  static Dataset from_tensor_slices(const std::vector<Tensor>& components);
  // A dataset of exactly one example. Errors: std::invalid_argument for no/undefined components.
  // Ref:     tf.data.Dataset.from_tensors
  static Dataset from_tensors(const std::vector<Tensor>& components);

  // Fills a buffer of `buffer_size` examples and yields a uniformly chosen one, refilling from the
  // input (tf.data's algorithm); buffer_size >= cardinality gives a full uniform shuffle.
  // Pass k (counted from first_pass) draws its order from (seed, k) alone: a run resumed at epoch
  // k with first_pass = k sees the batches an uninterrupted run sees (the data-order state is the
  // pass number, which checkpoints store as the epoch counter).
  // Errors:  std::invalid_argument for buffer_size < 1.
  // Ref:     tf.data.Dataset.shuffle(buffer_size, seed, reshuffle_each_iteration)
  Dataset shuffle(std::int64_t buffer_size, std::uint64_t seed, bool reshuffle_each_iteration = true,
                  std::uint64_t first_pass = 0) const;

  // Stacks `batch_size` consecutive examples along a new first dimension; the last batch may be
  // smaller unless drop_remainder.
  // Shapes:  examples [...] -> batches [b, ...].
  // Errors:  std::invalid_argument for batch_size < 1; while iterating, std::invalid_argument if
  //          examples within a batch differ in component count, shape or dtype.
  // Ref:     tf.data.Dataset.batch
  Dataset batch(std::int64_t batch_size, bool drop_remainder = false) const;

  // Applies `fn` to every example (fn may change shapes, dtypes and the component count).
  // Errors:  whatever fn throws propagates from next().
  // Ref:     tf.data.Dataset.map
  Dataset map(std::function<Example(const Example&)> fn) const;

  // Repeats the input `count` times (count < 0: forever). Every pass re-iterates the input,
  // so a shuffle before repeat reshuffles each time.
  // Ref:     tf.data.Dataset.repeat
  Dataset repeat(std::int64_t count = -1) const;

  // At most the first `count` examples (count < 0: all). Ref: tf.data.Dataset.take
  Dataset take(std::int64_t count) const;

  // The examples whose position i in a pass satisfies i % num_shards == index: one of num_shards
  // disjoint shards that together hold every example exactly once (data-parallel training gives
  // each rank its shard). Shard after a shuffle seeded alike on every rank, and before batch.
  // Facts:   cardinality n -> ceil((n - index) / num_shards) (0 if n <= index), so shards differ by
  //          at most one example; infinite and unknown stay so.
  // Errors:  std::invalid_argument for num_shards < 1 or index outside [0, num_shards).
  // Ref:     tf.data.Dataset.shard
  Dataset shard(std::int64_t num_shards, std::int64_t index) const;

  // Produces up to `buffer_size` examples ahead in a oneTBB background task.
  // Facts:   the order is unchanged; an exception in the producer is rethrown by next().
  //          With one thread the producer runs inside next() (it never deadlocks).
  // Errors:  std::invalid_argument for buffer_size < 1.
  // Ref:     tf.data.Dataset.prefetch
  Dataset prefetch(std::int64_t buffer_size = 2) const;

  // Number of examples of one pass: >= 0, kInfiniteCardinality or kUnknownCardinality (after map
  // nothing changes; after take of an unknown input it is unknown). Ref: tf.data.Dataset.cardinality
  std::int64_t cardinality() const;

  // A fresh pass over the examples.
  Iterator make_iterator() const;
  // Starts a fresh pass for range-for and reads its first example. Errors: as Iterator::next.
  RangeIterator begin() const;
  // The end of any pass (an iterator holding no example).
  RangeIterator end() const { return {}; }

  // Every example of one pass. Errors: std::logic_error for an infinite dataset.
  std::vector<Example> collect() const;

  // The implementation node (for the pipeline's own code).
  const std::shared_ptr<const internal::DatasetNode>& node() const { return node_; }

 private:
  explicit Dataset(std::shared_ptr<const internal::DatasetNode> node) : node_(std::move(node)) {}
  std::shared_ptr<const internal::DatasetNode> node_;
};

// Rows `indices` of `t` stacked into a new tensor (a memcpy per row; no autodiff).
// Shapes:  t [n, ...], indices (k values in [0, n)) -> [k, ...].
// Errors:  std::invalid_argument for a rank-0 tensor or an index out of range (names both).
Tensor gather_rows(const Tensor& t, const std::vector<std::int64_t>& indices);

}  // namespace tapeflow::data
