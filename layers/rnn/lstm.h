// LSTMCell and LSTM: the long short-term memory layer (Hochreiter 1997), Keras 3 semantics and
// Keras's weight layout.
//
// Shapes:   as RNN (layers/rnn/rnn.h); two states, h and c, each [batch, units].
// Weights:  "<cell>/kernel:0" [input_dim, 4·units], "<cell>/recurrent_kernel:0" [units, 4·units],
//           "<cell>/bias:0" [4·units] if use_bias; gates in the order i, f, c, o along the last axis.
//           The cell of LSTM 'lstm' is named "lstm/lstm_cell" (Keras 2's HDF5 names
//           "lstm/lstm_cell/kernel:0"). Initializers: glorot_uniform, orthogonal, zeros; with
//           unit_forget_bias (default) the f quarter of the bias starts at 1.
// Facts:    z = x @ kernel + h_{t-1} @ recurrent_kernel + bias; i = σr(z_i), f = σr(z_f),
//           c_t = f·c_{t-1} + i·σ(z_c), o = σr(z_o), h_t = o·σ(c_t), with σ = activation (tanh) and
//           σr = recurrent_activation (sigmoid; Keras 3's hard_sigmoid is relu6(x + 3) / 6).
//           x @ kernel runs for all steps in one GEMM before the loop (rnn.h); by default (set_fused)
//           the gate math of a step one fused op, LSTMBlockCell (tape/ops/rnn_ops.h). recurrent_dropout
//           masks h_{t-1} in the recurrent GEMM only, one mask per gate (Keras 3's implementation 1). Gradients of every order through the ops.
// Errors:   std::invalid_argument for units <= 0, a dropout outside [0, 1), an unknown activation (at
//           construction); as RNN for inputs.
// Ref:      keras/src/layers/rnn/lstm.py
#pragma once

#include "layers/activations.h"
#include "layers/rnn/rnn.h"

namespace tapeflow::layers {

// LSTM's keyword arguments, in Keras's order (stateful, unroll, time_major not supported).
// Ref: keras.layers.LSTM
struct LSTMOptions {
  // Dimensionality of the output space: the size of h and c (required, > 0).
  std::int64_t units = 0;
  // keras.activations name of the candidate and output activation (default "tanh").
  std::string activation = "tanh";
  // keras.activations name of the gates' activation (default "sigmoid").
  std::string recurrent_activation = "sigmoid";
  // Whether the cell adds the "bias" weight (default true).
  bool use_bias = true;
  // Initializer of "kernel" [input_dim, 4·units] (default glorot_uniform).
  Initializer kernel_initializer = "glorot_uniform";
  // Initializer of "recurrent_kernel" [units, 4·units] (default orthogonal).
  Initializer recurrent_initializer = "orthogonal";
  // Initializer of "bias" (default zeros).
  Initializer bias_initializer = "zeros";
  // Start the forget gate's quarter of the bias at 1 (Keras's default true; needs use_bias).
  bool unit_forget_bias = true;
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
  // The layer's name; empty: the unique snake_case class name ("lstm", "lstm_1", ...).
  std::string name = "";
  // Seeds the cell's Generator (weights and dropout masks); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// One LSTM step and its weights: inputs [batch, input_dim], (h, c) -> new (h, c), each [batch, units].
// Ref: keras.layers.LSTMCell
class LSTMCell : public RNNCell {
 public:
  // Uses the cell fields of `options` (units ... recurrent_dropout, seed, dtype); name "" = "lstm_cell".
  explicit LSTMCell(const LSTMOptions& options, std::string name = "");
  int num_states() const override { return 2; }
  int gates() const override { return 4; }
  std::vector<Tensor> step(const Tensor& xp, const std::vector<Tensor>& states, const std::vector<Tensor>& h) override;
  void begin_sequence() override;
  // With set_fused(true) and tanh / sigmoid: the BlockLSTM op (tape/ops/rnn_ops.h) -> {h of every
  // step, final h, final c}; otherwise nothing (step by step).
  std::vector<Tensor> run_sequence(const Tensor& x, const std::vector<Tensor>& states) override;
  // The weight "<cell>/kernel:0" [input_dim, 4·units]; undefined before build.
  const Variable& kernel() const { return kernel_; }
  // The weight "<cell>/recurrent_kernel:0" [units, 4·units]; undefined before build.
  const Variable& recurrent_kernel() const { return recurrent_kernel_; }
  // The weight "<cell>/bias:0" [4·units]; undefined before build or without use_bias.
  const Variable& bias() const { return bias_; }
  // true (default): with tanh / sigmoid a whole unmasked sequence without dropout is one
  // BlockLSTM op, and otherwise a step's element-wise math is the fused LSTMBlockCell op
  // (tape/ops/rnn_ops.h); false: the composed ops (same values to rounding). The default is the fused
  // op since its activations use Eigen's packet logistic / tanh (W11Step/threads:2 A/B, same runs,
  // load ~9 on 2 cores: fused 44-46 vs composed 52-59 ms per step), and BlockLSTM since one op for
  // the sequence drops the per-step ops (W11Step, same runs, load 4-5 on 2 cores: per-step
  // LSTMBlockCell 91-96 / 95-101 ms at 1 / 2 threads, BlockLSTM 63-65 / 70-82).
  void set_fused(bool fused) { fused_ = fused; }

 protected:
  void build_cell(std::int64_t input_dim) override;
  Tensor input_kernel() const override { return kernel_.read(); }
  std::optional<Tensor> input_bias() const override;

 private:
  bool fused_math() const;  // fused_ with tanh / sigmoid
  bool fused_ = true;
  LSTMOptions options_;
  activations::ActivationFn activation_, recurrent_activation_;
  Variable kernel_, recurrent_kernel_, bias_;
  Tensor recurrent_;                    // recurrent_kernel_ read once per sequence
  std::vector<Tensor> recurrent_gates_;  // its gate columns, with recurrent_dropout
};

// The long short-term memory layer: LSTMCell run over a sequence by the RNN driver.
// Shapes: [batch, timesteps, input_dim] -> [batch, timesteps, units] with return_sequences, else
// [batch, units]. Ref: keras.layers.LSTM
class LSTM : public RNN {
 public:
  // cell_name: the cell's layer name (default "<name>/lstm_cell").
  explicit LSTM(LSTMOptions options, const std::string& cell_name = "");
  // LSTM({.units = units}), as keras.layers.LSTM(units).
  explicit LSTM(std::int64_t units) : LSTM(LSTMOptions{.units = units}) {}
  // The options it was made with.
  const LSTMOptions& options() const { return options_; }
  // Keras 2's LSTM config (RNN fields and the cell's, flat; implementation 2).
  Config get_config() const override;
  // Builds an LSTM from its flat Keras config (RNN and cell fields; unknown fields ignored); the
  // cell is named cell_name (default "<name>/lstm_cell"). Errors: std::invalid_argument naming the
  // layer and field for a missing units, stateful or time_major true, a regularizer or constraint
  // that is not null, and the constructor's errors.
  static std::shared_ptr<LSTM> from_config(const Config& config, const std::string& cell_name = "");
  std::shared_ptr<RNN> remake(const Config& config, const std::string& cell_name) const override;
  std::string cell_suffix() const override { return "lstm_cell"; }

 private:
  LSTMOptions options_;
};

}  // namespace tapeflow::layers
