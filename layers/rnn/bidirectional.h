// Bidirectional: runs a recurrent layer forward and a copy of it backward over the same sequences
// and merges the two outputs (keras.layers.Bidirectional).
//
// Shapes:   sequences [batch, timesteps, features] -> the merged output: concat [..., 2·units], sum /
//           ave / mul [..., units]; [batch, timesteps, ...] with return_sequences, else [batch, ...].
// Weights:  the forward layer's, then the backward layer's. Like Keras, both are made again from the
//           wrapped layer's config, named "forward_<name>" and "backward_<name>" (go_backwards
//           flipped), their cells "<bidirectional>/forward_<name>/<cell>" so weights carry Keras 2's
//           HDF5 names ("bidirectional/forward_lstm/lstm_cell/kernel:0"). The wrapped layer itself is
//           not used.
// Facts:    With return_sequences the backward outputs are reversed in time before merging (Keras),
//           and masked steps give zeros (zero_output_for_mask = return_sequences, as Keras forces).
//           initial_state: the forward layer's states, then the backward layer's. training is passed on.
// Errors:   std::invalid_argument for a null layer, a merge_mode other than concat / sum / ave / mul
//           (Keras's None, two outputs, is not supported); as the wrapped layer for inputs;
//           std::logic_error for a layer that is not SimpleRNN, LSTM or GRU.
// Ref:      keras/src/layers/rnn/bidirectional.py
#pragma once

#include "layers/rnn/rnn.h"

namespace tapeflow::layers {

// Bidirectional's keyword arguments (backward_layer is not supported: the backward copy is
// made from the wrapped layer). Ref: keras.layers.Bidirectional
struct BidirectionalOptions {
  // How the two outputs combine: "concat" (default; last dim 2·units), "sum", "ave" or "mul".
  std::string merge_mode = "concat";
  // The layer's name; empty: the unique snake_case class name ("bidirectional", "bidirectional_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Runs a copy of a recurrent layer forward and one backward over the same sequences and merges
// the outputs. Shapes: [batch, timesteps, features] -> [..., 2·units] (concat) or [..., units],
// with the timesteps axis only with return_sequences. Ref: keras.layers.Bidirectional
class Bidirectional : public Layer {
 public:
  // Makes "forward_<name>" and "backward_<name>" (go_backwards flipped) from `layer`'s config.
  // Errors: std::invalid_argument for a null layer or an unknown merge_mode; std::logic_error for a
  // layer other than SimpleRNN, LSTM or GRU.
  explicit Bidirectional(const std::shared_ptr<RNN>& layer, BidirectionalOptions options = {});

  void build(const Shape& input_shape) override;
  void build(const std::vector<Shape>& input_shapes) override;
  Tensor call(const Tensor& sequences, bool training) override;
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;  // sequences, initial states
  // {merged output, forward states..., backward states...}.
  std::vector<Tensor> call_with_state(const Tensor& sequences, const std::vector<Tensor>& initial_state = {},
                                      const std::optional<Tensor>& mask = std::nullopt, bool training = false);
  // With the wrapped layer's return_state: {merged output, forward states..., backward states...}
  // (Keras's list); else {merged output}. inputs: sequences, initial states..., then the mask with flags.mask.
  std::vector<Tensor> call_outputs(const std::vector<Tensor>& inputs, const CallFlags& flags, bool training) override;
  // The merged output with a mask [batch, timesteps] (call_with_state(...)[0]).
  // Errors: as the wrapped layer (std::invalid_argument) for a mask that is not [batch, timesteps].
  Tensor call(const Tensor& sequences, const Tensor& mask, bool training = false);
  Shape compute_output_shape(const Shape& input_shape) const override;
  // Keras 2's config: {"layer": {"class_name", "config"} of the wrapped layer, "merge_mode"}.
  Config get_config() const override;
  // Builds a Bidirectional from its Keras config ("layer" required, merge_mode; unknown fields
  // ignored). Errors: std::invalid_argument naming the field for a missing or non-recurrent layer,
  // a backward_layer that is not null, an unknown merge_mode, and the wrapped layer's config errors.
  static std::shared_ptr<Bidirectional> from_config(const Config& config);

  // The copy run first step to last ("forward_<name>").
  const std::shared_ptr<RNN>& forward_layer() const { return forward_; }
  // The copy run last step to first ("backward_<name>").
  const std::shared_ptr<RNN>& backward_layer() const { return backward_; }
  // "concat", "sum", "ave" or "mul".
  const std::string& merge_mode() const { return options_.merge_mode; }
  Generator* training_generator() override;

 private:
  BidirectionalOptions options_;
  std::string layer_config_;  // {"class_name", "config"} of the wrapped layer, as JSON text
  std::shared_ptr<RNN> forward_, backward_;
};

}  // namespace tapeflow::layers
