// KerasTensor and Node: the symbolic values of the Functional API and the layer calls that make them.
//
// Shapes:   KerasTensor::shape() is the shape with the batch axis as -1 ("None"): Input({.shape =
//           {28, 28}}) gives [-1, 28, 28].
// Facts:    Calling a layer on KerasTensors computes nothing: it records a Node (the layer, its
//           input KerasTensors, a process-wide creation number) and returns the node's output.
//           Nodes own their layer (so `Dense(...)(x)` on a temporary layer keeps it alive) and
//           their inputs; a KerasTensor owns its node, so the graph lives as long as its outputs.
//           Creation numbers order nodes topologically (a node's inputs are always older).
//           Input() makes an InputLayer node with no inputs (layers/input_layer.h).
// Ref:      keras/src/backend/common/keras_tensor.py, keras/src/ops/node.py
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tape/core/dtype.h"

namespace tapeflow::layers {

class Layer;
struct Node;

// A symbolic tensor of the Functional API: a shape (batch axis -1), a dtype and the Node (layer
// call) that produced it; holds no values. Ref: keras.KerasTensor
class KerasTensor {
 public:
  KerasTensor() = default;
  // The output of `node`, with `shape` (-1 for the batch axis) and `dtype`.
  KerasTensor(std::vector<std::int64_t> shape, DType dtype, std::shared_ptr<const Node> node)
      : shape_(std::move(shape)), dtype_(dtype), node_(std::move(node)) {}

  // False for a default-constructed KerasTensor (no producing node).
  bool defined() const { return node_ != nullptr; }
  // Shape with -1 for the batch axis.
  const std::vector<std::int64_t>& shape() const { return shape_; }
  // The dtype of the values the call will produce.
  DType dtype() const { return dtype_; }
  // The call that produced this tensor.
  const std::shared_ptr<const Node>& node() const { return node_; }
  // "(None, 28, 28)".
  std::string shape_string() const;
  // "KerasTensor (None, 10) from Dense 'dense'" for error messages.
  std::string describe() const;

 private:
  std::vector<std::int64_t> shape_;
  DType dtype_ = DType::kFloat32;
  std::shared_ptr<const Node> node_;
};

// One call of a layer on KerasTensors.
struct Node {
  std::shared_ptr<Layer> layer;     // the layer called (owned: keeps a temporary layer alive)
  std::vector<KerasTensor> inputs;  // empty for an InputLayer's node
  std::uint64_t serial = 0;         // creation order (next_node_serial())
};

// The next node creation number. Thread-safe.
std::uint64_t next_node_serial();

}  // namespace tapeflow::layers
