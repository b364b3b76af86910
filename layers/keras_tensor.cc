#include "layers/keras_tensor.h"

#include <atomic>

#include "layers/layer.h"

namespace tapeflow::layers {

std::uint64_t next_node_serial() {
  static std::atomic<std::uint64_t> counter{1};
  return counter.fetch_add(1);
}

std::string KerasTensor::shape_string() const {
  std::string s = "(";
  for (std::size_t i = 0; i < shape_.size(); ++i)
    s += (i ? ", " : "") + (shape_[i] < 0 ? std::string("None") : std::to_string(shape_[i]));
  return s + (shape_.size() == 1 ? ",)" : ")");
}

std::string KerasTensor::describe() const {
  if (!node_) return "an undefined KerasTensor";
  return "KerasTensor " + shape_string() + " " + dtype_name(dtype_) + " from " + node_->layer->class_name() + " '" +
         node_->layer->name() + "'";
}

}  // namespace tapeflow::layers
