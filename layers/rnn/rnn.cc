#include "layers/rnn/rnn.h"

#include <stdexcept>

#include "layers/internal/recurrent_call.h"

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/index_ops.h"
#include "tape/ops/linalg_ops.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

// ---- RNNCell ----

RNNCell::RNNCell(std::string class_name, std::string name, std::optional<std::uint64_t> seed,
                 std::optional<DType> dtype, std::int64_t units, double dropout, double recurrent_dropout)
    : Layer(std::move(class_name), std::move(name), seed, dtype),
      units_(units),
      dropout_(dropout),
      recurrent_dropout_(recurrent_dropout) {
  if (units <= 0) throw std::invalid_argument(describe() + ": units must be positive, got " + std::to_string(units));
  for (auto [what, rate] : {std::pair<const char*, double>{"dropout", dropout}, {"recurrent_dropout", recurrent_dropout}})
    if (!(rate >= 0 && rate < 1))
      throw std::invalid_argument(describe() + ": " + what + " must be in [0, 1), got " + std::to_string(rate));
}

void RNNCell::build(const Shape& input_shape) {
  if (input_shape.rank() < 1 || input_shape.dim(-1) <= 0)
    throw std::invalid_argument(describe() + ": expected inputs [..., input_dim], got shape " + input_shape.to_string());
  input_dim_ = input_shape.dim(-1);
  build_cell(input_dim_);
  Layer::build(input_shape);
}

Tensor RNNCell::call(const Tensor&, bool) {
  throw std::logic_error(describe() + ": a cell takes states: call it through an RNN layer or call_cell");
}

Tensor RNNCell::dropout_mask(const Shape& shape, DType dtype, double rate) {
  Tensor mask = Tensor::empty(shape, dtype);
  dispatch_floating(dtype, "RNN dropout", [&](auto tag) {
    using T = decltype(tag);
    generator().fill_keep_mask<T>(mask.mutable_data<T>(), mask.num_elements(), static_cast<T>(rate),
                                  static_cast<T>(1.0 / (1.0 - rate)));
  });
  return mask;
}

Generator* RNNCell::training_generator() {
  return dropout_ > 0 || recurrent_dropout_ > 0 ? &generator() : nullptr;
}

Tensor RNNCell::project_inputs(const std::vector<Tensor>& x) {
  const Tensor k = input_kernel();
  Tensor z;
  if (x.size() == 1) {
    z = matmul(x[0], k);
  } else {
    const std::vector<Tensor> ks = split(k, gates(), 1);
    std::vector<Tensor> parts;
    for (int g = 0; g < gates(); ++g) parts.push_back(matmul(x[g], ks[g]));
    z = concat(parts, 1);
  }
  if (auto b = input_bias()) z = z + *b;
  return z;
}

Tensor RNNCell::recurrent_matmul(const std::vector<Tensor>& h, const Tensor& w, const std::vector<Tensor>& w_gates) {
  if (h.size() == 1) return matmul(h[0], w);
  std::vector<Tensor> parts;
  for (std::size_t g = 0; g < h.size(); ++g) parts.push_back(matmul(h[g], w_gates[g]));
  return concat(parts, 1);
}

// The dropout masks of one call: `count` masks of `shape` (none when not training or rate 0).
std::vector<Tensor> RNNCell::dropout_masks(const Shape& shape, DType dtype, double rate, int count, bool training) {
  std::vector<Tensor> out;
  if (!training || rate == 0) return out;
  for (int g = 0; g < count; ++g) out.push_back(dropout_mask(shape, dtype, rate));
  return out;
}

std::vector<Tensor> RNNCell::run_sequence(const Tensor&, const std::vector<Tensor>&) { return {}; }

int RNNCell::mask_count() const { return recurrent_dropout_ > 0 ? gates() : 1; }

