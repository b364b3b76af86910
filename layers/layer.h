// Layer: the Keras base class — configuration in the constructor, weights in build() on the
// first call, math in call(inputs, training).
//
// Facts:    Held as std::shared_ptr<Layer>. The first operator() call runs build(input shape) and
//           then call(); floating inputs of another dtype are cast to the layer's dtype first.
//           dtype: given in the options (explicit), else float32 — unless the layer is tracked
//           (track_layer, Sequential::add) unbuilt by a model or layer whose dtype is set, whose
//           dtype it then takes (Keras: layers created inside a float64 model compute in float64).
//           Names are unique like Keras: the snake_case class name ("dense", "batch_normalization",
//           "leaky_re_lu"), then "dense_1", "dense_2", ... from a process-wide counter per name;
//           an explicit name is kept as given. Weights are Variables named "<layer>/<weight>:0".
//           Each layer owns a Generator seeded with `.seed` or, by default, from a process-wide
//           counter (so a program that builds the same layers in the same order repeats bit for bit).
//           variables() = own weights in creation order, then tracked sublayers' (Keras order).
//           set_trainable(false) freezes the layer and its sublayers: their weights leave
//           trainable_variables() (and their Variables' trainable flags are cleared, so tapes stop
//           watching them); Keras's BatchNormalization then runs in inference mode.
//           losses(): the add_loss() tensors of the last call plus regularization losses computed
//           now from the current weights (so they are differentiable inside the caller's tape).
//           get_config(): the Keras config (a tapeflow::Config object: name, trainable, dtype and the
//           constructor arguments); layers/serialization.h turns it back into a layer.
//           Called on KerasTensors (layers/keras_tensor.h), a layer records a node of a
//           functional graph instead of computing: it is built and run once on a zero batch of
//           one example in inference mode (nothing recorded) to learn the output shape.
// Errors:   std::logic_error for get_config() on a layer class that does not implement it, for a
//           symbolic call on a layer not held by a std::shared_ptr, and for count_params() before build and for an initializer that returns
//           the wrong shape/dtype; std::invalid_argument for a non-float layer dtype; layers throw
//           std::invalid_argument naming the layer and the shapes received for incompatible inputs.
// Ref:      keras/src/layers/layer.py, keras/src/backend/common/variables.py
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/initializers.h"
#include "layers/keras_tensor.h"
#include "tape/core/config.h"
#include "tape/core/random.h"
#include "tape/core/tensor.h"
#include "tape/runtime/variable.h"

