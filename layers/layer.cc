#include "layers/layer.h"

#include <atomic>
#include <cctype>
#include <map>
#include <mutex>
#include <stdexcept>

#include "tape/ops/math_ops.h"

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

Tensor Layer::operator()(const Tensor& inputs, bool training) {
  Tensor x = inputs;
  if (autocast_ && is_floating(x.dtype()) && x.dtype() != dtype_) x = cast(x, dtype_);
  if (!built_) {
    build(x.shape());
    built_ = true;
  }
  call_losses_.clear();
  return call(x, training);
}

void Layer::build(const Shape&) { built_ = true; }

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
  Tensor value = init(shape, dt, generator_);
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
