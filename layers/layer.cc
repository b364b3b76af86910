#include "layers/layer.h"

#include <atomic>
#include <cctype>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "layers/keras_tensor.h"
#include "tape/ops/math_ops.h"
#include "tape/runtime/recorder.h"

namespace tapeflow::layers {

std::string to_snake_case(const std::string& s) {
  // re.sub("(.)([A-Z][a-z]+)", r"\1_\2", s) then re.sub("([a-z])([A-Z])", r"\1_\2", s), lower().
  std::string a;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && std::isupper(static_cast<unsigned char>(s[i])) && i + 1 < s.size() &&
        std::islower(static_cast<unsigned char>(s[i + 1])) && a.back() != '_')
      a += '_';
    a += s[i];
  }
  std::string b;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (i > 0 && std::isupper(static_cast<unsigned char>(a[i])) && std::islower(static_cast<unsigned char>(a[i - 1])))
      b += '_';
    b += static_cast<char>(std::tolower(static_cast<unsigned char>(a[i])));
  }
  return b;
}

std::string unique_layer_name(const std::string& base) {
  static std::mutex mu;
  static std::map<std::string, int> counts;
  std::lock_guard<std::mutex> lock(mu);
  int n = counts[base]++;
  return n == 0 ? base : base + "_" + std::to_string(n);
}

std::uint64_t next_default_seed() {
  static std::atomic<std::uint64_t> counter{0};
  return 0x7A9EF10Aull * 1000003ull + counter.fetch_add(1);
}

Layer::Layer(std::string class_name, std::string name, std::optional<std::uint64_t> seed, std::optional<DType> dtype)
    : class_name_(std::move(class_name)),
      name_(name.empty() ? unique_layer_name(to_snake_case(class_name_)) : std::move(name)),
      dtype_(dtype.value_or(DType::kFloat32)),
      dtype_set_(dtype.has_value()),
      generator_(seed ? *seed : next_default_seed()) {
  if (!is_floating(dtype_))
    throw std::invalid_argument(class_name_ + " '" + name_ + "': dtype must be float32 or float64, got " +
                                dtype_name(dtype_));
}

Layer::~Layer() = default;

std::string Layer::describe() const { return class_name() + " '" + name_ + "'"; }

Tensor Layer::operator()(const Tensor& inputs, bool training) { return call(begin_call(inputs), training); }

Tensor Layer::begin_call(const Tensor& inputs) {
  Tensor x = inputs;
  if (autocast_ && is_floating(x.dtype()) && x.dtype() != dtype_) x = cast(x, dtype_);
  if (!built_) {
    build(x.shape());
    built_ = true;
  }
  call_losses_.clear();
  return x;
}

void Layer::build(const Shape&) { built_ = true; }

void Layer::build(const std::vector<Shape>& shapes) {
  if (shapes.size() == 1) build(shapes[0]);
  built_ = true;
}

Tensor Layer::operator()(const std::vector<Tensor>& inputs, bool training) { return call(begin_call(inputs), training); }

std::vector<Tensor> Layer::begin_call(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> xs = inputs;
  std::vector<Shape> shapes;
  for (Tensor& x : xs) {
    if (!x.defined()) throw std::invalid_argument(describe() + ": called on an undefined tensor");
    if (is_floating(x.dtype()) && x.dtype() != dtype_) x = cast(x, dtype_);
    shapes.push_back(x.shape());
  }
  if (!built_) {
    build(shapes);
    built_ = true;
  }
  call_losses_.clear();
  return xs;
}

void Layer::refuse_call_flags(const CallFlags& flags) const {
  if (flags.use_causal_mask) throw std::invalid_argument(describe() + ": does not take the call argument use_causal_mask");
  if (flags.return_attention_scores)
    throw std::invalid_argument(describe() + ": does not take the call argument return_attention_scores");
  if (flags.mask) throw std::invalid_argument(describe() + ": does not take the call argument mask");
  if (flags.attention_mask) throw std::invalid_argument(describe() + ": does not take the call argument attention_mask");
}

