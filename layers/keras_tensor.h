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
//           A node has one output, or several (Keras returns a list): LSTM / GRU / SimpleRNN /
//           Bidirectional with return_state ([output, states...]), MultiHeadAttention called with
//           return_attention_scores ([output, scores]), a Functional model with several outputs.
//           A KerasTensor is output index() of its node (Keras's keras_history tensor_index).
// Ref:      keras/src/backend/common/keras_tensor.py, keras/src/ops/node.py
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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
  // Output `index` of `node` (Keras's tensor_index), with `shape` (-1 for the batch axis) and `dtype`.
  KerasTensor(std::vector<std::int64_t> shape, DType dtype, std::shared_ptr<const Node> node, int index = 0)
      : shape_(std::move(shape)), dtype_(dtype), node_(std::move(node)), index_(index) {}

  // False for a default-constructed KerasTensor (no producing node).
  bool defined() const { return node_ != nullptr; }
  // Shape with -1 for the batch axis.
  const std::vector<std::int64_t>& shape() const { return shape_; }
  // The dtype of the values the call will produce.
  DType dtype() const { return dtype_; }
  // The call that produced this tensor.
  const std::shared_ptr<const Node>& node() const { return node_; }
  // Which of the node's outputs this is (0 for a layer with one output).
  int index() const { return index_; }
  // "(None, 28, 28)".
  std::string shape_string() const;
  // "KerasTensor (None, 10) float32 from Dense 'dense'" for error messages (", output 1" added
  // for a later output of a node with several).
  std::string describe() const;

 private:
  std::vector<std::int64_t> shape_;
  DType dtype_ = DType::kFloat32;
  std::shared_ptr<const Node> node_;
  int index_ = 0;
};

// The call arguments of a node beside its tensors (Keras's keyword arguments; tensors passed by
// keyword are node inputs: MultiHeadAttention's value and key, the recurrent layers'
// initial_state, in the layer's multi-input order, then an explicit mask or attention_mask last).
struct CallFlags {
  // MultiHeadAttention: the causal (lower-triangular) attention mask.
  bool use_causal_mask = false;
  // MultiHeadAttention: a second output, the attention scores [B, num_heads, T, S].
  bool return_attention_scores = false;
  // A fixed training mode for this call (Keras's training=True / False on a node: Dropout(...)(x,
  // training=True) drops out in predict too); empty: the model's.
  std::optional<bool> training;
  // The node's last input is an explicit Keras mask [B, T] (mask=...): SimpleRNN / LSTM / GRU /
  // Bidirectional, GlobalAveragePooling1D. It replaces the mask its first input carries.
  bool mask = false;
  // The node's last input is MultiHeadAttention's attention_mask [B, T, S] (attention_mask=...).
  bool attention_mask = false;
  // True when no layer-specific flag is set (training aside, which every layer takes).
  bool none() const { return !use_causal_mask && !return_attention_scores && !mask && !attention_mask; }
};

// One call of a layer on KerasTensors.
struct Node {
  std::shared_ptr<Layer> layer;     // the layer called (owned: keeps a temporary layer alive)
  std::vector<KerasTensor> inputs;  // empty for an InputLayer's node
  std::uint64_t serial = 0;         // creation order (next_node_serial())
  CallFlags flags;                  // the call's flag arguments
  // Shape (batch -1) of each output, in order (one for most layers).
  std::vector<std::vector<std::int64_t>> output_shapes;
  // Dtype of each output, in order.
  std::vector<DType> output_dtypes;
};

// "(None, 8)" for one shape (batch -1), "[(None, 8), (None, 8)]" for several.
std::string shapes_string(const std::vector<std::vector<std::int64_t>>& shapes);

// The next node creation number. Thread-safe.
std::uint64_t next_node_serial();

}  // namespace tapeflow::layers
