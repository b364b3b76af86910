#include "layers/keras_tensor.h"

#include <atomic>

#include "layers/layer.h"

namespace tapeflow::layers {

std::uint64_t next_node_serial() {
  static std::atomic<std::uint64_t> counter{1};
  return counter.fetch_add(1);
}

namespace {
std::string one_shape(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + (shape[i] < 0 ? std::string("None") : std::to_string(shape[i]));
  return s + (shape.size() == 1 ? ",)" : ")");
}
}  // namespace

std::string KerasTensor::shape_string() const { return one_shape(shape_); }

std::string shapes_string(const std::vector<std::vector<std::int64_t>>& shapes) {
  if (shapes.size() == 1) return one_shape(shapes[0]);
  std::string s = "[";
  for (std::size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + one_shape(shapes[i]);
  return s + "]";
}

std::string KerasTensor::describe() const {
  if (!node_) return "an undefined KerasTensor";
  return "KerasTensor " + shape_string() + " " + dtype_name(dtype_) + " from " + node_->layer->class_name() + " '" +
         node_->layer->name() + "'" +
         (node_->output_shapes.size() > 1 ? ", output " + std::to_string(index_) : "");
}

}  // namespace tapeflow::layers
