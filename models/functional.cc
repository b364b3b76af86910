#include "models/functional.h"
#include "models/internal/inbound_node.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "layers/input_layer.h"
#include "layers/ops/not_equal.h"
#include "layers/attention/multi_head_attention.h"
#include "layers/rnn/bidirectional.h"
#include "layers/rnn/rnn.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/runtime/recorder.h"
#include "models/internal/functional_masks.h"
#include "models/internal/fusion.h"
#include "models/internal/keras3_config.h"

namespace tapeflow::models {
using layers::KerasTensor;
using layers::Node;
using nlohmann::json;

namespace {

bool is_input_node(const Node& n) {
  return n.inputs.empty() && dynamic_cast<const layers::InputLayer*>(n.layer.get()) != nullptr;
}

std::string default_model_name(const std::string& name) {
  if (!name.empty()) return name;
  return layers::unique_layer_name("model");  // Keras 2: "model", "model_1", ...
}

}  // namespace

Functional::Functional(const KerasTensor& input, const KerasTensor& output, std::string name)
    : Functional(std::vector<KerasTensor>{input}, std::vector<KerasTensor>{output}, std::move(name)) {}

Functional::Functional(std::vector<KerasTensor> inputs, std::vector<KerasTensor> outputs, std::string name)
    : Model(default_model_name(name), "Functional"), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {
  const std::string me = "Functional '" + this->name() + "'";
  if (inputs_.empty()) throw std::invalid_argument(me + ": no inputs given");
  if (outputs_.empty()) throw std::invalid_argument(me + ": no outputs given");
  std::set<const Node*> input_nodes;
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    const KerasTensor& t = inputs_[i];
    if (!t.defined()) throw std::invalid_argument(me + ": inputs[" + std::to_string(i) + "] is undefined");
    if (!is_input_node(*t.node()))
      throw std::invalid_argument(me + ": inputs[" + std::to_string(i) + "] is not an Input: it is the " + t.describe() +
                                  " (model inputs must come from layers::Input)");
    if (!input_nodes.insert(t.node().get()).second)
      throw std::invalid_argument(me + ": inputs[" + std::to_string(i) + "] (" + t.describe() + ") is given twice");
  }
  // Walk back from the outputs; every path must end at one of the inputs.
  std::set<const Node*> seen;
  std::vector<std::shared_ptr<const Node>> stack;
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    if (!outputs_[i].defined()) throw std::invalid_argument(me + ": outputs[" + std::to_string(i) + "] is undefined");
    stack.push_back(outputs_[i].node());
  }
  while (!stack.empty()) {
    std::shared_ptr<const Node> n = stack.back();
    stack.pop_back();
    if (!seen.insert(n.get()).second) continue;
    nodes_.push_back(n);
    if (is_input_node(*n)) {
      if (!input_nodes.count(n.get())) {
        std::string given;
        for (const KerasTensor& t : inputs_) given += (given.empty() ? "'" : ", '") + t.node()->layer->name() + "'";
        throw std::invalid_argument(me + ": graph disconnected: the outputs depend on Input '" + n->layer->name() +
                                    "', which is not among the model inputs (" + given + ")");
      }
      continue;
    }
    for (const KerasTensor& t : n->inputs) stack.push_back(t.node());
  }
  for (const KerasTensor& t : inputs_)
    if (!seen.count(t.node().get())) nodes_.push_back(t.node());  // unused inputs are still inputs
  std::sort(nodes_.begin(), nodes_.end(), [](const auto& a, const auto& b) { return a->serial < b->serial; });

  // Value slots: the inputs first, in the given order, then every other node's output.
  for (std::size_t i = 0; i < inputs_.size(); ++i) slot_[inputs_[i].node().get()] = i;
  std::size_t next = inputs_.size();
  std::map<const layers::Layer*, int> calls;
  std::map<std::string, const layers::Layer*> names;
  // Keras's layer order: the inputs, then the other layers as first called.
  std::vector<std::shared_ptr<layers::Layer>> order;
  for (const KerasTensor& t : inputs_) order.push_back(t.node()->layer);
  for (const auto& n : nodes_) {
    if (!is_input_node(*n)) {
      Step step{n, {}, next, std::max<std::size_t>(1, n->output_shapes.size())};
      for (const KerasTensor& t : n->inputs) step.inputs.push_back(slot_of(t));
      slot_[n.get()] = next;
      next += step.num_outputs;
      steps_.push_back(std::move(step));
      if (std::find(order.begin(), order.end(), n->layer) == order.end()) order.push_back(n->layer);
    }
    node_index_[n.get()] = calls[n->layer.get()]++;
  }
  for (const auto& l : order) {
    auto [it, fresh] = names.emplace(l->name(), l.get());
    if (!fresh && it->second != l.get())
      throw std::invalid_argument(me + ": two different layers are named '" + l->name() +
                                  "' (layer names must be unique in a model)");
    track_layer(l);
  }
  num_slots_ = next;
  for (const KerasTensor& t : outputs_) output_slots_.push_back(slot_of(t));
  // The fusion pass (models/internal/fusion.h) over the recorded calls, once.
  std::vector<internal::LayerCall> layer_calls;
  for (const Step& s : steps_) layer_calls.push_back({s.node->layer.get(), s.inputs, s.output});
  fused_ = internal::plan_fusion(layer_calls, output_slots_);
  if (inputs_.size() == 1) {
    std::vector<std::int64_t> dims = inputs_[0].shape();
    dims[0] = 1;
    Model::build(Shape(dims));
  } else {
    Layer::build(std::vector<Shape>{});
  }
}

