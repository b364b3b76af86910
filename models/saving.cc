#include "models/saving.h"

#include "models/model.h"

#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace tapeflow::models {
namespace {

std::string join(const std::string& group, const std::string& name) { return group.empty() ? name : group + "/" + name; }

std::string shape_string(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// The layers saved: tracked sublayers, or the layer itself when it has none.
std::vector<const layers::Layer*> saved_layers(const layers::Layer& model) {
  std::vector<const layers::Layer*> out;
  for (const auto& l : model.layers()) out.push_back(l.get());
  if (out.empty()) out.push_back(&model);
  return out;
}

[[noreturn]] void fail(const io::H5Reader& r, const std::string& what) {
  throw std::runtime_error(r.path() + ": " + what);
}

}  // namespace

Tensor tensor_from_array(io::ArrayData array) {
  if (array.shape.size() > 8) throw std::runtime_error("rank " + std::to_string(array.shape.size()) + " exceeds 8");
  Tensor t = Tensor::empty(Shape(array.shape), array.dtype);
  if (t.nbytes() != array.bytes.size()) throw std::runtime_error("dataset byte count does not match its shape");
  if (!array.bytes.empty()) std::memcpy(t.mutable_raw_data(), array.bytes.data(), array.bytes.size());
  return t;
}

void write_tensor(io::H5Writer& writer, const std::string& path, const Tensor& t) {
  writer.write_dataset(path, t.dtype(), std::vector<std::int64_t>(t.shape().begin(), t.shape().end()), t.raw_data());
}

void write_keras_weights(io::H5Writer& writer, const std::string& group, const layers::Layer& model) {
  std::vector<std::string> names;
  if (!group.empty()) writer.create_group(group);
  for (const layers::Layer* layer : saved_layers(model)) {
    names.push_back(layer->name());
    const std::string g = join(group, layer->name());
    writer.create_group(g);
    std::vector<std::string> weight_names;
    for (const Variable& v : layer->variables()) {
      weight_names.push_back(v.name());
      write_tensor(writer, join(g, v.name()), v.value());
    }
    writer.write_attribute(g, "weight_names", weight_names);
  }
  writer.write_attribute(group, "layer_names", names);
  writer.write_attribute(group, "backend", std::string("tensorflow"));
  writer.write_attribute(group, "keras_version", std::string("2.15.0"));
}

void read_keras_weights(const io::H5Reader& reader, const std::string& group, layers::Layer& model) {
  const std::string where = group.empty() ? "root" : "group '" + group + "'";
  if (!group.empty() && !reader.is_group(group)) fail(reader, "missing group '" + group + "'");
  if (!reader.has_attribute(group, "layer_names")) fail(reader, where + " has no 'layer_names' attribute");
  // The file's weighted layers, in order, with their weight names.
  struct FileLayer {
    std::string name;
    std::vector<std::string> weights;
  };
  std::vector<FileLayer> file_layers;
  for (const std::string& name : reader.read_string_array_attribute(group, "layer_names")) {
    const std::string g = join(group, name);
    if (!reader.is_group(g)) fail(reader, "layer_names lists '" + name + "' but there is no group '" + g + "'");
    if (!reader.has_attribute(g, "weight_names")) fail(reader, "group '" + g + "' has no 'weight_names' attribute");
    auto weights = reader.read_string_array_attribute(g, "weight_names");
    if (!weights.empty()) file_layers.push_back({name, std::move(weights)});
  }
  std::vector<const layers::Layer*> model_layers;
  for (const layers::Layer* l : saved_layers(model))
    if (!l->variables().empty()) model_layers.push_back(l);
  if (model_layers.size() != file_layers.size())
    fail(reader, "file has " + std::to_string(file_layers.size()) + " layers with weights, the model has " +
                     std::to_string(model_layers.size()) + (model_layers.empty() ? " (build the model first)" : ""));
  // Check everything first, then assign: a failed load changes nothing.
  std::vector<std::pair<Variable, io::ArrayData>> plan;
  for (std::size_t i = 0; i < model_layers.size(); ++i) {
    const layers::Layer& layer = *model_layers[i];
    const FileLayer* match = &file_layers[i];
    for (const FileLayer& f : file_layers)
      if (f.name == layer.name()) match = &f;
    std::vector<Variable> vars = layer.variables();
    if (vars.size() != match->weights.size())
      fail(reader, "layer '" + layer.name() + "': file layer '" + match->name + "' has " +
                       std::to_string(match->weights.size()) + " weights, the model layer has " +
                       std::to_string(vars.size()));
    for (std::size_t k = 0; k < vars.size(); ++k) {
      const std::string path = join(join(group, match->name), match->weights[k]);
      if (!reader.is_dataset(path)) fail(reader, "layer '" + layer.name() + "': missing dataset '" + path + "'");
      const std::vector<std::int64_t> shape = reader.dataset_shape(path);
      const std::vector<std::int64_t> want(vars[k].shape().begin(), vars[k].shape().end());
      const std::string what = "layer '" + layer.name() + "' weight '" + vars[k].name() + "': ";
      if (shape != want)
        fail(reader, what + "shape in file " + shape_string(shape) + ", model expects " + shape_string(want));
      const DType dtype = reader.dataset_dtype(path);
      if (dtype != vars[k].dtype())
        fail(reader, what + "dtype in file " + dtype_name(dtype) + ", model expects " + dtype_name(vars[k].dtype()));
      io::ArrayData data = reader.read_dataset(path);
      if (data.bytes.size() != vars[k].value().nbytes()) fail(reader, what + "byte count does not match the shape");
      plan.emplace_back(vars[k], std::move(data));
    }
  }
  // Straight into the variables' storage (copy-on-write if a tape still holds the old value).
  for (auto& [var, data] : plan)
    if (!data.bytes.empty()) std::memcpy(var.mutable_raw_data_for_update(), data.bytes.data(), data.bytes.size());
}

void save_weights(const layers::Layer& model, const std::string& path) {
  io::H5Writer writer(path);
  write_keras_weights(writer, "", model);
  writer.commit();
}

void load_weights(layers::Layer& model, const std::string& path) {
  io::H5Reader reader(path);
  read_keras_weights(reader, "", model);
}

void Model::save_weights(const std::string& path) const { models::save_weights(*this, path); }
void Model::load_weights(const std::string& path) { models::load_weights(*this, path); }

}  // namespace tapeflow::models
