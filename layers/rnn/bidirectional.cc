#include "layers/rnn/bidirectional.h"

#include <stdexcept>

#include "layers/internal/recurrent_call.h"

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/index_ops.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

namespace {

std::string strip_prefix(const std::string& s, const std::string& prefix) {
  return s.starts_with(prefix) ? s.substr(prefix.size()) : s;
}

// x reversed along axis 1 (time).
Tensor reverse_time(const Tensor& x) {
  const std::int64_t t = x.shape().dim(1);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(t));
  for (std::int64_t i = 0; i < t; ++i) idx[static_cast<std::size_t>(i)] = t - 1 - i;
  return gather(x, constant<std::int64_t>(idx, Shape{t}), 1);
}

}  // namespace

Bidirectional::Bidirectional(const std::shared_ptr<RNN>& layer, BidirectionalOptions options)
    : Layer("Bidirectional", options.name, std::nullopt, options.dtype), options_(std::move(options)) {
  if (!layer) throw std::invalid_argument(describe() + ": null layer");
  const std::string& m = options_.merge_mode;
  if (m != "concat" && m != "sum" && m != "ave" && m != "mul")
    throw std::invalid_argument(describe() + ": merge_mode must be concat, sum, ave or mul, got '" + m + "'");
  const nlohmann::json config = serialize_json(*layer);
  layer_config_ = config.dump();
  const std::string base = layer->name();
  nlohmann::json f = config["config"];
  nlohmann::json b = config["config"];
  f["name"] = "forward_" + strip_prefix(base, "forward_");
  b["name"] = "backward_" + strip_prefix(base, "backward_");
  b["go_backwards"] = !layer->rnn_options().go_backwards;
  const std::string suffix = layer->cell_suffix();
  forward_ = track_layer(layer->remake(to_config(f), name() + "/" + f["name"].get<std::string>() + "/" + suffix));
  backward_ = track_layer(layer->remake(to_config(b), name() + "/" + b["name"].get<std::string>() + "/" + suffix));
  for (const auto& l : {forward_, backward_}) l->set_zero_output_for_mask(l->rnn_options().return_sequences);
}

void Bidirectional::build(const Shape& input_shape) {
  forward_->build(input_shape);
  backward_->build(input_shape);
  Layer::build(input_shape);
}

void Bidirectional::build(const std::vector<Shape>& input_shapes) {
  if (input_shapes.empty()) throw std::invalid_argument(describe() + ": no inputs");
  build(input_shapes[0]);
}

Shape Bidirectional::compute_output_shape(const Shape& input_shape) const {
  Shape out = forward_->compute_output_shape(input_shape);
  if (options_.merge_mode == "concat") out[out.rank() - 1] *= 2;
  return out;
}

Tensor Bidirectional::call(const Tensor& sequences, bool training) {
  return call_with_state(sequences, {}, {}, training)[0];
}

Tensor Bidirectional::call(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.empty()) throw std::invalid_argument(describe() + ": no inputs");
  return call_with_state(inputs[0], std::vector<Tensor>(inputs.begin() + 1, inputs.end()), {}, training)[0];
}

std::vector<Tensor> Bidirectional::call_outputs(const std::vector<Tensor>& inputs, const CallFlags& flags, bool training) {
  CallFlags rest = flags;
  rest.mask = false;
  refuse_call_flags(rest);
  return internal::recurrent_node_outputs(*this, inputs, flags.mask, forward_->rnn_options().return_state, training, describe());
}

Tensor Bidirectional::call(const Tensor& sequences, const Tensor& mask, bool training) {
  return call_with_state(sequences, {}, mask, training)[0];
}

std::vector<Tensor> Bidirectional::call_with_state(const Tensor& sequences_in, const std::vector<Tensor>& initial_state,
                                                   const std::optional<Tensor>& mask, bool training) {
  const Tensor seq = begin_call(sequences_in);
  if (initial_state.size() % 2 != 0)
    throw std::invalid_argument(describe() + ": expected an even number of initial states (forward, then backward), got " +
                                std::to_string(initial_state.size()));
  const auto half = static_cast<std::ptrdiff_t>(initial_state.size() / 2);
  const std::vector<Tensor> fs(initial_state.begin(), initial_state.begin() + half);
  const std::vector<Tensor> bs(initial_state.begin() + half, initial_state.end());
  std::vector<Tensor> y = forward_->call_with_state(seq, fs, mask, training);
  std::vector<Tensor> y_rev = backward_->call_with_state(seq, bs, mask, training);
  Tensor a = y[0], b = y_rev[0];
  if (forward_->rnn_options().return_sequences) b = reverse_time(b);
  Tensor out;
  const std::string& m = options_.merge_mode;
  if (m == "concat") out = concat({a, b}, -1);
  else if (m == "sum") out = a + b;
  else if (m == "ave") out = (a + b) / 2.0;
  else out = a * b;
  std::vector<Tensor> result{out};
  result.insert(result.end(), y.begin() + 1, y.end());
  result.insert(result.end(), y_rev.begin() + 1, y_rev.end());
  return result;
}

Generator* Bidirectional::training_generator() {
  // Both copies draw dropout masks. Checkpoints visit the copies as sublayers too, so each copy's
  // generator is saved on its own (the forward one's twice: here and as the sublayer's; the
  // numbering of existing checkpoint files depends on it).
  return forward_->training_generator();
}

Config Bidirectional::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["layer"] = nlohmann::json::parse(layer_config_);
  c["merge_mode"] = options_.merge_mode;
  return config;
}

std::shared_ptr<Bidirectional> Bidirectional::from_config(const Config& config_in) {
  const nlohmann::json& config = json_of(config_in);
  ConfigReader r(config_in, "Bidirectional");
  if (!r.has("layer")) r.fail("layer", "missing");
  r.require_null("backward_layer");
  std::shared_ptr<RNN> inner;
  try {
    inner = std::dynamic_pointer_cast<RNN>(deserialize(config.at("layer")));
  } catch (const std::invalid_argument& e) {
    r.fail("layer", e.what());
  }
  if (!inner) r.fail("layer", "must be a recurrent layer (SimpleRNN, LSTM, GRU)");
  try {
    return r.finish(std::make_shared<Bidirectional>(
        inner, BidirectionalOptions{.merge_mode = r.string("merge_mode", "concat"), .name = r.name(), .dtype = r.dtype()}));
  } catch (const std::invalid_argument& e) {
    r.fail("merge_mode", e.what());
  }
}

}  // namespace tapeflow::layers