Functional::~Functional() = default;

std::vector<Tensor> Functional::run(const std::vector<Tensor>& xs, bool training) {
  if (xs.size() != inputs_.size())
    throw std::invalid_argument(describe() + ": expects " + std::to_string(inputs_.size()) + " input(s), got " +
                                std::to_string(xs.size()));
  std::vector<Tensor> values(num_slots_);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const auto& want = inputs_[i].shape();
    const Shape& got = xs[i].shape();
    bool ok = static_cast<std::size_t>(got.rank()) == want.size();
    for (std::size_t d = 1; ok && d < want.size(); ++d) ok = got[int(d)] == want[d];
    if (!ok)
      throw std::invalid_argument(describe() + ": input " + std::to_string(i) + " ('" + inputs_[i].node()->layer->name() +
                                  "') expects shape " + inputs_[i].shape_string() + ", got " + got.to_string());
    values[i] = xs[i];
  }
  // Keras masks (models/internal/functional_masks.h), per value; undefined: none.
  std::vector<Tensor> masks(values.size());
  const bool model_training = training;
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    training = s.node->flags.training.value_or(model_training);
    if (fused_[i].run != internal::FusedRun::kAsWritten) {  // one input; the fused layers drop masks
      values[s.output] = internal::run_planned(fused_[i], *s.node->layer, values[s.inputs[0]], training);
      continue;
    }
    bool masked = internal::makes_mask(*s.node->layer);
    for (std::size_t k : s.inputs) masked = masked || masks[k].defined();
    if (masked) {
      std::vector<Tensor> in, m;
      for (std::size_t k : s.inputs) {
        in.push_back(values[k]);
        m.push_back(masks[k]);
      }
      // An explicit mask / attention_mask (the node's last input) goes beside the masks.
      layers::CallFlags flags = s.node->flags;
      Tensor mask_arg, attention_mask_arg;
      if (flags.mask || flags.attention_mask) {
        (flags.mask ? mask_arg : attention_mask_arg) = in.back();
        in.pop_back();
        m.pop_back();
        flags.mask = flags.attention_mask = false;
      }
      const bool key_is_value = in.size() > 2 && s.inputs[2] == s.inputs[1];
      internal::MaskedOutput r = internal::call_with_masks(*s.node->layer, in, m, key_is_value, flags, training, mask_arg,
                                                           attention_mask_arg);
      store(s, r.outputs, values);
      masks[s.output] = r.mask;
    } else {
      std::vector<Tensor> in;
      for (std::size_t k : s.inputs) in.push_back(values[k]);
      store(s, s.node->layer->call_outputs(in, s.node->flags, training), values);
    }
  }
  std::vector<Tensor> out;
  for (std::size_t k : output_slots_) out.push_back(values[k]);
  return out;
}

