// RNNCell and RNN: Keras's recurrent-layer protocol. A cell computes one step and owns its weights; the
// RNN driver runs a cell over a sequence and owns masking, go_backwards, return_sequences /
// return_state and initial_state, once for every cell (SimpleRNN, LSTM and GRU are RNNs of their cell).
//
// Shapes:   sequences [batch, timesteps, input_dim] (timesteps >= 1) -> [batch, timesteps, units] with
//           return_sequences, else [batch, units]; states each [batch, units] (LSTM: h, c; others: h).
//           mask [batch, timesteps] (bool, or numbers: nonzero = keep).
// DTypes:   float32 (default) or float64 via the options (inside a model with a dtype, the model's).
// Facts:    How a step runs (TensorFlow's BlockLSTM pattern, composed from tapeflow ops so every
//           derivative order works): the input projection of all steps is one GEMM up front
//           ([timesteps·batch, input_dim] @ kernel + input bias), then each step is one GEMM with the
//           recurrent kernel plus element-wise gate math. Masked steps (Keras 3's backend.rnn): the
//           states are carried through unchanged and the step's output is the previous output
//           (states[0]) — or zeros with zero_output_for_mask (which Bidirectional sets to
//           return_sequences, as Keras). go_backwards processes the steps last to first; with
//           return_sequences the outputs stay in processing order (Keras). dropout / recurrent_dropout
//           apply only when training, with masks drawn per call and shared by all steps (Keras 3's
//           DropoutRNNCell), from the cell's generator (checkpoints save it): with dropout alone one
//           mask [batch, input_dim] on the inputs (Keras's implementation 2); with recurrent_dropout
//           (Keras 3 then switches to implementation 1) one input mask and one [batch, units] mask on
//           the previous h per gate.
//           Weight names are Keras 2's HDF5 names: the cell's layer name is "<rnn name>/<cell>"
//           ("lstm/lstm_cell"), so weights read "lstm/lstm_cell/kernel:0".
//           Not supported (an error at construction or from_config): stateful, time_major, and
//           cells other than SimpleRNNCell / LSTMCell / GRUCell inside Bidirectional.
// Errors:   std::invalid_argument naming the layer and the shapes received for inputs of rank != 3, an
//           input_dim other than the built one, zero timesteps, a mask not [batch, timesteps], initial
//           states of the wrong count or shape; std::logic_error for calling a cell like a layer
//           (cells take states: call_cell).
// Ref:      keras/src/layers/rnn/rnn.py, dropout_rnn_cell.py, keras/src/backend/jax/rnn.py,
//           tensorflow/core/kernels/rnn/lstm_ops.cc (BlockLSTM)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace tapeflow::layers {

class ConfigReader;

// One step of a recurrent layer, with its weights. Subclasses: SimpleRNNCell, LSTMCell, GRUCell.
class RNNCell : public Layer {
 public:
  // Dimensionality of the output space: the size of h (and of c for LSTM).
  std::int64_t units() const { return units_; }
  // Fraction of the inputs dropped in training, in [0, 1).
  double dropout() const { return dropout_; }
  // Fraction of the previous h dropped in training (per gate), in [0, 1).
  double recurrent_dropout() const { return recurrent_dropout_; }
  // Number of state tensors, each [batch, units]: 1, or 2 for LSTM (h, c). The output is the new h.
  virtual int num_states() const { return 1; }
  // Number of gates (column blocks of the kernels): SimpleRNN 1, GRU 3, LSTM 4.
  virtual int gates() const = 0;
  // The input projection of many steps at once: x [n, input_dim] -> [n, gates·units]
  // (x @ kernel + the input bias). x holds one tensor, or one per gate (dropout masks per gate:
  // gate g's columns come from x[g]). Call begin_sequence() first.
  Tensor project_inputs(const std::vector<Tensor>& x);
  // One step from the projected input xp [batch, gates·units] and the states. h holds states[0]
  // for the recurrent GEMM: itself, or one copy per gate times that gate's recurrent dropout mask.
  // Returns the new states, new h first.
  virtual std::vector<Tensor> step(const Tensor& xp, const std::vector<Tensor>& states, const std::vector<Tensor>& h) = 0;
  // Reads the weights for one sequence (so the slices a step needs are made once per call).
  virtual void begin_sequence() = 0;
  // The whole sequence in one op, when the cell has one (LSTMCell: BlockLSTM); the RNN driver asks
  // when no mask and no dropout apply, after begin_sequence(). x [steps, batch, input_dim]: the
  // inputs, time-major, in processing order. Returns {outputs [steps, batch, units] time-major,
  // final states...}, or nothing: the driver projects the inputs and runs step().
  virtual std::vector<Tensor> run_sequence(const Tensor& x, const std::vector<Tensor>& states);
  // Keras's cell call: inputs [batch, input_dim], states -> new states (output = new h, element 0).
  // Errors: std::invalid_argument naming the cell and the shapes for a wrong input or state shape.
  std::vector<Tensor> call_cell(const Tensor& inputs, const std::vector<Tensor>& states, bool training = false);
  // Errors: std::logic_error always (a cell needs states: use call_cell or an RNN).
  Tensor call(const Tensor& inputs, bool training) override;
  // Builds for inputs [..., input_dim].
  void build(const Shape& input_shape) override;
  // The input feature size built for (0 before build).
  std::int64_t input_dim() const { return input_dim_; }
  // A dropout keep mask of `shape`: 1 / (1 - rate) with probability 1 - rate, else 0.
  Tensor dropout_mask(const Shape& shape, DType dtype, double rate);
  // `count` fresh masks of `shape` when training with rate > 0, else none.
  std::vector<Tensor> dropout_masks(const Shape& shape, DType dtype, double rate, int count, bool training);
  // Input dropout masks per call: one, or one per gate with recurrent_dropout (Keras 3).
  int mask_count() const;
  Generator* training_generator() override;

