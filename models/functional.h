// Functional: a Model defined by a graph of layer calls on KerasTensors (the Keras Functional API).
//
// Shapes:   inputs as the model's Inputs (any batch size) -> outputs as the graph's output tensors.
// Facts:    auto in = layers::Input({.shape = {784}});
//           auto h = (*std::make_shared<layers::Dense>(64, "relu"))(in);
//           auto out = (*std::make_shared<layers::Add>())({h, ...});
//           auto model = std::make_shared<Functional>(in, out);
//           The constructor walks back from the outputs: every path must end at one of the
//           given Inputs. Layers (InputLayers first, then in call order) are tracked once even when
//           shared; their weights were created when they were called on KerasTensors. A call runs the
//           recorded nodes in creation order (a topological order). One input and one output: the
//           Model API as usual (fit(x, y), predict(x)); several inputs: fit / evaluate on a
//           Dataset whose examples are {x1, ..., xn, y}, predict(std::vector<Tensor>); several
//           outputs: call_all() / predict_all() (fit needs one output).
//           Layers with several outputs are nodes as in Keras (layers/keras_tensor.h):
//             auto outs = lstm->call_all({x});  // LSTM(return_state): {output, h, c}
//             auto y = (*gru)(std::vector<KerasTensor>{x2, outs[1]});  // h as GRU's initial_state
//           any of the outputs may feed other layers or be a model output.
//           get_config() is Keras 3's: {"name", "trainable", "layers": [{"class_name", "config",
//           "name", "inbound_nodes": [{"args": [...], "kwargs": {...}}, ...]}], "input_layers":
//           [[name, 0, 0], ...], "output_layers": [[name, node_index, tensor_index], ...]}; node
//           indices count the layer's calls inside this model, in order; tensor_index picks an
//           output of a layer with several. One writer for every node, as Keras 3's Node
//           serialization: each tensor a {"class_name": "__keras_tensor__", "config": {"shape",
//           "dtype", "keras_history": [layer, node_index, tensor_index]}}, the call's positional
//           arguments in "args" (one tensor, or a list for a multi-input layer;
//           MultiHeadAttention's query, value[, key]; NotEqual's x1 and constant x2), keywords in
//           "kwargs": the recurrent layers' and Bidirectional's "initial_state": [tensors], "mask"
//           and MultiHeadAttention's "attention_mask" tensors, "use_causal_mask": true,
//           "return_attention_scores": true, "training": true / false. A mask that
//           Embedding(mask_zero) makes flows implicitly and is not written (Keras 3 recomputes it
//           on load; its own files write it as a NotEqual node, which tapeflow reads).
//           model_to_config (.h5, JSON, TF.js) rewrites the nodes that tf.keras 2's list form
//           [[layer, node, tensor, kwargs], ...] expresses for Keras 3 too in that form
//           (models/keras3_config.h, tf_keras_nodes); the `.keras` file keeps every node as here.
//           from_config (through read_inbound_node) reads both forms, and tf.keras 2's initial_state
//           given as further tensors of the node's list.
//           summary() adds Keras's "Connected to" column ("dense[0][0]").
//           Keras masks flow through a call as Keras 3's Functional passes them: Embedding(mask_zero)
//           makes one; the recurrent layers, Bidirectional, MultiHeadAttention and
//           GlobalAveragePooling1D consume it; which layers pass it on is one table
//           (models/internal/functional_masks.h). A graph without a mask runs as before.
//           A call runs the recorded layer calls through the models' fusion pass, planned once
//           here (models/internal/fusion.h; as in Sequential): a Conv2D/Conv2DTranspose with
//           activation relu whose output feeds only a MaxPooling2D (and is not a model output)
//           runs as conv -> pool -> relu, another Conv2D with a bias and a linear or relu
//           activation as one fused_conv2d op (the values and gradients of the calls as written;
//           see sequential.h).
// Errors:   std::invalid_argument (naming the model and the layers) for no inputs or outputs, an
//           input that is not an Input, a repeated input, an output that depends on an Input
//           not among the inputs ("graph disconnected"), two layers with one name, and for calls
//           with the wrong number of inputs; from_config: unknown layers or nodes, a tensor_index past the
//           layer's outputs and unsupported call arguments, naming them.
// Ref:      keras/src/models/functional.py, tf_keras/src/engine/functional.py (get_config,
//           reconstruct_from_config)
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/keras_tensor.h"
#include "models/model.h"

namespace tapeflow::models::internal {
struct FusedCall;
}  // namespace tapeflow::models::internal