std::vector<Tensor> Layer::call_outputs(const std::vector<Tensor>& inputs, const CallFlags& flags, bool training) {
  refuse_call_flags(flags);
  if (inputs.empty()) throw std::invalid_argument(describe() + ": no inputs");
  return {inputs.size() == 1 ? (*this)(inputs[0], training) : (*this)(inputs, training)};
}

Tensor Layer::call(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.size() != 1)
    throw std::invalid_argument(describe() + ": expects one input, got " + std::to_string(inputs.size()));
  return call(inputs[0], training);
}

KerasTensor Layer::operator()(const KerasTensor& input) { return (*this)(std::vector<KerasTensor>{input}); }

KerasTensor Layer::operator()(const std::vector<KerasTensor>& inputs) {
  std::vector<KerasTensor> out = call_all(inputs);
  if (out.size() != 1)
    throw std::invalid_argument(describe() + ": has " + std::to_string(out.size()) +
                                " outputs here (return_state / return_attention_scores / a model's outputs): call it "
                                "with call_all to get them all");
  return out[0];
}

std::vector<KerasTensor> Layer::call_all(const std::vector<KerasTensor>& inputs, const CallFlags& flags) {
  std::shared_ptr<Layer> self = weak_from_this().lock();
  if (!self)
    throw std::logic_error(describe() + ": a layer called on KerasTensors must be held by a std::shared_ptr "
                                        "(std::make_shared)");
  if (inputs.empty()) throw std::invalid_argument(describe() + ": called on an empty list of KerasTensors");
  std::vector<Tensor> examples;  // one zero example per input: the output shapes come from a real call
  std::string from;
  for (const KerasTensor& kt : inputs) {
    if (!kt.defined()) throw std::invalid_argument(describe() + ": called on an undefined KerasTensor");
    std::vector<std::int64_t> dims = kt.shape();
    if (!dims.empty()) dims[0] = 1;
    examples.push_back(zeros(Shape(dims), kt.dtype()));
    from += (from.empty() ? "" : ", ") + kt.describe();
  }
  std::vector<Tensor> outs;
  try {
    RecordingPause pause;
    outs = call_outputs(examples, flags, /*training=*/false);
  } catch (const std::exception& e) {
    throw std::invalid_argument(describe() + ": cannot be called on " + from + ": " + e.what());
  }
  auto node = std::make_shared<Node>(Node{self, inputs, next_node_serial(), flags, {}, {}});
  for (const Tensor& o : outs) {
    std::vector<std::int64_t> shape(o.shape().begin(), o.shape().end());
    if (!shape.empty()) shape[0] = -1;
    node->output_shapes.push_back(shape);
    node->output_dtypes.push_back(o.dtype());
  }
  std::vector<KerasTensor> result;
  for (std::size_t i = 0; i < outs.size(); ++i)
    result.emplace_back(node->output_shapes[i], node->output_dtypes[i], node, static_cast<int>(i));
  return result;
}

Config Layer::base_config() const {
  return Config().set("name", name_).set("trainable", trainable_).set("dtype", dtype_name(dtype_));
}

Config Layer::get_config() const {
  throw std::logic_error(describe() + ": get_config() is not implemented for class '" + class_name() +
                         "'; to save its architecture implement get_config() (and register the class with "
                         "layers::register_layer_class), or save only its weights with save_weights");
}

void Layer::set_dtype(DType dtype) {
  if (!is_floating(dtype))
    throw std::invalid_argument(describe() + ": dtype must be float32 or float64, got " + dtype_name(dtype));
  if (built_ && dtype != dtype_)
    throw std::logic_error(describe() + ": cannot change the dtype of a built layer from " + dtype_name(dtype_) +
                           " to " + dtype_name(dtype));
  dtype_ = dtype;
  dtype_set_ = true;
  for (auto& l : layers_)
    if (l) pass_dtype_to(*l);
}

void Layer::pass_dtype_to(Layer& child) const {
  if (dtype_set_ && !child.dtype_set_ && !child.built_) child.set_dtype(dtype_);
}

