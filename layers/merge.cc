#include "layers/merge.h"

#include <stdexcept>

#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"

namespace tapeflow::layers {

Merge::Merge(const char* class_name, const MergeOptions& options) : Layer(class_name, options.name, std::nullopt, options.dtype) {}

Tensor Merge::call(const Tensor&, bool) {
  throw std::invalid_argument(describe() + ": expects a list of at least 2 inputs, got a single tensor");
}

std::string Merge::shapes_string(const std::vector<Tensor>& inputs) const {
  std::string s;
  for (const Tensor& t : inputs) s += (s.empty() ? "" : ", ") + t.shape().to_string();
  return s;
}

void Merge::check_shapes(const std::vector<Tensor>& inputs) const {
  for (const Tensor& t : inputs)
    if (t.shape() != inputs[0].shape())
      throw std::invalid_argument(describe() + ": inputs must have the same shape, got " + shapes_string(inputs));
}

Tensor Merge::call(const std::vector<Tensor>& inputs, bool) {
  if (inputs.size() < 2)
    throw std::invalid_argument(describe() + ": expects at least 2 inputs, got " + std::to_string(inputs.size()));
  check_shapes(inputs);
  return merge(inputs);
}

Config Merge::get_config() const { return base_config(); }

namespace {
MergeOptions merge_options(const Config& config, const char* cls) {
  ConfigReader r(config, cls);
  return {.name = r.name(), .dtype = r.dtype()};
}
}  // namespace

Tensor Add::merge(const std::vector<Tensor>& inputs) const {
  Tensor y = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) y = y + inputs[i];
  return y;
}
std::shared_ptr<Add> Add::from_config(const Config& c) {
  return ConfigReader(c, "Add").finish(std::make_shared<Add>(merge_options(c, "Add")));
}

Tensor Multiply::merge(const std::vector<Tensor>& inputs) const {
  Tensor y = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) y = y * inputs[i];
  return y;
}
std::shared_ptr<Multiply> Multiply::from_config(const Config& c) {
  return ConfigReader(c, "Multiply").finish(std::make_shared<Multiply>(merge_options(c, "Multiply")));
}

Tensor Average::merge(const std::vector<Tensor>& inputs) const {
  Tensor y = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) y = y + inputs[i];
  return y * (1.0 / static_cast<double>(inputs.size()));
}
std::shared_ptr<Average> Average::from_config(const Config& c) {
  return ConfigReader(c, "Average").finish(std::make_shared<Average>(merge_options(c, "Average")));
}

Concatenate::Concatenate(ConcatenateOptions options)
    : Merge("Concatenate", MergeOptions{.name = options.name, .dtype = options.dtype}), axis_(options.axis) {}

void Concatenate::check_shapes(const std::vector<Tensor>& inputs) const {
  const int rank = inputs[0].rank();
  if (axis_ >= rank || axis_ < -rank)
    throw std::invalid_argument(describe() + ": axis " + std::to_string(axis_) + " is out of range for inputs " +
                                shapes_string(inputs));
  const int axis = axis_ < 0 ? axis_ + rank : axis_;
  for (const Tensor& t : inputs) {
    bool ok = t.rank() == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == axis || t.shape()[d] == inputs[0].shape()[d];
    if (!ok)
      throw std::invalid_argument(describe() + ": inputs must match except on axis " + std::to_string(axis_) +
                                  ", got " + shapes_string(inputs));
  }
}

Tensor Concatenate::merge(const std::vector<Tensor>& inputs) const { return concat(inputs, axis_); }

Config Concatenate::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["axis"] = axis_;
  return config;
}

std::shared_ptr<Concatenate> Concatenate::from_config(const Config& c) {
  ConfigReader r(c, "Concatenate");
  return r.finish(std::make_shared<Concatenate>(
      ConcatenateOptions{.axis = int(r.integer("axis", -1)), .name = r.name(), .dtype = r.dtype()}));
}

}  // namespace tapeflow::layers