namespace tapeflow::layers {

class KerasTensor;

// The Keras layer base class: options in the constructor, weights in build(), math in call().
// See the file comment for names, dtypes, seeds, weight order, freezing, losses and configs.
// Ref: keras.layers.Layer
class Layer : public std::enable_shared_from_this<Layer> {
 public:
  virtual ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Builds on the first call (build(inputs.shape())), then returns call(inputs, training).
  Tensor operator()(const Tensor& inputs, bool training = false);
  // The layer's computation on one (already cast, built-for) input; each layer's header gives the
  // Shapes. training: true inside fit / a training step (Dropout drops, BatchNormalization uses
  // batch statistics), false for inference. Call through operator(), which builds first.
  virtual Tensor call(const Tensor& inputs, bool training) = 0;
  // Several inputs (merge layers, functional models): builds on the first call
  // (build(shapes)), then returns call(inputs, training).
  Tensor operator()(const std::vector<Tensor>& inputs, bool training = false);
  // Default: one input goes to call(Tensor); more are an std::invalid_argument naming the layer.
  virtual Tensor call(const std::vector<Tensor>& inputs, bool training);
  // Symbolic calls (Functional API): record a node and return its output. Errors:
  // std::invalid_argument naming this layer, the inputs' layers and shapes if the layer rejects
  // them; std::logic_error if the layer is not held by a std::shared_ptr.
  // A layer with several outputs (call_all) is an std::invalid_argument here, naming the count.
  KerasTensor operator()(const KerasTensor& input);
  // The symbolic call on several inputs (merge layers, functional models); errors as above.
  KerasTensor operator()(const std::vector<KerasTensor>& inputs);
  // A symbolic call returning every output, as Keras returns a list: LSTM(return_state) on x ->
  // {output, h, c}; MultiHeadAttention on {query, value} with flags.return_attention_scores ->
  // {output, scores}; one output for most layers. `flags`: the call's flag arguments, kept by the
  // node (Keras's use_causal_mask, return_attention_scores). Errors as operator(), and
  // std::invalid_argument naming the layer and the flag for a flag the layer does not take.
  std::vector<KerasTensor> call_all(const std::vector<KerasTensor>& inputs, const CallFlags& flags = {});
  // Every output of one eager call, as a Functional node runs it (inputs as the layer's
  // multi-input call takes them). Default: {operator()(inputs)} (one input: the single-tensor
  // call); layers with several outputs override it. Errors: std::invalid_argument naming the
  // layer for a flag it does not take (the default takes none).
  virtual std::vector<Tensor> call_outputs(const std::vector<Tensor>& inputs, const CallFlags& flags, bool training);
  // Creates the weights for `input_shape` (default: none) and marks the layer built.
  virtual void build(const Shape& input_shape);
  // Several inputs (default: build(shapes[0]) for one shape, else just mark the layer built).
  virtual void build(const std::vector<Shape>& input_shapes);
  // The output shape for an input shape (default: unchanged).
  virtual Shape compute_output_shape(const Shape& input_shape) const;

  // The layer's unique name ("dense", "dense_1", ... or the name given; see the file comment).
  const std::string& name() const { return name_; }
  // Whether build() has run (weights exist).
  bool built() const { return built_; }
  // The dtype the layer computes in and makes its weights in (float32 or float64).
  DType dtype() const { return dtype_; }
  // True when the dtype was given or taken from a parent (not the float32 default).
  bool dtype_is_set() const { return dtype_set_; }
  // False once frozen with set_trainable(false) (Keras's layer.trainable; default true).
  bool trainable() const { return trainable_; }
  // Freezes (false) or unfreezes this layer and its tracked sublayers: their weights move between
  // trainable_variables() and non_trainable_variables() and their Variables' trainable flags follow.
  virtual void set_trainable(bool trainable);

  // Weights updated by training (created trainable, layer not frozen), in variables() order.
  std::vector<Variable> trainable_variables() const;
  // The other weights (BatchNormalization's moving statistics; all weights of a frozen layer).
  std::vector<Variable> non_trainable_variables() const;
  // All weights: this layer's own in creation order, then its tracked sublayers' (Keras order).
  std::vector<Variable> variables() const;
  // Keras aliases.
  std::vector<Variable> weights() const { return variables(); }
  // Keras alias of trainable_variables().
  std::vector<Variable> trainable_weights() const { return trainable_variables(); }
  // Keras alias of non_trainable_variables().
  std::vector<Variable> non_trainable_weights() const { return non_trainable_variables(); }
  // The add_loss() tensors of the last call, then the regularization losses of this layer's and its
  // sublayers' weights computed now (differentiable in the caller's tape). Ref: Layer.losses
  std::vector<Tensor> losses() const;
  // Current values of variables() (copies of nothing: tensors are immutable). Ref: Layer.get_weights
  std::vector<Tensor> get_weights() const;
  // Assigns values to variables() in order. Errors: std::invalid_argument for a count, shape or
  // dtype mismatch (names the layer, the weight and both shapes). Ref: Layer.set_weights
  void set_weights(const std::vector<Tensor>& values);
  // Total elements of variables(). Errors: std::logic_error if not built.
  std::int64_t count_params() const;
  // The Keras class name ("Dense"), the "class_name" of serialize() and the registry key.
  virtual std::string class_name() const { return class_name_; }
  // Keras's get_config(): {"name", "trainable", "dtype", ...constructor arguments}.
  // Errors: std::logic_error (the default) for a layer class that does not implement it.
  virtual Config get_config() const;
  // Sublayers tracked with track_layer(), in order.
  const std::vector<std::shared_ptr<Layer>>& layers() const { return layers_; }
  // The generator this layer draws from while training (Dropout's masks), whose state a checkpoint
  // must save for a resumed run to repeat bit for bit; null for layers whose calls use no randomness.
  virtual Generator* training_generator() { return nullptr; }