void Functional::store(const Step& s, const std::vector<Tensor>& outputs, std::vector<Tensor>& values) const {
  if (outputs.size() != s.num_outputs)
    throw std::logic_error(describe() + ": layer '" + s.node->layer->name() + "' gave " + std::to_string(outputs.size()) +
                           " outputs, its node was recorded with " + std::to_string(s.num_outputs));
  for (std::size_t i = 0; i < outputs.size(); ++i) values[s.output + i] = outputs[i];
}

std::size_t Functional::slot_of(const KerasTensor& t) const {
  return slot_.at(t.node().get()) + static_cast<std::size_t>(t.index());
}

std::vector<Tensor> Functional::call_all(const std::vector<Tensor>& inputs, bool training) { return run(inputs, training); }

std::vector<Tensor> Functional::call_outputs(const std::vector<Tensor>& inputs, const layers::CallFlags& flags,
                                             bool training) {
  if (outputs_.size() == 1) return Model::call_outputs(inputs, flags, training);
  refuse_call_flags(flags);
  return run(inputs, training);
}

Tensor Functional::call(const Tensor& inputs, bool training) { return call(std::vector<Tensor>{inputs}, training); }

Tensor Functional::call(const std::vector<Tensor>& inputs, bool training) {
  if (outputs_.size() != 1)
    throw std::invalid_argument(describe() + ": has " + std::to_string(outputs_.size()) +
                                " outputs; use call_all / predict_all");
  return run(inputs, training)[0];
}

void Functional::build(const Shape& input_shape) { Model::build(input_shape); }
void Functional::build(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() == 1) Model::build(input_shapes[0]);
  else Layer::build(input_shapes);
}

Shape Functional::compute_output_shape(const Shape& input_shape) const {
  if (outputs_.size() != 1) throw std::invalid_argument(describe() + ": compute_output_shape with several outputs");
  std::vector<std::int64_t> dims = outputs_[0].shape();
  if (!dims.empty()) dims[0] = input_shape.rank() > 0 ? input_shape[0] : 1;
  return Shape(dims);
}

std::vector<Tensor> Functional::predict_all(const std::vector<Tensor>& xs, const EvaluateOptions& options) {
  if (xs.size() != inputs_.size())
    throw std::invalid_argument(describe() + ": predict expects " + std::to_string(inputs_.size()) + " input(s), got " +
                                std::to_string(xs.size()));
  if (options.batch_size < 1)
    throw std::invalid_argument(describe() + ": predict: batch_size must be >= 1, got " + std::to_string(options.batch_size));
  RecordingPause pause;
  std::vector<std::vector<Tensor>> parts(outputs_.size());
  for (const data::Example& b : data::Dataset::from_tensor_slices(xs).batch(options.batch_size)) {
    std::vector<Tensor> ys = run(b, /*training=*/false);
    for (std::size_t k = 0; k < ys.size(); ++k) parts[k].push_back(ys[k]);
  }
  std::vector<Tensor> out;
  for (auto& p : parts) {
    if (p.empty()) throw std::invalid_argument(describe() + ": predict on 0 examples");
    if (p.size() == 1) {
      out.push_back(p[0]);
      continue;
    }
    Shape shape = p[0].shape();
    shape[0] = xs[0].shape()[0];
    Tensor t = Tensor::empty(shape, p[0].dtype());
    char* dst = static_cast<char*>(t.mutable_raw_data());
    for (const Tensor& o : p) {
      std::memcpy(dst, o.raw_data(), o.nbytes());
      dst += o.nbytes();
    }
    out.push_back(t);
  }
  return out;
}

