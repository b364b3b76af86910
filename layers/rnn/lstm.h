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

struct LSTMOptions {
  std::int64_t units = 0;
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer recurrent_initializer = "orthogonal";
  Initializer bias_initializer = "zeros";
  bool unit_forget_bias = true;
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  bool return_sequences = false;
  bool return_state = false;
  bool go_backwards = false;
  bool zero_output_for_mask = false;
  std::string name = "";
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<DType> dtype = std::nullopt;
};

class LSTMCell : public RNNCell {
 public:
  // Uses the cell fields of `options` (units ... recurrent_dropout, seed, dtype); name "" = "lstm_cell".
  explicit LSTMCell(const LSTMOptions& options, std::string name = "");
  int num_states() const override { return 2; }
  int gates() const override { return 4; }
  std::vector<Tensor> step(const Tensor& xp, const std::vector<Tensor>& states, const std::vector<Tensor>& h) override;
  void begin_sequence() override;
  const Variable& kernel() const { return kernel_; }
  const Variable& recurrent_kernel() const { return recurrent_kernel_; }
  const Variable& bias() const { return bias_; }
  // true (default): with tanh / sigmoid a step's element-wise math is the fused LSTMBlockCell op
  // (tape/ops/rnn_ops.h); false: the composed ops (same values to rounding). The default is the fused
  // op since its activations use Eigen's packet logistic / tanh (W11Step/threads:2 A/B, same runs,
  // load ~9 on 2 cores: fused 44-46 vs composed 52-59 ms per step).
  void set_fused(bool fused) { fused_ = fused; }

 protected:
  void build_cell(std::int64_t input_dim) override;
  Tensor input_kernel() const override { return kernel_.read(); }
  std::optional<Tensor> input_bias() const override;

 private:
  bool fused_ = true;
  LSTMOptions options_;
  activations::ActivationFn activation_, recurrent_activation_;
  Variable kernel_, recurrent_kernel_, bias_;
  Tensor recurrent_;                    // recurrent_kernel_ read once per sequence
  std::vector<Tensor> recurrent_gates_;  // its gate columns, with recurrent_dropout
};

class LSTM : public RNN {
 public:
  // cell_name: the cell's layer name (default "<name>/lstm_cell").
  explicit LSTM(LSTMOptions options, const std::string& cell_name = "");
  explicit LSTM(std::int64_t units) : LSTM(LSTMOptions{.units = units}) {}
  const LSTMOptions& options() const { return options_; }
  // Keras 2's LSTM config (RNN fields and the cell's, flat; implementation 2).
  nlohmann::json get_config() const override;
  // Errors: std::invalid_argument naming the layer and field.
  static std::shared_ptr<LSTM> from_config(const nlohmann::json& config, const std::string& cell_name = "");
  std::shared_ptr<RNN> remake(const nlohmann::json& config, const std::string& cell_name) const override;
  std::string cell_suffix() const override { return "lstm_cell"; }

 private:
  LSTMOptions options_;
};

}  // namespace tapeflow::layers