 protected:
  // class_name: "Dense"; name: empty for the automatic unique name; seed: empty for the default;
  // dtype: empty for "float32 unless a parent sets it" (see Facts).
  Layer(std::string class_name, std::string name = "", std::optional<std::uint64_t> seed = std::nullopt,
        std::optional<DType> dtype = std::nullopt);

  // Creates a weight "<layer>/<name>:0" (dtype defaults to the layer's) from the layer's generator.
  Variable add_weight(const std::string& name, const Shape& shape, const Initializer& init, bool trainable = true,
                      std::optional<DType> dtype = std::nullopt);
  // What operator() does before call(): casts floating inputs to dtype() (if autocast), builds on
  // the first call, clears the call's losses. For entry points other than call() (ConvBase).
  Tensor begin_call(const Tensor& inputs);
  // The same for several inputs (each floating one cast; build(shapes) on the first call).
  std::vector<Tensor> begin_call(const std::vector<Tensor>& inputs);
  // Records an activity loss for this call (cleared at the start of each call).
  void add_loss(const Tensor& loss);
  // Regularization losses of this layer's own weights, computed from their current values.
  virtual std::vector<Tensor> regularization_losses() const { return {}; }
  // Registers a sublayer whose weights join this layer's lists.
  template <class L>
  std::shared_ptr<L> track_layer(std::shared_ptr<L> layer) {
    if (layer) pass_dtype_to(*layer);
    layers_.push_back(layer);
    return layer;
  }
  // Sets the dtype before build (a Sequential takes its first layer's); sublayers whose dtype is
  // not set follow. Errors: std::invalid_argument for a non-float dtype; std::logic_error if built.
  void set_dtype(DType dtype);
  // Whether operator() casts floating inputs to dtype() (default true; a Model without a dtype
  // leaves inputs to its layers).
  void set_autocast(bool autocast) { autocast_ = autocast; }
  // The layer's random stream (weights, dropout masks).
  Generator& generator() { return generator_; }
  // "Dense 'dense_1'" for error messages.
  std::string describe() const;
  // Errors: std::invalid_argument naming this layer and the flag for any flag set in `flags`
  // (for call_outputs overrides of layers that take none).
  void refuse_call_flags(const CallFlags& flags) const;
  // The config every layer shares: name, trainable, dtype (start of get_config()).
  Config base_config() const;

 private:
  std::string class_name_;
  std::string name_;
  // Gives `child` this layer's dtype if this one's is set and the child's is not (and it is unbuilt).
  void pass_dtype_to(Layer& child) const;

  DType dtype_;
  bool dtype_set_;
  bool autocast_ = true;
  bool built_ = false;
  bool trainable_ = true;
  Generator generator_;
  std::vector<Variable> weights_;
  std::vector<bool> weight_trainable_;  // as created (a frozen layer clears the Variables' flags)
  std::vector<Tensor> call_losses_;
  std::vector<std::shared_ptr<Layer>> layers_;
};

// Keras's to_snake_case: "BatchNormalization" -> "batch_normalization", "LeakyReLU" -> "leaky_re_lu".
std::string to_snake_case(const std::string& class_name);
// The next unique name for a base ("dense", then "dense_1", ...). Thread-safe.
std::string unique_layer_name(const std::string& base);
// The next default seed (a process-wide counter mixed into a fixed constant). Thread-safe.
std::uint64_t next_default_seed();

}  // namespace tapeflow::layers