Tensor Functional::predict(const std::vector<Tensor>& xs, const EvaluateOptions& options) {
  if (outputs_.size() != 1)
    throw std::invalid_argument(describe() + ": has " + std::to_string(outputs_.size()) + " outputs; use predict_all");
  return predict_all(xs, options)[0];
}

std::string Functional::inbound_string(const KerasTensor& t) const {
  return t.node()->layer->name() + "[" + std::to_string(node_index_.at(t.node().get())) + "][" +
         std::to_string(t.index()) + "]";
}

std::vector<std::string> Functional::summary_output_shapes() const {
  std::vector<std::string> out;
  for (const auto& l : layers()) {
    std::vector<std::string> shapes;
    for (const auto& n : nodes_)
      if (n->layer == l) shapes.push_back(n->output_shapes.empty() ? "?" : layers::shapes_string(n->output_shapes));
    bool same = std::all_of(shapes.begin(), shapes.end(), [&](const std::string& s) { return s == shapes[0]; });
    out.push_back(shapes.empty() ? "?" : same ? shapes[0] : "multiple");
  }
  return out;
}

std::vector<std::string> Functional::summary_connections() const {
  std::vector<std::string> out;
  for (const auto& l : layers()) {
    std::string c;
    for (const auto& n : nodes_)
      if (n->layer == l)
        for (const KerasTensor& t : n->inputs) {
          if (!c.empty()) c += '\n';  // appended piecewise: "\n" + s trips GCC 12's -Wrestrict false positive
          c += inbound_string(t);
        }
    out.push_back(c.empty() ? "[]" : c);
  }
  return out;
}

namespace {
using NodeIndex = std::map<const layers::Node*, int>;

// [layer, node index, tensor index] of a tensor of the graph (node_index: Functional::node_index_).
json ref_of(const KerasTensor& t, const NodeIndex& node_index) {
  return json::array({t.node()->layer->name(), node_index.at(t.node().get()), t.index()});
}

// {"class_name": "__keras_tensor__", "config": {"shape", "dtype", "keras_history"}} of a tensor of the graph.
json keras_tensor(const KerasTensor& t, const NodeIndex& node_index) {
  json shape = json::array();
  for (std::int64_t d : t.shape()) shape.push_back(d < 0 ? json(nullptr) : json(d));
  return {{"class_name", "__keras_tensor__"},
          {"config", {{"shape", shape}, {"dtype", dtype_name(t.dtype())}, {"keras_history", ref_of(t, node_index)}}}};
}

// A node in Keras 3's inbound_nodes form {"args": [...], "kwargs": {...}} (see get_config).
json node_config(const Node& n, const NodeIndex& node_index) {
  // Keras 3's Node serialization: the call's positional arguments in "args", its keyword arguments
  // in "kwargs", every tensor as a __keras_tensor__ with its keras_history, flags as plain values.
  const bool mha = dynamic_cast<const layers::MultiHeadAttention*>(n.layer.get()) != nullptr;
  const bool rnn = dynamic_cast<const layers::RNN*>(n.layer.get()) || dynamic_cast<const layers::Bidirectional*>(n.layer.get());
  json args = json::array(), kwargs = json::object();
  const bool trailing = n.flags.mask || n.flags.attention_mask;  // an explicit mask is the last input
  const std::size_t main = n.inputs.size() - (trailing ? 1 : 0);
  if (mha) {  // MultiHeadAttention(query, value[, key])
    for (std::size_t i = 0; i < main; ++i) args.push_back(keras_tensor(n.inputs[i], node_index));
  } else if (rnn && main > 1) {  // RNN(sequences, initial_state=[...])
    args.push_back(keras_tensor(n.inputs[0], node_index));
    json states = json::array();
    for (std::size_t i = 1; i < main; ++i) states.push_back(keras_tensor(n.inputs[i], node_index));
    kwargs["initial_state"] = states;
  } else if (const auto* op = dynamic_cast<const layers::NotEqual*>(n.layer.get()); op && main == 1) {
    args.push_back(keras_tensor(n.inputs[0], node_index));  // not_equal(x1, x2): the constant x2 positional
    const double c = op->x2().value_or(0.0);
    args.push_back(c == std::floor(c) && std::abs(c) < 1e15 ? json(static_cast<std::int64_t>(c)) : json(c));
  } else if (main == 1) {
    args.push_back(keras_tensor(n.inputs[0], node_index));
  } else {  // a layer called on a list (Add, Concatenate, a model of several inputs)
    json list = json::array();
    for (std::size_t i = 0; i < main; ++i) list.push_back(keras_tensor(n.inputs[i], node_index));
    args.push_back(list);
  }
  if (trailing) kwargs[n.flags.mask ? "mask" : "attention_mask"] = keras_tensor(n.inputs.back(), node_index);
  if (n.flags.use_causal_mask) kwargs["use_causal_mask"] = true;
  if (n.flags.return_attention_scores) kwargs["return_attention_scores"] = true;
  if (n.flags.training) kwargs["training"] = *n.flags.training;
  return {{"args", args}, {"kwargs", kwargs}};
}

}  // namespace

