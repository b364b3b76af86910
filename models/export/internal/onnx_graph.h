// The ONNX graph under construction for export_onnx (models/export/onnx.h): tensor values with
// their layout, nodes, initializers and the NHWC <-> NCHW transposes at the edges.
// Internal: includes ONNX's protobuf classes, so only models/export/*.cc include it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <onnx/onnx_pb.h>

#include "layers/layer.h"
#include "tape/core/tensor.h"

namespace tapeflow::models::onnx_export {

// Where a value's axes are: as in Keras (NHWC for images, NWC for sequences), or channels first
// (kNchw: a rank-4 NHWC value transposed with perm 0,3,1,2, or a rank-3 NWC value with perm 0,2,1).
enum class Layout { kKeras, kNchw };

// A tensor of the graph. dims: its Keras-layout shape without the batch dimension (which is the
// symbolic "batch"). elem_type: an onnx::TensorProto::DataType (float, or a graph input's integer
// ids). mask_from: the layer whose Keras mask this value carries (Embedding mask_zero), "" none.
struct Value {
  std::string name;
  std::vector<std::int64_t> dims;
  Layout layout = Layout::kKeras;
  std::int32_t elem_type = onnx::TensorProto::FLOAT;
  std::string mask_from = "";
  int rank() const { return static_cast<int>(dims.size()) + 1; }
};

// The position of Keras-layout axis `axis` (0..rank-1) in `v`'s layout.
int axis_in_layout(const Value& v, int axis);

// TF's padding of one spatial axis: {begin, end} for `in` -> `out` steps with stride s and
// effective window eff ("same"), {0, 0} when not `same`.
std::pair<std::int64_t, std::int64_t> tf_pads(std::int64_t in, std::int64_t out, std::int64_t s, std::int64_t eff,
                                              bool same);

class Graph {
 public:
  // opset: the default domain's version the graph is written for (13..17).
  explicit Graph(onnx::GraphProto* graph, int opset = 17) : graph_(graph), opset_(opset) {}

  // The opset version the graph targets.
  int opset() const { return opset_; }

  // A tensor name not used yet: `base`, else "base_1", "base_2", ...
  std::string fresh(const std::string& base);
  // Adds a node; returns it for attributes. Output names must come from fresh().
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& node_name);
  // Adds a float32 initializer named fresh(name) holding `t` (float32, row-major) with `dims`.
  std::string initializer(const std::string& name, const Tensor& t, const std::vector<std::int64_t>& dims);
  std::string initializer_floats(const std::string& name, const std::vector<float>& values,
                                 const std::vector<std::int64_t>& dims);
  std::string initializer_ints(const std::string& name, const std::vector<std::int64_t>& values);
  // A rank-0 int64 initializer (Gather's index that drops the axis).
  std::string initializer_scalar(const std::string& name, std::int64_t value);

  // `v` channels first (NCHW for rank 4, NCW for rank 3 only) or in Keras's layout: `v` itself or
  // one Transpose, made once per value.
  Value nchw(const Value& v);
  Value keras(const Value& v);
  // Both lists brought to one layout: channels first if any is (all of one rank, 3 or 4), else Keras's.
  std::vector<Value> common_layout(const std::vector<Value>& vs);

  // Declares a graph input [batch, dims...] of `elem_type` (an onnx::TensorProto::DataType) / an
  // output (named `name`) of elem type float.
  void input(const std::string& name, const std::vector<std::int64_t>& dims,
             std::int32_t elem_type = onnx::TensorProto::FLOAT);
  void output(const Value& v, const std::string& name);

 private:
  onnx::GraphProto* graph_;
  int opset_;
  std::set<std::string> names_;
  std::map<std::string, std::string> to_nchw_, to_keras_;  // value name -> its transposed value's name
};

// std::invalid_argument "export_onnx: <file>: layer '<name>' (<class>) cannot be exported to ONNX: <problem>".
[[noreturn]] void fail(const std::string& file, const layers::Layer& layer, const std::string& problem);
// The layer's weight "<...>/<name>:0" (its own or a sublayer's, such as an RNN's cell) as a float32
// tensor. Errors: fail() when it is missing or not float32.
Tensor layer_weight(const std::string& file, const layers::Layer& layer, const std::string& name);
// The ONNX op of a Keras activation applied to `x` (in its layout; softmax over Keras's last
// axis), named `base`; "linear" / "" return x. Errors: fail() for an activation without a mapping.
Value activation(Graph& g, const std::string& file, const layers::Layer& layer, const std::string& name,
                 const Value& x, const std::string& base);
// SimpleRNN, LSTM, GRU, Bidirectional of one of them (models/export/onnx_rnn.cc): x [batch,
// timesteps, input_dim] in Keras's layout.
Value emit_recurrent(Graph& g, const std::string& file, const layers::Layer& layer, const nlohmann::json& config,
                     const Value& x, const std::string& base);

// Embedding, PositionEmbedding, LayerNormalization, RMSNormalization, MultiHeadAttention, Conv1D,
// MaxPooling1D / AveragePooling1D, GlobalAveragePooling1D / GlobalMaxPooling1D, Permute
// (models/export/onnx_sequence.cc): true when `cls` is one of them.
bool is_sequence_layer(const std::string& cls);
// Emits one of those layers on `inputs` (MultiHeadAttention: query, value[, key]; else one).
// Errors: fail() for options without a mapping.
Value emit_sequence_layer(Graph& g, const std::string& file, const layers::Layer& layer, const nlohmann::json& config,
                          const std::vector<Value>& inputs, const std::string& base);

void set_ints(onnx::NodeProto* n, const std::string& attr, const std::vector<std::int64_t>& values);
void set_int(onnx::NodeProto* n, const std::string& attr, std::int64_t value);
void set_float(onnx::NodeProto* n, const std::string& attr, float value);
void set_string(onnx::NodeProto* n, const std::string& attr, const std::string& value);

}  // namespace tapeflow::models::onnx_export