std::vector<Tensor> RNNCell::call_cell(const Tensor& inputs_in, const std::vector<Tensor>& states, bool training) {
  const Tensor inputs = begin_call(inputs_in);
  const Shape& s = inputs.shape();
  if (s.rank() != 2 || s.dim(1) != input_dim_)
    throw std::invalid_argument(describe() + ": expected inputs [batch, " + std::to_string(input_dim_) +
                                "], got shape " + s.to_string());
  if (static_cast<int>(states.size()) != num_states())
    throw std::invalid_argument(describe() + ": expected " + std::to_string(num_states()) + " states, got " +
                                std::to_string(states.size()));
  for (const Tensor& st : states)
    if (st.shape() != Shape{s.dim(0), units_})
      throw std::invalid_argument(describe() + ": expected states [" + std::to_string(s.dim(0)) + ", " +
                                  std::to_string(units_) + "], got shape " + st.shape().to_string());
  std::vector<Tensor> x{inputs};
  const std::vector<Tensor> in_masks = dropout_masks(s, inputs.dtype(), dropout_, mask_count(), training);
  if (!in_masks.empty()) x.clear();
  for (const Tensor& m : in_masks) x.push_back(inputs * m);
  std::vector<Tensor> h{states[0]};
  const std::vector<Tensor> rec_masks =
      dropout_masks(states[0].shape(), inputs.dtype(), recurrent_dropout_, gates(), training);
  if (!rec_masks.empty()) h.clear();
  for (const Tensor& m : rec_masks) h.push_back(states[0] * m);
  begin_sequence();
  return step(project_inputs(x), states, h);
}

// ---- RNN ----

RNN::RNN(std::shared_ptr<RNNCell> cell, RNNOptions options)
    : Layer("RNN", options.name, std::nullopt, options.dtype), options_(std::move(options)) {
  if (!cell) throw std::invalid_argument(describe() + ": null cell");
  set_cell(std::move(cell));
}

RNN::RNN(std::string class_name, RNNOptions options, std::optional<std::uint64_t> seed)
    : Layer(std::move(class_name), options.name, seed, options.dtype), options_(std::move(options)) {}

void RNN::set_cell(std::shared_ptr<RNNCell> cell) { cell_ = track_layer(std::move(cell)); }

std::string RNN::cell_name_or(const std::string& cell_name, const std::string& suffix) const {
  return cell_name.empty() ? name() + "/" + suffix : cell_name;
}

void RNN::build(const Shape& input_shape) {
  if (input_shape.rank() != 3 || input_shape.dim(2) <= 0)
    throw std::invalid_argument(describe() + ": expected inputs [batch, timesteps, features], got shape " +
                                input_shape.to_string());
  if (!cell_->built()) cell_->build(Shape{input_shape.dim(0), input_shape.dim(2)});
  Layer::build(input_shape);
}

void RNN::build(const std::vector<Shape>& input_shapes) {
  if (input_shapes.empty()) throw std::invalid_argument(describe() + ": no inputs");
  build(input_shapes[0]);
}

Shape RNN::compute_output_shape(const Shape& s) const {
  if (s.rank() != 3)
    throw std::invalid_argument(describe() + ": expected inputs [batch, timesteps, features], got shape " +
                                s.to_string());
  if (options_.return_sequences) return Shape{s.dim(0), s.dim(1), cell_->units()};
  return Shape{s.dim(0), cell_->units()};
}

Tensor RNN::call(const Tensor& sequences, bool training) { return call_with_state(sequences, {}, {}, training)[0]; }

Tensor RNN::call(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.empty()) throw std::invalid_argument(describe() + ": no inputs");
  return call_with_state(inputs[0], std::vector<Tensor>(inputs.begin() + 1, inputs.end()), {}, training)[0];
}

std::vector<Tensor> RNN::call_outputs(const std::vector<Tensor>& inputs, const CallFlags& flags, bool training) {
  CallFlags rest = flags;
  rest.mask = false;
  refuse_call_flags(rest);
  return internal::recurrent_node_outputs(*this, inputs, flags.mask, options_.return_state, training, describe());
}

Tensor RNN::call(const Tensor& sequences, const Tensor& mask, bool training) {
  return call_with_state(sequences, {}, mask, training)[0];
}

