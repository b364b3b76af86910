#include "layers/rnn/lstm.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/linalg_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/rnn_ops.h"

namespace tapeflow::layers {

LSTMCell::LSTMCell(const LSTMOptions& o, std::string name)
    : RNNCell("LSTMCell", name.empty() ? "lstm_cell" : std::move(name), o.seed, o.dtype, o.units, o.dropout,
              o.recurrent_dropout),
      options_(o),
      activation_(activations::get(o.activation)),
      recurrent_activation_(activations::get(o.recurrent_activation)) {}

void LSTMCell::build_cell(std::int64_t input_dim) {
  const std::int64_t u = units();
  kernel_ = add_weight("kernel", {input_dim, 4 * u}, options_.kernel_initializer);
  recurrent_kernel_ = add_weight("recurrent_kernel", {u, 4 * u}, options_.recurrent_initializer);
  if (!options_.use_bias) return;
  if (options_.unit_forget_bias) {
    const Initializer inner = options_.bias_initializer;
    bias_ = add_weight("bias", {4 * u},
                       Initializer("lstm_unit_forget_bias", [inner, u](const Shape&, DType dt, Generator& gen) {
                         return convert(concat({inner(Shape{u}, dt, gen), ones(Shape{u}, dt), inner(Shape{2 * u}, dt, gen)}, 0), dt);
                       }));
  } else {
    bias_ = add_weight("bias", {4 * u}, options_.bias_initializer);
  }
}

void LSTMCell::begin_sequence() {
  recurrent_ = recurrent_kernel_.read();
  recurrent_gates_ = recurrent_dropout() > 0 ? split(recurrent_, 4, 1) : std::vector<Tensor>{};
}

std::optional<Tensor> LSTMCell::input_bias() const {
  if (!options_.use_bias) return std::nullopt;
  return bias_.read();
}

bool LSTMCell::fused_math() const {
  return fused_ && options_.activation == "tanh" && options_.recurrent_activation == "sigmoid";
}

std::vector<Tensor> LSTMCell::run_sequence(const Tensor& x, const std::vector<Tensor>& states) {
  if (!fused_math()) return {};
  const Tensor b = options_.use_bias ? bias_.read() : zeros(Shape{4 * units()}, x.dtype());
  const LstmSequenceOutputs out = block_lstm(x, kernel_.read(), recurrent_, b, states[0], states[1]);
  const std::int64_t steps = x.shape().dim(0);
  auto last = [&](const Tensor& v) {
    return reshape(slice(v, {steps - 1, 0, 0}, {1, -1, -1}), std::vector<std::int64_t>{v.shape().dim(1), units()});
  };
  return {out.h, last(out.h), last(out.c)};
}

std::vector<Tensor> LSTMCell::step(const Tensor& xp, const std::vector<Tensor>& states, const std::vector<Tensor>& h) {
  const Tensor zs = xp + recurrent_matmul(h, recurrent_, recurrent_gates_);
  if (fused_math()) {
    const LstmCellOutputs out = lstm_block_cell(zs, states[1]);
    return {out.h, out.c};
  }
  const std::vector<Tensor> z = split(zs, 4, 1);
  const Tensor i = apply_activation(recurrent_activation_, z[0]);
  const Tensor f = apply_activation(recurrent_activation_, z[1]);
  const Tensor c = f * states[1] + i * apply_activation(activation_, z[2]);
  const Tensor o = apply_activation(recurrent_activation_, z[3]);
  return {o * apply_activation(activation_, c), c};
}

LSTM::LSTM(LSTMOptions options, const std::string& cell_name)
    : RNN("LSTM", rnn_options_of(options), options.seed), options_(std::move(options)) {
  set_cell(std::make_shared<LSTMCell>(options_, cell_name_or(cell_name, "lstm_cell")));
}

Config LSTM::get_config() const {
  Config config = rnn_config();
  nlohmann::json& c = json_of(config);
  write_cell_config(config, cell_config_of(options_), true);
  c["unit_forget_bias"] = options_.unit_forget_bias;
  c["implementation"] = 2;
  return config;
}

std::shared_ptr<LSTM> LSTM::from_config(const Config& config, const std::string& cell_name) {
  ConfigReader r(config, "LSTM");
  LSTMOptions o;
  assign_rnn_options(o, rnn_options_from(r));
  assign_cell_config(o, read_cell_config(r, true));
  o.unit_forget_bias = r.boolean("unit_forget_bias", true);
  try {
    return r.finish(std::make_shared<LSTM>(std::move(o), cell_name));
  } catch (const std::invalid_argument& e) {
    r.fail("units/activation/dropout", e.what());
  }
}

std::shared_ptr<RNN> LSTM::remake(const Config& config, const std::string& cell_name) const {
  return from_config(config, cell_name);
}

}  // namespace tapeflow::layers
