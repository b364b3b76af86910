// GRUCell and GRU: the gated recurrent unit (Cho 2014), Keras 3 semantics and Keras's weight layout.
//
// Shapes:   as RNN (layers/rnn/rnn.h); one state h [batch, units].
// Weights:  "<cell>/kernel:0" [input_dim, 3·units], "<cell>/recurrent_kernel:0" [units, 3·units],
//           "<cell>/bias:0" [2, 3·units] with reset_after (default; row 0 the input bias, row 1 the
//           recurrent bias), else [3·units]; gates in the order z, r, h along the last axis. The cell
//           of GRU 'gru' is named "gru/gru_cell" (Keras 2's HDF5 names "gru/gru_cell/kernel:0").
// Facts:    x_{z,r,h} = x @ kernel + b_in; reset_after: m = h_{t-1} @ recurrent_kernel + b_rec,
//           z = σr(x_z + m_z), r = σr(x_r + m_r), ĥ = σ(x_h + r·m_h); without reset_after:
//           ĥ = σ(x_h + (r·h_{t-1}) @ recurrent_kernel[:, 2u:]); h_t = z·h_{t-1} + (1 - z)·ĥ.
//           σ = activation (tanh), σr = recurrent_activation (sigmoid). x @ kernel runs for all steps
//           in one GEMM before the loop. recurrent_dropout masks h_{t-1} in the recurrent GEMMs only,
//           one mask per gate (Keras 3's implementation 1). Gradients of every order through the ops.
// Errors:   std::invalid_argument for units <= 0, a dropout outside [0, 1), an unknown activation (at
//           construction); as RNN for inputs.
// Ref:      keras/src/layers/rnn/gru.py
#pragma once

#include "layers/activations.h"
#include "layers/rnn/rnn.h"

namespace tapeflow::layers {

// GRU's keyword arguments, in Keras's order (stateful, unroll, time_major not supported).
// Ref: keras.layers.GRU
struct GRUOptions {
  // Dimensionality of the output space: the size of h (required, > 0).
  std::int64_t units = 0;
  // keras.activations name of the candidate activation (default "tanh").
  std::string activation = "tanh";
  // keras.activations name of the gates' activation (default "sigmoid").
  std::string recurrent_activation = "sigmoid";
  // Whether the cell adds the "bias" weight (default true).
  bool use_bias = true;
  // Initializer of "kernel" [input_dim, 3·units] (default glorot_uniform).
  Initializer kernel_initializer = "glorot_uniform";
  // Initializer of "recurrent_kernel" [units, 3·units] (default orthogonal).
  Initializer recurrent_initializer = "orthogonal";
  // Initializer of "bias" (default zeros).
  Initializer bias_initializer = "zeros";
  // Apply the reset gate after the recurrent matmul, with a separate recurrent bias: bias
  // [2, 3·units] (Keras 3's and cuDNN's default true); false: before, bias [3·units].
  bool reset_after = true;
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
  // The layer's name; empty: the unique snake_case class name ("gru", "gru_1", ...).
  std::string name = "";
  // Seeds the cell's Generator (weights and dropout masks); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// One GRU step and its weights: inputs [batch, input_dim], h -> new h, each [batch, units].
// Ref: keras.layers.GRUCell
class GRUCell : public RNNCell {
 public:
  // Uses the cell fields of `options` (units ... recurrent_dropout, seed, dtype); name "" = "gru_cell".
  explicit GRUCell(const GRUOptions& options, std::string name = "");
  int gates() const override { return 3; }
  std::vector<Tensor> step(const Tensor& xp, const std::vector<Tensor>& states, const std::vector<Tensor>& h) override;
  void begin_sequence() override;
  // The weight "<cell>/kernel:0" [input_dim, 3·units]; undefined before build.
  const Variable& kernel() const { return kernel_; }
  // The weight "<cell>/recurrent_kernel:0" [units, 3·units]; undefined before build.
  const Variable& recurrent_kernel() const { return recurrent_kernel_; }
  // The weight "<cell>/bias:0" [2, 3·units] with reset_after, else [3·units]; undefined before
  // build or without use_bias.
  const Variable& bias() const { return bias_; }

 protected:
  void build_cell(std::int64_t input_dim) override;
  Tensor input_kernel() const override { return kernel_.read(); }
  std::optional<Tensor> input_bias() const override;

 private:
  GRUOptions options_;
  activations::ActivationFn activation_, recurrent_activation_;
  Variable kernel_, recurrent_kernel_, bias_;
  Tensor recurrent_;                    // recurrent_kernel_ read once per sequence
  std::vector<Tensor> recurrent_gates_;  // its gate columns, with recurrent_dropout
  Tensor recurrent_zr_, recurrent_h_;    // its z, r and h columns, without reset_after
  std::optional<Tensor> recurrent_bias_;
};

// The gated recurrent unit layer: GRUCell run over a sequence by the RNN driver.
// Shapes: [batch, timesteps, input_dim] -> [batch, timesteps, units] with return_sequences, else
// [batch, units]. Ref: keras.layers.GRU
class GRU : public RNN {
 public:
  // cell_name: the cell's layer name (default "<name>/gru_cell").
  explicit GRU(GRUOptions options, const std::string& cell_name = "");
  // GRU({.units = units}), as keras.layers.GRU(units).
  explicit GRU(std::int64_t units) : GRU(GRUOptions{.units = units}) {}
  // The options it was made with.
  const GRUOptions& options() const { return options_; }
  // Keras 2's GRU config (RNN fields and the cell's, flat; implementation 2, reset_after).
  Config get_config() const override;
  // Builds a GRU from its flat Keras config (RNN and cell fields; unknown fields ignored); the
  // cell is named cell_name (default "<name>/gru_cell"). Errors: std::invalid_argument naming the
  // layer and field for a missing units, stateful or time_major true, a regularizer or constraint
  // that is not null, and the constructor's errors.
  static std::shared_ptr<GRU> from_config(const Config& config, const std::string& cell_name = "");
  std::shared_ptr<RNN> remake(const Config& config, const std::string& cell_name) const override;
  std::string cell_suffix() const override { return "gru_cell"; }

 private:
  GRUOptions options_;
};

}  // namespace tapeflow::layers