std::vector<Tensor> RNN::call_with_state(const Tensor& sequences_in, const std::vector<Tensor>& initial_state,
                                         const std::optional<Tensor>& mask_in, bool training) {
  const Tensor seq = begin_call(sequences_in);
  const Shape& s = seq.shape();
  const std::int64_t in = cell_->input_dim(), units = cell_->units();
  if (s.rank() != 3 || s.dim(2) != in)
    throw std::invalid_argument(describe() + ": expected inputs [batch, timesteps, " + std::to_string(in) +
                                "], got shape " + s.to_string());
  const std::int64_t batch = s.dim(0), steps = s.dim(1);
  if (steps == 0) throw std::invalid_argument(describe() + ": inputs of shape " + s.to_string() + " have no timesteps");
  const Shape state_shape{batch, units};

  std::vector<Tensor> states;
  if (initial_state.empty()) {
    for (int i = 0; i < cell_->num_states(); ++i) states.push_back(zeros(state_shape, seq.dtype()));
  } else {
    if (static_cast<int>(initial_state.size()) != cell_->num_states())
      throw std::invalid_argument(describe() + ": expected " + std::to_string(cell_->num_states()) +
                                  " initial states, got " + std::to_string(initial_state.size()));
    for (const Tensor& st : initial_state) {
      if (st.shape() != state_shape)
        throw std::invalid_argument(describe() + ": initial state of shape " + st.shape().to_string() +
                                    " does not fit inputs " + s.to_string() + " (expected " +
                                    state_shape.to_string() + ")");
      states.push_back(is_floating(st.dtype()) && st.dtype() != seq.dtype() ? cast(st, seq.dtype()) : st);
    }
  }

  std::vector<Tensor> step_masks;
  if (mask_in) {
    Tensor m = *mask_in;
    if (m.shape() != Shape{batch, steps})
      throw std::invalid_argument(describe() + ": mask of shape " + m.shape().to_string() + " does not fit inputs " +
                                  s.to_string() + " (expected [" + std::to_string(batch) + ", " +
                                  std::to_string(steps) + "])");
    if (m.dtype() != DType::kBool) m = not_equal(m, zeros({}, m.dtype()));
    for (const Tensor& mt : unstack(m, 1)) step_masks.push_back(reshape(mt, std::vector<std::int64_t>{batch, 1}));
  }

  // All steps' input projections in one GEMM (one per gate with per-gate dropout masks), time-major
  // so each step's rows are contiguous.
  auto time_major = [&](const Tensor& v) {
    return reshape(transpose(v, {1, 0, 2}), std::vector<std::int64_t>{steps * batch, in});
  };
  std::vector<Tensor> x;
  for (const Tensor& m : cell_->dropout_masks(Shape{batch, in}, seq.dtype(), cell_->dropout(), cell_->mask_count(),
                                              training))
    x.push_back(time_major(seq * reshape(m, std::vector<std::int64_t>{batch, 1, in})));
  const bool input_dropout = !x.empty();
  if (x.empty()) x.push_back(time_major(seq));
  const std::vector<Tensor> rec_masks =
      cell_->dropout_masks(state_shape, seq.dtype(), cell_->recurrent_dropout(), cell_->gates(), training);
  cell_->begin_sequence();
  if (step_masks.empty() && rec_masks.empty() && !input_dropout) {
    // The whole sequence in one op if the cell has one, in processing order.
    Tensor ordered = reshape(x[0], std::vector<std::int64_t>{steps, batch, in});
    if (options_.go_backwards) {
      std::vector<std::int64_t> rev(static_cast<std::size_t>(steps));
      for (std::int64_t k = 0; k < steps; ++k) rev[static_cast<std::size_t>(k)] = steps - 1 - k;
      ordered = gather(ordered, constant<std::int64_t>(rev, Shape{steps}), 0);
    }
    std::vector<Tensor> whole = cell_->run_sequence(ordered, states);
    if (!whole.empty()) {
      std::vector<Tensor> result;  // whole[0] [steps, batch, units]; whole[1] is the last step's h
      result.push_back(options_.return_sequences ? transpose(whole[0], {1, 0, 2}) : whole[1]);
      for (std::size_t i = 1; i < whole.size(); ++i) result.push_back(std::move(whole[i]));
      return result;
    }
  }
  const Tensor xp = cell_->project_inputs(x);
  const std::vector<Tensor> xs = unstack(reshape(xp, std::vector<std::int64_t>{steps, batch, xp.shape().dim(1)}), 0);

  std::vector<Tensor> outputs;
  outputs.reserve(options_.return_sequences ? steps : 1);
  Tensor last;
  for (std::int64_t k = 0; k < steps; ++k) {
    const std::int64_t t = options_.go_backwards ? steps - 1 - k : k;
    std::vector<Tensor> h;
    for (const Tensor& m : rec_masks) h.push_back(states[0] * m);
    if (h.empty()) h.push_back(states[0]);
    std::vector<Tensor> next = cell_->step(xs[t], states, h);
    Tensor out = next[0];
    if (!step_masks.empty()) {
      const Tensor& m = step_masks[t];
      out = where(m, out, options_.zero_output_for_mask ? scalar_like(out, 0.0) : states[0]);
      for (std::size_t i = 0; i < next.size(); ++i) next[i] = where(m, next[i], states[i]);
    }
    states = std::move(next);
    if (options_.return_sequences) outputs.push_back(out);
    last = out;
  }
  std::vector<Tensor> result;
  result.push_back(options_.return_sequences ? stack(outputs, 1) : last);
  for (Tensor& st : states) result.push_back(std::move(st));
  return result;
}