namespace tapeflow::models {

// keras.Model(inputs, outputs): a model made of the layer calls between Inputs and outputs (see the
// file comment for the graph rules, config format and errors). Ref: keras.Model (Functional API)
class Functional : public Model {
 public:
  // The graph from `inputs` (each from layers::Input, in the order call and fit take them) to
  // `outputs`; name "" gives Keras 2's "model", "model_1", ...
  // Errors: std::invalid_argument naming the model for no inputs or outputs, an undefined tensor, an
  // input that is not an Input or is given twice, a disconnected graph, two layers with one name.
  Functional(std::vector<layers::KerasTensor> inputs, std::vector<layers::KerasTensor> outputs, std::string name = "");
  // One input, one output: Functional({input}, {output}, name).
  Functional(const layers::KerasTensor& input, const layers::KerasTensor& output, std::string name = "");
  // Out of line: the fusion plan's element type is internal (complete in functional.cc only).
  ~Functional() override;

  using Model::call;
  using Model::predict;
  // One input, one output: runs the recorded layer calls on `inputs`.
  Tensor call(const Tensor& inputs, bool training) override;
  // Several inputs, one output.
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  // Every output, in the order given to the constructor.
  std::vector<Tensor> call_all(const std::vector<Tensor>& inputs, bool training = false);
  // As a node of another Functional model: every output (call_all) when there are several.
  std::vector<Tensor> call_outputs(const std::vector<Tensor>& inputs, const layers::CallFlags& flags,
                                   bool training) override;
  // Outputs in inference mode, batch by batch. Shapes: each x [n, ...] -> each output [n, ...].
  Tensor predict(const std::vector<Tensor>& xs, const EvaluateOptions& options = {});
  // Every output in inference mode, batch by batch, in the order given to the constructor.
  // Shapes: each x [n, ...] -> each output [n, ...].
  // Errors: std::invalid_argument naming the model for a wrong number of inputs, batch_size < 1,
  // or 0 examples.
  std::vector<Tensor> predict_all(const std::vector<Tensor>& xs, const EvaluateOptions& options = {});

  void build(const Shape& input_shape) override;
  void build(const std::vector<Shape>& input_shapes) override;
  Shape compute_output_shape(const Shape& input_shape) const override;

  // The model's Input tensors, in the constructor's order (Keras's model.inputs).
  const std::vector<layers::KerasTensor>& inputs() const { return inputs_; }
  // The model's output tensors, in the constructor's order (Keras's model.outputs).
  const std::vector<layers::KerasTensor>& outputs() const { return outputs_; }

  Config get_config() const override;
  // Rebuilds the graph from a get_config() dict (Keras 2's, also what tf.keras writes): layers are
  // deserialized, then called on their inbound nodes; the weights are fresh.
  // Errors: std::invalid_argument naming the model and the layer or node for a bad config (no
  // layers list, duplicate names, unknown inbound layers or nodes) and what layer deserialization throws.
  static std::shared_ptr<Functional> from_config(const Config& config);

 protected:
  std::size_t input_count() const override { return inputs_.size(); }
  std::vector<std::string> summary_output_shapes() const override;
  std::vector<std::string> summary_connections() const override;

 private:
  // One recorded layer call: where its inputs are in the value list, and where its output goes.
  struct Step {
    std::shared_ptr<const layers::Node> node;
    std::vector<std::size_t> inputs;
    std::size_t output;           // the first output's value index; the others follow
    std::size_t num_outputs = 1;
  };
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, bool training);
  std::string inbound_string(const layers::KerasTensor& t) const;
  // Puts a step's outputs at their value indices. Errors: std::logic_error for a count other than recorded.
  void store(const Step& s, const std::vector<Tensor>& outputs, std::vector<Tensor>& values) const;
  // The value index of a tensor of the graph.
  std::size_t slot_of(const layers::KerasTensor& t) const;

  std::vector<layers::KerasTensor> inputs_, outputs_;
  std::vector<Step> steps_;
  std::vector<internal::FusedCall> fused_;  // per step: the fusion pass's plan (models/internal/fusion.h)
  std::vector<std::size_t> output_slots_;
  std::size_t num_slots_ = 0;                               // values of one run
  std::map<const layers::Node*, std::size_t> slot_;        // node -> its first output's value index
  std::map<const layers::Node*, int> node_index_;          // node -> index among its layer's calls here
  std::vector<std::shared_ptr<const layers::Node>> nodes_;  // every node, creation order
};

}  // namespace tapeflow::models