 protected:
  // class_name: "SimpleRNNCell", "LSTMCell" or "GRUCell"; the rest as the cell options.
  // Errors: std::invalid_argument for units <= 0 or a dropout outside [0, 1) (names the cell).
  RNNCell(std::string class_name, std::string name, std::optional<std::uint64_t> seed, std::optional<DType> dtype,
          std::int64_t units, double dropout, double recurrent_dropout);
  // Creates the weights for inputs of input_dim features.
  virtual void build_cell(std::int64_t input_dim) = 0;
  // The kernel [input_dim, gates·units] and the bias added to the input projection (if any).
  virtual Tensor input_kernel() const = 0;
  // The bias added to the input projection [gates·units]; empty without use_bias.
  virtual std::optional<Tensor> input_bias() const = 0;
  // h[0] @ w, or (one h per gate) the concat of h[g] @ w_gates[g] (w split by columns in gates).
  static Tensor recurrent_matmul(const std::vector<Tensor>& h, const Tensor& w, const std::vector<Tensor>& w_gates);

 private:
  std::int64_t units_;
  double dropout_;
  double recurrent_dropout_;
  std::int64_t input_dim_ = 0;
};

// The fields SimpleRNN, LSTM and GRU cells share, in their Keras config form (one writer, one reader).
struct CellConfig {
  // Dimensionality of the output space (the state size; required, > 0).
  std::int64_t units = 0;
  // keras.activations name of the candidate / output activation (default "tanh").
  std::string activation = "tanh";
  // Activation of the gates (default "sigmoid"; LSTM and GRU only, not in SimpleRNN's config).
  std::string recurrent_activation = "sigmoid";
  // Whether the cell adds biases (default true).
  bool use_bias = true;
  // Initializer of "kernel" [input_dim, gates·units] (default glorot_uniform).
  Initializer kernel_initializer = "glorot_uniform";
  // Initializer of "recurrent_kernel" [units, gates·units] (default orthogonal).
  Initializer recurrent_initializer = "orthogonal";
  // Initializer of "bias" (default zeros).
  Initializer bias_initializer = "zeros";
  // Fraction of the inputs dropped in training, in [0, 1) (default 0).
  double dropout = 0.0;
  // Fraction of the previous h dropped in training, in [0, 1) (default 0).
  double recurrent_dropout = 0.0;
  // Seeds the cell's Generator (weights and dropout masks); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
};
// Writes units, activation(s), use_bias, the initializers, null regularizers / constraints, dropouts, seed.
void write_cell_config(Config& config, const CellConfig& cell, bool recurrent_activation);
// Reads them back. Errors: std::invalid_argument naming the layer and field (non-null regularizers
// or constraints are not supported).
CellConfig read_cell_config(const ConfigReader& r, bool recurrent_activation);
// The CellConfig / RNNOptions fields of a layer's options struct (SimpleRNNOptions, LSTMOptions,
// GRUOptions share their names), and back.
template <class O>
CellConfig cell_config_of(const O& o) {
  CellConfig c{.units = o.units,
               .activation = o.activation,
               .use_bias = o.use_bias,
               .kernel_initializer = o.kernel_initializer,
               .recurrent_initializer = o.recurrent_initializer,
               .bias_initializer = o.bias_initializer,
               .dropout = o.dropout,
               .recurrent_dropout = o.recurrent_dropout,
               .seed = o.seed};
  if constexpr (requires { o.recurrent_activation; }) c.recurrent_activation = o.recurrent_activation;
  return c;
}
// Sets the CellConfig fields of an options struct `o` from `c` (the inverse of cell_config_of).
template <class O>
void assign_cell_config(O& o, const CellConfig& c) {
  o.units = c.units;
  o.activation = c.activation;
  if constexpr (requires { o.recurrent_activation; }) o.recurrent_activation = c.recurrent_activation;
  o.use_bias = c.use_bias;
  o.kernel_initializer = c.kernel_initializer;
  o.recurrent_initializer = c.recurrent_initializer;
  o.bias_initializer = c.bias_initializer;
  o.dropout = c.dropout;
  o.recurrent_dropout = c.recurrent_dropout;
  o.seed = c.seed;
}
// Applies an activation by Keras name ("" / "linear": identity).
Tensor apply_activation(Tensor (*fn)(const Tensor&), const Tensor& x);

