// The one reader of a Functional config's inbound nodes (Functional::from_config and the ONNX
// export use it), in both node forms Keras writes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layers/keras_tensor.h"
#include "layers/layer.h"

namespace tapeflow::models {

// One call of a layer as a Functional config's inbound node describes it: the [layer, node_index,
// tensor_index] references of the call's tensors, in the order layers::Layer::call_all takes them
// (the first argument's tensors; MultiHeadAttention's value and key; the recurrent layers'
// initial_state; an explicit mask / attention_mask last), and the call's flags.
struct InboundCall {
  // The call's tensors as [layer, node_index, tensor_index] JSON arrays, in call_all's order.
  std::vector<nlohmann::json> refs;
  // The call's flags (training, use_causal_mask, return_attention_scores, ...) as the node gives them.
  layers::CallFlags flags;
  // NotEqual's constant second operand (Keras 3's not_equal(x1, x2) node {"args": [x1, x2]}).
  std::optional<double> x2;
};

// The one reader of inbound nodes (Functional::from_config and the ONNX export use it): `node` in
// Keras 3's form {"args": [...], "kwargs": {...}} (tensors as __keras_tensor__ with keras_history,
// flags as plain values) or tf.keras 2's [[layer, node, tensor, kwargs], ...] (further arguments
// as keywords, tensors as [layer, node, tensor]; tf.keras 2's initial_state given as further
// tensors of the list is read too), for `layer`. Errors: std::invalid_argument naming `me` (the
// model), the layer and the argument for a malformed node or a call argument tapeflow does not
// support.
InboundCall read_inbound_node(const layers::Layer& layer, const nlohmann::json& node, const std::string& me);

}  // namespace tapeflow::models
