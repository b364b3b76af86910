// SimpleRNNCell and SimpleRNN: the fully connected recurrent layer, Keras 3 semantics and Keras's
// weight layout.
//
// Shapes:   as RNN (layers/rnn/rnn.h); one state h [batch, units].
// Weights:  "<cell>/kernel:0" [input_dim, units], "<cell>/recurrent_kernel:0" [units, units],
//           "<cell>/bias:0" [units] if use_bias. The cell of SimpleRNN 'simple_rnn' is named
//           "simple_rnn/simple_rnn_cell" (Keras 2's HDF5 names).
// Facts:    h_t = σ(x_t @ kernel + bias + h_{t-1} @ recurrent_kernel), σ = activation (tanh).
//           x @ kernel runs for all steps in one GEMM before the loop. Gradients of every order.
// Errors:   std::invalid_argument for units <= 0, a dropout outside [0, 1), an unknown activation (at
//           construction); as RNN for inputs.
// Ref:      keras/src/layers/rnn/simple_rnn.py
#pragma once

#include "layers/activations.h"
#include "layers/rnn/rnn.h"

namespace tapeflow::layers {

// SimpleRNN's keyword arguments, in Keras's order (stateful, unroll, time_major not supported).
// Ref: keras.layers.SimpleRNN
struct SimpleRNNOptions {
  // Dimensionality of the output space: the size of h (required, > 0).
  std::int64_t units = 0;
  // keras.activations name of the step activation (default "tanh").
  std::string activation = "tanh";
  // Whether the cell adds the "bias" weight (default true).
  bool use_bias = true;
  // Initializer of "kernel" [input_dim, units] (default glorot_uniform).
  Initializer kernel_initializer = "glorot_uniform";
  // Initializer of "recurrent_kernel" [units, units] (default orthogonal).
  Initializer recurrent_initializer = "orthogonal";
  // Initializer of "bias" (default zeros).
  Initializer bias_initializer = "zeros";
  // Fraction of the inputs dropped in training, in [0, 1) (default 0; masks drawn per call,
  // shared by all steps).
  double dropout = 0.0;
  // Fraction of h_{t-1} dropped in the recurrent GEMM in training, in [0, 1) (default 0).
  double recurrent_dropout = 0.0;
  // Return every step's output [batch, timesteps, units], not just the last [batch, units]
  // (default false).
  bool return_sequences = false;
  // Also return the final states (Keras; with RNN::call_with_state; default false).
  bool return_state = false;
  // Process the sequence last step to first (default false).
  bool go_backwards = false;
  // Masked steps output zeros instead of the previous output (default false).
  bool zero_output_for_mask = false;
  // The layer's name; empty: the unique snake_case class name ("simple_rnn", "simple_rnn_1", ...).
  std::string name = "";
  // Seeds the cell's Generator (weights and dropout masks); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// One SimpleRNN step and its weights: inputs [batch, input_dim], h -> new h, each [batch, units].
// Ref: keras.layers.SimpleRNNCell
class SimpleRNNCell : public RNNCell {
 public:
  // Uses the cell fields of `options`; name "" = "simple_rnn_cell".
  explicit SimpleRNNCell(const SimpleRNNOptions& options, std::string name = "");
  int gates() const override { return 1; }
  std::vector<Tensor> step(const Tensor& xp, const std::vector<Tensor>& states, const std::vector<Tensor>& h) override;
  void begin_sequence() override { recurrent_ = recurrent_kernel_.read(); }
  // The weight "<cell>/kernel:0" [input_dim, units]; undefined before build.
  const Variable& kernel() const { return kernel_; }
  // The weight "<cell>/recurrent_kernel:0" [units, units]; undefined before build.
  const Variable& recurrent_kernel() const { return recurrent_kernel_; }
  // The weight "<cell>/bias:0" [units]; undefined before build or without use_bias.
  const Variable& bias() const { return bias_; }

 protected:
  void build_cell(std::int64_t input_dim) override;
  Tensor input_kernel() const override { return kernel_.read(); }
  std::optional<Tensor> input_bias() const override;

 private:
  SimpleRNNOptions options_;
  activations::ActivationFn activation_;
  Variable kernel_, recurrent_kernel_, bias_;
  Tensor recurrent_;
};

// The fully connected recurrent layer: SimpleRNNCell run over a sequence by the RNN driver.
// Shapes: [batch, timesteps, input_dim] -> [batch, timesteps, units] with return_sequences, else
// [batch, units]. Ref: keras.layers.SimpleRNN
class SimpleRNN : public RNN {
 public:
  // cell_name: the cell's layer name (default "<name>/simple_rnn_cell").
  explicit SimpleRNN(SimpleRNNOptions options, const std::string& cell_name = "");
  // SimpleRNN({.units = units}), as keras.layers.SimpleRNN(units).
  explicit SimpleRNN(std::int64_t units) : SimpleRNN(SimpleRNNOptions{.units = units}) {}
  // The options it was made with.
  const SimpleRNNOptions& options() const { return options_; }
  // Keras 2's SimpleRNN config (RNN fields and the cell's, flat).
  Config get_config() const override;
  // Builds a SimpleRNN from its flat Keras config (RNN and cell fields; unknown fields ignored); the
  // cell is named cell_name (default "<name>/simple_rnn_cell"). Errors: std::invalid_argument naming the
  // layer and field for a missing units, stateful or time_major true, a regularizer or constraint
  // that is not null, and the constructor's errors.
  static std::shared_ptr<SimpleRNN> from_config(const Config& config, const std::string& cell_name = "");
  std::shared_ptr<RNN> remake(const Config& config, const std::string& cell_name) const override;
  std::string cell_suffix() const override { return "simple_rnn_cell"; }

 private:
  SimpleRNNOptions options_;
};

}  // namespace tapeflow::layers