// The recurrent driver's keyword arguments (keras.layers.RNN's, without stateful, unroll and
// time_major). Ref: keras.layers.RNN
struct RNNOptions {
  // Return the output of every step [batch, timesteps, units] instead of the last [batch, units]
  // (default false).
  bool return_sequences = false;
  // Also return the final states (Keras; here call_with_state always returns them; default false).
  bool return_state = false;
  // Process the sequence last step to first (default false).
  bool go_backwards = false;
  // Masked steps output zeros instead of the previous output (default false; Bidirectional sets it
  // to return_sequences, as Keras).
  bool zero_output_for_mask = false;
  // The layer's name; empty: the unique snake_case class name ("rnn", "lstm", "gru", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};
// The RNNOptions fields of a layer's options struct (SimpleRNNOptions, LSTMOptions, GRUOptions).
template <class O>
RNNOptions rnn_options_of(const O& o) {
  return RNNOptions{.return_sequences = o.return_sequences,
                    .return_state = o.return_state,
                    .go_backwards = o.go_backwards,
                    .zero_output_for_mask = o.zero_output_for_mask,
                    .name = o.name,
                    .dtype = o.dtype};
}
// Sets the RNNOptions fields of an options struct `o` from `r` (the inverse of rnn_options_of).
template <class O>
void assign_rnn_options(O& o, const RNNOptions& r) {
  o.return_sequences = r.return_sequences;
  o.return_state = r.return_state;
  o.go_backwards = r.go_backwards;
  o.zero_output_for_mask = r.zero_output_for_mask;
  o.name = r.name;
  o.dtype = r.dtype;
}

// Runs a cell over sequences (keras.layers.RNN).
class RNN : public Layer {
 public:
  // Errors: std::invalid_argument for a null cell.
  explicit RNN(std::shared_ptr<RNNCell> cell, RNNOptions options = {});

  void build(const Shape& input_shape) override;
  void build(const std::vector<Shape>& input_shapes) override;  // sequences, then initial states
  // The output (see return_sequences); states are not returned here (see call_with_state).
  Tensor call(const Tensor& sequences, bool training) override;
  // {sequences, initial states...} (the Functional API's initial_state inputs) -> the output.
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  // Keras's call(sequences, initial_state, mask, training) -> {output, final states...} (the states
  // always, whether or not return_state is set). initial_state: empty for zeros.
  std::vector<Tensor> call_with_state(const Tensor& sequences, const std::vector<Tensor>& initial_state = {},
                                      const std::optional<Tensor>& mask = std::nullopt, bool training = false);
  // With return_state: {output, final states...} (a Functional node's outputs); else {output}.
  // inputs: sequences, initial states..., then the mask with flags.mask.
  std::vector<Tensor> call_outputs(const std::vector<Tensor>& inputs, const CallFlags& flags, bool training) override;
  // The output with a mask (until the Functional API passes masks): call_with_state(...)[0].
  Tensor call(const Tensor& sequences, const Tensor& mask, bool training = false);
  Shape compute_output_shape(const Shape& input_shape) const override;

  // The cell run at each step (a tracked sublayer: its weights are this layer's).
  const std::shared_ptr<RNNCell>& cell() const { return cell_; }
  // The driver options it was made with (zero_output_for_mask as last set).
  const RNNOptions& rnn_options() const { return options_; }
  // Sets RNNOptions::zero_output_for_mask (Bidirectional does, for its copies).
  void set_zero_output_for_mask(bool on) { options_.zero_output_for_mask = on; }
  Generator* training_generator() override { return cell_ ? cell_->training_generator() : nullptr; }
  // The same layer type made again from `config` (a get_config() of this class) with its cell named
  // `cell_name` (Bidirectional's forward_ / backward_ copies). Errors: std::logic_error for a plain RNN.
  virtual std::shared_ptr<RNN> remake(const Config& config, const std::string& cell_name) const;
  // "lstm_cell" for LSTM: the default cell name is "<name>/" + this.
  virtual std::string cell_suffix() const { return cell_ ? cell_->name() : ""; }

 protected:
  // For subclasses that make their cell in their constructor (then call set_cell).
  RNN(std::string class_name, RNNOptions options, std::optional<std::uint64_t> seed);
  // Installs `cell` and tracks it as a sublayer (its dtype follows this layer's if unset).
  void set_cell(std::shared_ptr<RNNCell> cell);
  // The RNN part of the Keras config (return_sequences, return_state, go_backwards, stateful, ...).
  Config rnn_config() const;
  // Reads that part back. Errors: std::invalid_argument for stateful / time_major true.
  static RNNOptions rnn_options_from(const ConfigReader& r);
  // "<name>/<suffix>" unless cell_name is given.
  std::string cell_name_or(const std::string& cell_name, const std::string& suffix) const;

 private:
  std::shared_ptr<RNNCell> cell_;
  RNNOptions options_;
};

}  // namespace tapeflow::layers