Shape Layer::compute_output_shape(const Shape& input_shape) const { return input_shape; }

void Layer::set_trainable(bool trainable) {
  trainable_ = trainable;
  for (std::size_t i = 0; i < weights_.size(); ++i)
    if (weight_trainable_[i]) weights_[i].set_trainable(trainable);
  for (auto& l : layers_) l->set_trainable(trainable);
}

std::vector<Variable> Layer::variables() const {
  std::vector<Variable> out = weights_;
  for (const auto& l : layers_) {
    auto sub = l->variables();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<Variable> Layer::trainable_variables() const {
  std::vector<Variable> out;
  if (!trainable_) return out;
  for (std::size_t i = 0; i < weights_.size(); ++i)
    if (weight_trainable_[i]) out.push_back(weights_[i]);
  for (const auto& l : layers_) {
    auto sub = l->trainable_variables();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<Variable> Layer::non_trainable_variables() const {
  std::vector<Variable> out;
  for (std::size_t i = 0; i < weights_.size(); ++i)
    if (!trainable_ || !weight_trainable_[i]) out.push_back(weights_[i]);
  for (const auto& l : layers_) {
    auto sub = l->non_trainable_variables();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<Tensor> Layer::losses() const {
  std::vector<Tensor> out = call_losses_;
  auto reg = regularization_losses();
  out.insert(out.end(), reg.begin(), reg.end());
  for (const auto& l : layers_) {
    auto sub = l->losses();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<Tensor> Layer::get_weights() const {
  std::vector<Tensor> out;
  for (const auto& v : variables()) out.push_back(v.value());
  return out;
}

void Layer::set_weights(const std::vector<Tensor>& values) {
  auto vars = variables();
  if (values.size() != vars.size())
    throw std::invalid_argument(describe() + ": set_weights got " + std::to_string(values.size()) + " values for " +
                                std::to_string(vars.size()) + " weights");
  for (std::size_t i = 0; i < vars.size(); ++i)
    if (values[i].shape() != vars[i].shape() || values[i].dtype() != vars[i].dtype())
      throw std::invalid_argument(describe() + ": set_weights: weight '" + vars[i].name() + "' has shape " +
                                  vars[i].shape().to_string() + " " + dtype_name(vars[i].dtype()) + ", got " +
                                  values[i].shape().to_string() + " " + dtype_name(values[i].dtype()));
  for (std::size_t i = 0; i < vars.size(); ++i) vars[i].assign(values[i]);
}

std::int64_t Layer::count_params() const {
  if (!built_)
    throw std::logic_error(describe() + ": count_params() before the layer is built (call it on an input first)");
  std::int64_t n = 0;
  for (const auto& v : variables()) n += v.shape().num_elements();
  return n;
}

Variable Layer::add_weight(const std::string& name, const Shape& shape, const Initializer& init, bool trainable,
                           std::optional<DType> dtype) {
  DType dt = dtype.value_or(dtype_);
  Tensor value;
  try {
    value = init(shape, dt, generator_);
  } catch (const std::bad_alloc&) {  // a config's units: 8589934592: an error naming the layer (readers add the file)
    throw std::invalid_argument(describe() + ": weight '" + name + "' of " + shape.to_string() + " " + dtype_name(dt) +
                                " (" + std::to_string(shape.num_elements()) + " elements) does not fit in memory");
  }
  if (value.shape() != shape || value.dtype() != dt)
    throw std::logic_error(describe() + ": initializer '" + init.name() + "' returned " + value.shape().to_string() +
                           " " + dtype_name(value.dtype()) + " for weight '" + name + "' of " + shape.to_string() +
                           " " + dtype_name(dt));
  Variable v(value, {.name = name_ + "/" + name + ":0", .trainable = trainable && trainable_});
  weights_.push_back(v);
  weight_trainable_.push_back(trainable);
  return v;
}

void Layer::add_loss(const Tensor& loss) { call_losses_.push_back(loss); }

}  // namespace tapeflow::layers
