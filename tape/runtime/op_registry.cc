#include "tape/runtime/op_registry.h"

#include <stdexcept>

namespace tapeflow {

const OpDef& OpRegistry::add(OpDef def) {
  if (!def.forward) throw std::invalid_argument("OpRegistry::add: op '" + def.name + "' has no forward function");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& op : ops_)
    if (op.name == def.name) throw std::invalid_argument("OpRegistry::add: op '" + def.name + "' is already registered");
  ops_.push_back(std::move(def));
  return ops_.back();
}

const OpDef* OpRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& op : ops_)
    if (op.name == name) return &op;
  return nullptr;
}

const OpDef& OpRegistry::get(const std::string& name) const {
  if (const OpDef* op = find(name)) return *op;
  throw std::invalid_argument("OpRegistry: unknown op '" + name + "'");
}

void OpRegistry::set_gradient(const std::string& name, GradientFn gradient) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& op : ops_)
    if (op.name == name) {
      op.gradient = std::move(gradient);
      return;
    }
  throw std::invalid_argument("OpRegistry::set_gradient: unknown op '" + name + "'");
}

std::vector<std::string> OpRegistry::names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& op : ops_) out.push_back(op.name);
  return out;
}

const OpDef& register_op(OpDef def) { return OpRegistry::global().add(std::move(def)); }

// ---- GradContext ----
const Tensor& GradContext::input(int i) const {
  if (static_cast<std::size_t>(i) >= inputs_.size())
    throw std::logic_error(std::string(op_name_) + " gradient: input " + std::to_string(i) +
                           " was not saved by the forward pass (check the op's SaveFlags)");
  return inputs_[static_cast<std::size_t>(i)];
}

const Shape& GradContext::output_shape(int i) const {
  if (static_cast<std::size_t>(i) >= output_shapes_.size())
    throw std::logic_error(std::string(op_name_) + " gradient: output shape " + std::to_string(i) +
                           " was not provided to the GradContext");
  return output_shapes_[static_cast<std::size_t>(i)];
}

const Tensor& GradContext::output(int i) const {
  if (static_cast<std::size_t>(i) >= outputs_.size())
    throw std::logic_error(std::string(op_name_) + " gradient: output " + std::to_string(i) +
                           " was not saved by the forward pass (check the op's SaveFlags)");
  return outputs_[static_cast<std::size_t>(i)];
}

}  // namespace tapeflow
