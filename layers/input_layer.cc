#include "layers/input_layer.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"

namespace tapeflow::layers {
namespace {

// Keras 2 names inputs "input_1", "input_2", ... (a counter starting at 1).
std::string default_input_name() {
  std::string n = unique_layer_name("input");
  return n == "input" ? unique_layer_name("input") : n;
}

}  // namespace

InputLayer::InputLayer(InputOptions options)
    : Layer("InputLayer", options.name.empty() ? default_input_name() : options.name), options_(std::move(options)) {
  for (std::int64_t d : options_.shape)
    if (d < 0) {
      std::string s;
      for (std::int64_t e : options_.shape) s += (s.empty() ? "" : ", ") + std::to_string(e);
      throw std::invalid_argument(describe() + ": negative dimension in shape (" + s + ")");
    }
}

Tensor InputLayer::call(const Tensor& inputs, bool) { return inputs; }

Config InputLayer::get_config() const {
  nlohmann::json shape = nlohmann::json::array({nullptr});
  for (std::int64_t d : options_.shape) shape.push_back(d);
  return to_config({{"batch_input_shape", shape},
                    {"dtype", dtype_name(options_.dtype)},
                    {"sparse", false},
                    {"ragged", false},
                    {"name", name()}});
}

std::shared_ptr<InputLayer> InputLayer::from_config(const Config& config_in) {
  const nlohmann::json& config = json_of(config_in);
  ConfigReader r(config_in, "InputLayer");
  const char* key = r.has("batch_input_shape") ? "batch_input_shape" : "batch_shape";  // Keras 3 writes batch_shape
  if (!r.has(key)) r.fail("batch_input_shape", "missing");
  const nlohmann::json& bs = config[key];
  if (!bs.is_array() || bs.empty()) r.fail(key, "expected [null, d1, ...], got " + bs.dump());
  std::vector<std::int64_t> shape;
  for (std::size_t i = 1; i < bs.size(); ++i) {
    if (!bs[i].is_number_integer() || bs[i].get<std::int64_t>() < 0)
      r.fail(key, "only the batch dimension may be unknown, got " + bs.dump());
    shape.push_back(bs[i].get<std::int64_t>());
  }
  if (r.boolean("sparse", false)) r.fail("sparse", "sparse inputs are not supported by tapeflow");
  if (r.boolean("ragged", false)) r.fail("ragged", "ragged inputs are not supported by tapeflow");
  return std::make_shared<InputLayer>(InputOptions{.shape = shape, .dtype = r.dtype().value_or(DType::kFloat32), .name = r.name()});
}

KerasTensor InputLayer::output_of(const std::shared_ptr<InputLayer>& layer) {
  std::vector<std::int64_t> shape{-1};
  shape.insert(shape.end(), layer->options_.shape.begin(), layer->options_.shape.end());
  auto node = std::make_shared<Node>(Node{layer, {}, next_node_serial(), {}, {shape}, {layer->options_.dtype}});
  return KerasTensor(std::move(shape), layer->options_.dtype, std::move(node));
}

KerasTensor Input(InputOptions options) { return InputLayer::output_of(std::make_shared<InputLayer>(std::move(options))); }

}  // namespace tapeflow::layers
