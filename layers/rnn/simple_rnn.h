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

struct SimpleRNNOptions {
  std::int64_t units = 0;
  std::string activation = "tanh";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer recurrent_initializer = "orthogonal";
  Initializer bias_initializer = "zeros";
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

class SimpleRNNCell : public RNNCell {
 public:
  // Uses the cell fields of `options`; name "" = "simple_rnn_cell".
  explicit SimpleRNNCell(const SimpleRNNOptions& options, std::string name = "");
  int gates() const override { return 1; }
  std::vector<Tensor> step(const Tensor& xp, const std::vector<Tensor>& states, const std::vector<Tensor>& h) override;
  void begin_sequence() override { recurrent_ = recurrent_kernel_.read(); }
  const Variable& kernel() const { return kernel_; }
  const Variable& recurrent_kernel() const { return recurrent_kernel_; }
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

class SimpleRNN : public RNN {
 public:
  // cell_name: the cell's layer name (default "<name>/simple_rnn_cell").
  explicit SimpleRNN(SimpleRNNOptions options, const std::string& cell_name = "");
  explicit SimpleRNN(std::int64_t units) : SimpleRNN(SimpleRNNOptions{.units = units}) {}
  const SimpleRNNOptions& options() const { return options_; }
  // Keras 2's SimpleRNN config (RNN fields and the cell's, flat).
  nlohmann::json get_config() const override;
  // Errors: std::invalid_argument naming the layer and field.
  static std::shared_ptr<SimpleRNN> from_config(const nlohmann::json& config, const std::string& cell_name = "");
  std::shared_ptr<RNN> remake(const nlohmann::json& config, const std::string& cell_name) const override;
  std::string cell_suffix() const override { return "simple_rnn_cell"; }

 private:
  SimpleRNNOptions options_;
};

}  // namespace tapeflow::layers
