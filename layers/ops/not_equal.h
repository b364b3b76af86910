// NotEqual: Keras 3's op layer for keras.ops.not_equal(x, c) in a Functional graph, with a constant
// second operand.
//
// Shapes:   x [...] (any dtype) -> bool [...], x != c elementwise.
// Facts:    Keras 3 records an op applied to KerasTensors as a node of an Operation; its Functional
//           models write the Keras mask of Embedding(mask_zero) so: a NotEqual layer (module
//           "keras.src.ops.numpy", config {"name"} only) whose inbound node is {"args": [ids, 0]},
//           feeding mask= of every layer that takes the mask. The constant is the node's second
//           positional argument (Keras's x2); Keras makes one operation per call, so the layer holds
//           it: given here, or set by the Functional reader from the node (set_x2). get_config() is
//           {"name"}, as Keras's.
// Errors:   std::invalid_argument naming the layer for a call before x2 is known, a non-finite x2, or
//           a second x2 different from the first (one constant per layer).
// Ref:      keras/src/ops/numpy.py (NotEqual), keras/src/models/functional.py (deserialize_node)
#pragma once

#include <optional>

#include "layers/layer.h"

namespace tapeflow::layers {

// NotEqual's arguments. Ref: keras.ops.not_equal
struct NotEqualOptions {
  // The constant compared with (Keras's x2); empty: set from the Functional node that calls it.
  std::optional<double> x2 = std::nullopt;
  // The layer's name; empty: the unique snake_case class name ("not_equal", "not_equal_1", ...).
  std::string name = "";
};

// x != x2 elementwise, as a Functional node. Shapes: [...] -> bool [...]. Ref: keras.ops.not_equal
class NotEqual : public Layer {
 public:
  // Errors: std::invalid_argument for a non-finite x2.
  explicit NotEqual(NotEqualOptions options = {});
  Tensor call(const Tensor& inputs, bool training) override;
  Config get_config() const override;  // {"name"}
  // The constant, once known.
  const std::optional<double>& x2() const { return x2_; }
  // Sets the constant (the Functional reader, from the node's second argument). Errors:
  // std::invalid_argument naming the layer for a non-finite value or one other than already set.
  void set_x2(double x2);
  // Builds a NotEqual from its Keras config ({"name"}; x2 comes from the node).
  static std::shared_ptr<NotEqual> from_config(const Config& config);

 private:
  std::optional<double> x2_;
};

}  // namespace tapeflow::layers
