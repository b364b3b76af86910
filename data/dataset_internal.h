// Dataset internals: pipeline nodes and the element iterators they create (not public API).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/dataset.h"

namespace tapeflow::data::internal {

// The tensors of from_tensor_slices, shared by every element that refers to one of their rows.
struct SliceSource {
  std::vector<Tensor> components;
  std::int64_t rows = 0;
  std::vector<std::size_t> row_bytes;  // bytes of one row, per component
  std::vector<Shape> row_shapes;       // shape of one row, per component
};

// An element in flight: either a row reference into a SliceSource or materialised tensors.
struct Element {
  std::shared_ptr<const SliceSource> source;  // set for a row reference
  std::int64_t row = -1;
  Example tensors;  // set otherwise

  // The example as tensors (copies the row out of the source for a row reference).
  Example materialize() const;
};

// One pass over a node's elements.
class ElementIterator {
 public:
  virtual ~ElementIterator() = default;
  // Writes the next element into `out`; false at the end of the pass.
  virtual bool next(Element& out) = 0;
};

// A pipeline stage. Nodes are immutable after construction except for the pass counter of shuffle.
class DatasetNode {
 public:
  virtual ~DatasetNode() = default;
  virtual std::unique_ptr<ElementIterator> make_iterator() const = 0;
  virtual std::int64_t cardinality() const = 0;
};

// Stateful stages, defined in dataset_pipeline.cc.
std::shared_ptr<const DatasetNode> make_shuffle_node(std::shared_ptr<const DatasetNode> in, std::int64_t buffer,
                                                     std::uint64_t seed, bool reshuffle, std::uint64_t first_pass = 0);
std::shared_ptr<const DatasetNode> make_batch_node(std::shared_ptr<const DatasetNode> in, std::int64_t batch,
                                                   bool drop_remainder);
std::shared_ptr<const DatasetNode> make_prefetch_node(std::shared_ptr<const DatasetNode> in, std::int64_t buffer);

}  // namespace tapeflow::data::internal