Config Functional::get_config() const {
  json layer_configs = json::array();
  for (const auto& l : layers()) {
    json entry = layers::serialize_json(*l);
    entry["name"] = l->name();
    json inbound = json::array();
    for (const auto& n : nodes_)
      if (n->layer == l && !n->inputs.empty()) inbound.push_back(node_config(*n, node_index_));
    entry["inbound_nodes"] = inbound;
    layer_configs.push_back(entry);
  }
  json ins = json::array(), outs = json::array();
  for (const KerasTensor& t : inputs_) ins.push_back(json::array({t.node()->layer->name(), 0, 0}));
  for (const KerasTensor& t : outputs_) outs.push_back(ref_of(t, node_index_));
  return to_config({{"name", name()}, {"trainable", trainable()}, {"layers", layer_configs}, {"input_layers", ins},
                    {"output_layers", outs}});
}

namespace {

// Keras 2's call arguments of an inbound node ({...} in [layer, node, tensor, kwargs]: tf.keras 2
// serializes every argument beside the first as a keyword, tensors as [layer, node, tensor]): the
// tensors, as further inputs in the order the layer's multi-input call takes them
// (MultiHeadAttention: value, key; SimpleRNN / LSTM / GRU / Bidirectional: initial_state...), then
// an explicit mask (recurrent layers) or attention_mask (MultiHeadAttention) tensor last, marked in
// `flags`. `training` (true / false) and MultiHeadAttention's use_causal_mask and
// return_attention_scores go to `flags` too; NotEqual's constant x2 to `x2`. Errors: std::invalid_argument naming the model, the
// layer and the argument for anything else (a mask on another layer, a flag that is not a boolean).
std::vector<json> node_call_tensors(const layers::Layer& layer, const json& refs, const std::string& me,
                                    layers::CallFlags& flags, std::optional<double>& x2) {
  const json none = json::object();
  const json& kwargs = refs[0].is_array() && refs[0].size() > 3 && refs[0][3].is_object() ? refs[0][3] : none;
  const bool mha = dynamic_cast<const layers::MultiHeadAttention*>(&layer) != nullptr;
  const bool rnn = dynamic_cast<const layers::RNN*>(&layer) || dynamic_cast<const layers::Bidirectional*>(&layer);
  const bool op = dynamic_cast<const layers::NotEqual*>(&layer) != nullptr;
  json value, key, trailing;
  std::vector<json> out;
  auto is_ref = [](const json& v) { return v.is_array() && v.size() >= 3 && v[0].is_string(); };
  for (const auto& [k, v] : kwargs.items()) {
    if (k == "training" && (v.is_null() || v.is_boolean())) {
      if (v.is_boolean()) flags.training = v.get<bool>();
      continue;
    }
    if (op && k == "x2" && v.is_number()) {
      x2 = v.get<double>();
      continue;
    }
    if (mha && (k == "value" || k == "key")) {
      (k == "value" ? value : key) = v;
      continue;
    }
    if (mha && (k == "use_causal_mask" || k == "return_attention_scores") && (v.is_boolean() || v.is_null())) {
      (k == "use_causal_mask" ? flags.use_causal_mask : flags.return_attention_scores) = v == true;
      continue;
    }
    if (rnn && k == "initial_state") {
      if (v.is_array() && !v.empty() && v[0].is_array()) {
        for (const json& r : v) out.push_back(r);
      } else if (!v.is_null()) {
        out.push_back(v);
      }
      continue;
    }
    if (k == "mask" && v.is_null()) continue;  // Keras 3 writes it for layers that take a mask
    if ((rnn && k == "mask") || (mha && k == "attention_mask")) {
      if (v.is_null()) continue;
      if (!is_ref(v))
        throw std::invalid_argument(me + ": layer '" + layer.name() + "': call argument '" + k + "': " +
                                    v.dump().substr(0, 120) + " is not a [layer, node, tensor] reference");
      (k == "mask" ? flags.mask : flags.attention_mask) = true;
      trailing = v;
      continue;
    }
    throw std::invalid_argument(me + ": layer '" + layer.name() + "': call argument '" + k + "': " + v.dump().substr(0, 120) +
                                " is not supported by tapeflow's Functional nodes");
  }
  if (mha) {
    if (!key.is_null() && value.is_null())
      throw std::invalid_argument(me + ": layer '" + layer.name() + "': call argument 'key' without 'value'");
    std::vector<json> qvk;
    if (!value.is_null()) qvk.push_back(value);
    if (!key.is_null()) qvk.push_back(key);
    if (!trailing.is_null()) qvk.push_back(trailing);
    return qvk;
  }
  if (!trailing.is_null()) out.push_back(trailing);
  return out;
}

}  // namespace

