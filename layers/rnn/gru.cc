#include "layers/rnn/gru.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/linalg_ops.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

GRUCell::GRUCell(const GRUOptions& o, std::string name)
    : RNNCell("GRUCell", name.empty() ? "gru_cell" : std::move(name), o.seed, o.dtype, o.units, o.dropout,
              o.recurrent_dropout),
      options_(o),
      activation_(activations::get(o.activation)),
      recurrent_activation_(activations::get(o.recurrent_activation)) {}

void GRUCell::build_cell(std::int64_t input_dim) {
  const std::int64_t u = units();
  kernel_ = add_weight("kernel", {input_dim, 3 * u}, options_.kernel_initializer);
  recurrent_kernel_ = add_weight("recurrent_kernel", {u, 3 * u}, options_.recurrent_initializer);
  if (options_.use_bias)
    bias_ = add_weight("bias", options_.reset_after ? Shape{2, 3 * u} : Shape{3 * u}, options_.bias_initializer);
}

void GRUCell::begin_sequence() {
  const std::int64_t u = units();
  recurrent_ = recurrent_kernel_.read();
  recurrent_gates_ = recurrent_dropout() > 0 ? split(recurrent_, 3, 1) : std::vector<Tensor>{};
  recurrent_bias_.reset();
  if (options_.reset_after) {
    if (options_.use_bias) recurrent_bias_ = reshape(slice(bias_.read(), {1, 0}, {1, 3 * u}), std::vector<std::int64_t>{3 * u});
  } else if (recurrent_gates_.empty()) {
    recurrent_zr_ = slice(recurrent_, {0, 0}, {u, 2 * u});
    recurrent_h_ = slice(recurrent_, {0, 2 * u}, {u, u});
  }
}

std::optional<Tensor> GRUCell::input_bias() const {
  if (!options_.use_bias) return std::nullopt;
  if (!options_.reset_after) return bias_.read();
  return reshape(slice(bias_.read(), {0, 0}, {1, 3 * units()}), std::vector<std::int64_t>{3 * units()});
}

std::vector<Tensor> GRUCell::step(const Tensor& xp, const std::vector<Tensor>& states, const std::vector<Tensor>& h) {
  const std::vector<Tensor> x = split(xp, 3, 1);
  Tensor z, r, hh;
  if (options_.reset_after) {
    Tensor inner = recurrent_matmul(h, recurrent_, recurrent_gates_);
    if (recurrent_bias_) inner = inner + *recurrent_bias_;
    const std::vector<Tensor> m = split(inner, 3, 1);
    z = apply_activation(recurrent_activation_, x[0] + m[0]);
    r = apply_activation(recurrent_activation_, x[1] + m[1]);
    hh = apply_activation(activation_, x[2] + r * m[2]);
  } else if (h.size() == 1) {
    const std::vector<Tensor> m = split(matmul(h[0], recurrent_zr_), 2, 1);
    z = apply_activation(recurrent_activation_, x[0] + m[0]);
    r = apply_activation(recurrent_activation_, x[1] + m[1]);
    hh = apply_activation(activation_, x[2] + matmul(r * h[0], recurrent_h_));
  } else {
    z = apply_activation(recurrent_activation_, x[0] + matmul(h[0], recurrent_gates_[0]));
    r = apply_activation(recurrent_activation_, x[1] + matmul(h[1], recurrent_gates_[1]));
    hh = apply_activation(activation_, x[2] + matmul(r * h[2], recurrent_gates_[2]));
  }
  return {z * states[0] + (1.0 - z) * hh};
}

GRU::GRU(GRUOptions options, const std::string& cell_name)
    : RNN("GRU", rnn_options_of(options), options.seed), options_(std::move(options)) {
  set_cell(std::make_shared<GRUCell>(options_, cell_name_or(cell_name, "gru_cell")));
}

Config GRU::get_config() const {
  Config config = rnn_config();
  nlohmann::json& c = json_of(config);
  write_cell_config(config, cell_config_of(options_), true);
  c["reset_after"] = options_.reset_after;
  c["implementation"] = 2;
  return config;
}

std::shared_ptr<GRU> GRU::from_config(const Config& config, const std::string& cell_name) {
  ConfigReader r(config, "GRU");
  GRUOptions o;
  assign_rnn_options(o, rnn_options_from(r));
  assign_cell_config(o, read_cell_config(r, true));
  o.reset_after = r.boolean("reset_after", true);
  try {
    return r.finish(std::make_shared<GRU>(std::move(o), cell_name));
  } catch (const std::invalid_argument& e) {
    r.fail("units/activation/dropout", e.what());
  }
}

std::shared_ptr<RNN> GRU::remake(const Config& config, const std::string& cell_name) const {
  return from_config(config, cell_name);
}

}  // namespace tapeflow::layers