std::shared_ptr<RNN> RNN::remake(const Config&, const std::string&) const {
  throw std::logic_error(describe() + ": only SimpleRNN, LSTM and GRU layers can be copied (Bidirectional)");
}

Config RNN::rnn_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["return_sequences"] = options_.return_sequences;
  c["return_state"] = options_.return_state;
  c["go_backwards"] = options_.go_backwards;
  c["stateful"] = false;
  c["unroll"] = false;
  c["time_major"] = false;
  c["zero_output_for_mask"] = options_.zero_output_for_mask;
  return config;
}

RNNOptions RNN::rnn_options_from(const ConfigReader& r) {
  if (r.boolean("stateful", false)) r.fail("stateful", "stateful RNNs are not supported by tapeflow");
  if (r.boolean("time_major", false)) r.fail("time_major", "time-major inputs are not supported by tapeflow");
  r.boolean("unroll", false);  // unrolled or not, the same math
  return RNNOptions{.return_sequences = r.boolean("return_sequences", false),
                    .return_state = r.boolean("return_state", false),
                    .go_backwards = r.boolean("go_backwards", false),
                    .zero_output_for_mask = r.boolean("zero_output_for_mask", false),
                    .name = r.name(),
                    .dtype = r.dtype()};
}

void write_cell_config(Config& config, const CellConfig& cell, bool recurrent_activation) {
  nlohmann::json& c = json_of(config);
  c["units"] = cell.units;
  c["activation"] = cell.activation.empty() ? "linear" : cell.activation;
  if (recurrent_activation)
    c["recurrent_activation"] = cell.recurrent_activation.empty() ? "linear" : cell.recurrent_activation;
  c["use_bias"] = cell.use_bias;
  c["kernel_initializer"] = serialize_initializer(cell.kernel_initializer);
  c["recurrent_initializer"] = serialize_initializer(cell.recurrent_initializer);
  c["bias_initializer"] = serialize_initializer(cell.bias_initializer);
  for (const char* k : {"kernel_regularizer", "recurrent_regularizer", "bias_regularizer", "activity_regularizer",
                        "kernel_constraint", "recurrent_constraint", "bias_constraint"})
    c[k] = nullptr;
  c["dropout"] = cell.dropout;
  c["recurrent_dropout"] = cell.recurrent_dropout;
  c["seed"] = cell.seed ? nlohmann::json(*cell.seed) : nlohmann::json(nullptr);
}

CellConfig read_cell_config(const ConfigReader& r, bool recurrent_activation) {
  for (const char* k : {"kernel_regularizer", "recurrent_regularizer", "bias_regularizer", "activity_regularizer",
                        "kernel_constraint", "recurrent_constraint", "bias_constraint"})
    r.require_null(k);
  CellConfig cell{.units = r.integer("units"),
                  .activation = r.string("activation", "tanh"),
                  .recurrent_activation = recurrent_activation ? r.string("recurrent_activation", "sigmoid") : "sigmoid",
                  .use_bias = r.boolean("use_bias", true),
                  .kernel_initializer = r.initializer("kernel_initializer", "glorot_uniform"),
                  .recurrent_initializer = r.initializer("recurrent_initializer", "orthogonal"),
                  .bias_initializer = r.initializer("bias_initializer", "zeros"),
                  .dropout = r.number("dropout", 0.0),
                  .recurrent_dropout = r.number("recurrent_dropout", 0.0),
                  .seed = r.seed("seed")};
  if (cell.activation == "linear") cell.activation = "";
  if (cell.recurrent_activation == "linear") cell.recurrent_activation = "";
  return cell;
}

Tensor apply_activation(Tensor (*fn)(const Tensor&), const Tensor& x) { return fn ? fn(x) : x; }

}  // namespace tapeflow::layers