InboundCall read_inbound_node(const layers::Layer& layer, const json& node, const std::string& me) {
  json refs;
  try {
    refs = keras2_inbound_node(node, layer.class_name());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(me + ": layer '" + layer.name() + "': " + e.what());
  }
  if (!refs.is_array() || refs.empty())
    throw std::invalid_argument(me + ": layer '" + layer.name() + "': bad inbound node " + node.dump().substr(0, 200));
  InboundCall call;
  call.refs.assign(refs.begin(), refs.end());
  for (const json& ref : node_call_tensors(layer, refs, me, call.flags, call.x2)) call.refs.push_back(ref);
  return call;
}

std::shared_ptr<Functional> Functional::from_config(const Config& config_in) {
  const nlohmann::json& config = json_of(config_in);
  if (!config.is_object()) throw std::invalid_argument("Functional: config must be a JSON object");
  const std::string model_name = config.contains("name") && config["name"].is_string() ? config["name"].get<std::string>() : "";
  const std::string me = "Functional '" + model_name + "'";
  if (!config.contains("layers") || !config["layers"].is_array())
    throw std::invalid_argument(me + ": config field 'layers': expected a list");
  struct Pending {
    std::shared_ptr<layers::Layer> layer;
    json nodes;  // inbound_nodes
    std::size_t done = 0;
  };
  std::vector<Pending> pending;
  std::map<std::string, std::size_t> by_name;
  std::map<std::pair<std::string, std::int64_t>, std::vector<KerasTensor>> made;  // (layer, node index) -> outputs
  for (const json& entry : config["layers"]) {
    std::shared_ptr<layers::Layer> layer = layers::deserialize(entry);
    const std::string name = entry.contains("name") && entry["name"].is_string() ? entry["name"].get<std::string>()
                                                                                  : layer->name();
    if (name != layer->name())
      throw std::invalid_argument(me + ": layer entry name '" + name + "' differs from its config name '" +
                                  layer->name() + "'");
    if (by_name.count(name)) throw std::invalid_argument(me + ": two layers are named '" + name + "'");
    json nodes = entry.contains("inbound_nodes") && entry["inbound_nodes"].is_array() ? entry["inbound_nodes"] : json::array();
    if (auto input = std::dynamic_pointer_cast<layers::InputLayer>(layer)) {
      made[{name, 0}] = {layers::InputLayer::output_of(input)};
      nodes = json::array();
    }
    by_name[name] = pending.size();
    pending.push_back({layer, nodes, 0});
  }
  // Keras 2's inbound entry [layer_name, node_index, tensor_index, kwargs] -> the KerasTensor, if made yet.
  auto resolve = [&](const json& ref, const std::string& user, const KerasTensor** out) {
    if (!ref.is_array() || ref.size() < 3 || !ref[0].is_string() || !ref[1].is_number_integer() ||
        !ref[2].is_number_integer())
      throw std::invalid_argument(me + ": layer '" + user + "': bad inbound entry " + ref.dump() +
                                  " (expected [layer_name, node_index, tensor_index, kwargs])");
    const std::string from = ref[0].get<std::string>();
    if (!by_name.count(from))
      throw std::invalid_argument(me + ": layer '" + user + "' is connected to unknown layer '" + from + "'");
    auto it = made.find({from, ref[1].get<std::int64_t>()});
    if (it == made.end()) {
      *out = nullptr;
      return;
    }
    const std::int64_t index = ref[2].get<std::int64_t>();
    if (index < 0 || index >= static_cast<std::int64_t>(it->second.size()))
      throw std::invalid_argument(me + ": layer '" + user + "': tensor_index " + ref[2].dump() + " of layer '" + from +
                                  "' node " + ref[1].dump() + ", which has " + std::to_string(it->second.size()) +
                                  " output(s)");
    *out = &it->second[static_cast<std::size_t>(index)];
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (Pending& p : pending) {
      while (p.done < p.nodes.size()) {
        const InboundCall call = read_inbound_node(*p.layer, p.nodes[p.done], me);
        std::vector<KerasTensor> in;
        for (const json& ref : call.refs) {
          const KerasTensor* t = nullptr;
          resolve(ref, p.layer->name(), &t);
          if (!t) break;
          in.push_back(*t);
        }
        if (in.size() != call.refs.size()) break;
        if (call.x2) std::dynamic_pointer_cast<layers::NotEqual>(p.layer)->set_x2(*call.x2);  // NotEqual's only
        made[{p.layer->name(), static_cast<std::int64_t>(p.done)}] = p.layer->call_all(in, call.flags);
        ++p.done;
        progress = true;
      }
    }
  }
  for (const Pending& p : pending)
    if (p.done < p.nodes.size())
      throw std::invalid_argument(me + ": layer '" + p.layer->name() + "' node " + std::to_string(p.done) +
                                  " depends on layer outputs that no node produces (a cycle or a missing layer): " +
                                  p.nodes[p.done].dump().substr(0, 200));
  auto endpoints = [&](const char* key) {
    if (!config.contains(key) || !config[key].is_array())
      throw std::invalid_argument(me + ": config field '" + key + "': expected a list of [layer_name, node, tensor]");
    json list = config[key];
    if (!list.empty() && list[0].is_string()) list = json::array({list});  // a single [name, node, tensor]
    std::vector<KerasTensor> out;
    for (const json& ref : list) {
      const KerasTensor* t = nullptr;
      resolve(ref, key, &t);
      if (!t) throw std::invalid_argument(me + ": config field '" + key + "': no node " + ref.dump());
      out.push_back(*t);
    }
    return out;
  };
  auto model = std::make_shared<Functional>(endpoints("input_layers"), endpoints("output_layers"), model_name);
  if (config.contains("trainable") && config["trainable"].is_boolean() && !config["trainable"].get<bool>())
    model->set_trainable(false);
  return model;
}

}  // namespace tapeflow::models
