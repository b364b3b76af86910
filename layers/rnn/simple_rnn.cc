#include "layers/rnn/simple_rnn.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/linalg_ops.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

SimpleRNNCell::SimpleRNNCell(const SimpleRNNOptions& o, std::string name)
    : RNNCell("SimpleRNNCell", name.empty() ? "simple_rnn_cell" : std::move(name), o.seed, o.dtype, o.units, o.dropout,
              o.recurrent_dropout),
      options_(o),
      activation_(activations::get(o.activation)) {}

void SimpleRNNCell::build_cell(std::int64_t input_dim) {
  kernel_ = add_weight("kernel", {input_dim, units()}, options_.kernel_initializer);
  recurrent_kernel_ = add_weight("recurrent_kernel", {units(), units()}, options_.recurrent_initializer);
  if (options_.use_bias) bias_ = add_weight("bias", {units()}, options_.bias_initializer);
}

std::optional<Tensor> SimpleRNNCell::input_bias() const {
  if (!options_.use_bias) return std::nullopt;
  return bias_.read();
}

std::vector<Tensor> SimpleRNNCell::step(const Tensor& xp, const std::vector<Tensor>&, const std::vector<Tensor>& h) {
  return {apply_activation(activation_, xp + matmul(h[0], recurrent_))};
}

SimpleRNN::SimpleRNN(SimpleRNNOptions options, const std::string& cell_name)
    : RNN("SimpleRNN", rnn_options_of(options), options.seed), options_(std::move(options)) {
  set_cell(std::make_shared<SimpleRNNCell>(options_, cell_name_or(cell_name, "simple_rnn_cell")));
}

Config SimpleRNN::get_config() const {
  Config config = rnn_config();
  write_cell_config(config, cell_config_of(options_), false);
  return config;
}

std::shared_ptr<SimpleRNN> SimpleRNN::from_config(const Config& config, const std::string& cell_name) {
  ConfigReader r(config, "SimpleRNN");
  SimpleRNNOptions o;
  assign_rnn_options(o, rnn_options_from(r));
  assign_cell_config(o, read_cell_config(r, false));
  try {
    return r.finish(std::make_shared<SimpleRNN>(std::move(o), cell_name));
  } catch (const std::invalid_argument& e) {
    r.fail("units/activation/dropout", e.what());
  }
}

std::shared_ptr<RNN> SimpleRNN::remake(const Config& config, const std::string& cell_name) const {
  return from_config(config, cell_name);
}

}  // namespace tapeflow::layers
