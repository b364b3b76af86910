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

struct GRUOptions {
  std::int64_t units = 0;
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer recurrent_initializer = "orthogonal";
  Initializer bias_initializer = "zeros";
  bool reset_after = true;
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

class GRUCell : public RNNCell {
 public:
  // Uses the cell fields of `options` (units ... recurrent_dropout, seed, dtype); name "" = "gru_cell".
  explicit GRUCell(const GRUOptions& options, std::string name = "");
  int gates() const override { return 3; }
  std::vector<Tensor> step(const Tensor& xp, const std::vector<Tensor>& states, const std::vector<Tensor>& h) override;
  void begin_sequence() override;
  const Variable& kernel() const { return kernel_; }
  const Variable& recurrent_kernel() const { return recurrent_kernel_; }
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

class GRU : public RNN {
 public:
  // cell_name: the cell's layer name (default "<name>/gru_cell").
  explicit GRU(GRUOptions options, const std::string& cell_name = "");
  explicit GRU(std::int64_t units) : GRU(GRUOptions{.units = units}) {}
  const GRUOptions& options() const { return options_; }
  // Keras 2's GRU config (RNN fields and the cell's, flat; implementation 2, reset_after).
  nlohmann::json get_config() const override;
  // Errors: std::invalid_argument naming the layer and field.
  static std::shared_ptr<GRU> from_config(const nlohmann::json& config, const std::string& cell_name = "");
  std::shared_ptr<RNN> remake(const nlohmann::json& config, const std::string& cell_name) const override;
  std::string cell_suffix() const override { return "gru_cell"; }

 private:
  GRUOptions options_;
};

}  // namespace tapeflow::layers
