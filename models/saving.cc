#include "models/saving.h"

#include "models/model.h"

#include <cstdint>
#include <memory>
#include <optional>
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

Tensor read_tensor(const io::H5Reader& reader, const std::string& path) {
  const io::H5Dataset dataset = reader.open_dataset(path);
  if (dataset.shape().size() > 8)
    fail(reader, "dataset '" + path + "' has rank " + std::to_string(dataset.shape().size()) + " (at most 8)");
  Tensor t = Tensor::empty(Shape(dataset.shape()), dataset.dtype());
  dataset.read_into(t.mutable_raw_data(), t.nbytes());
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

void plan_keras_weights(const io::H5Reader& reader, const std::string& group, layers::Layer& model,
                        WeightPlan& plan) {
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
  // Each dataset is read straight into a fresh tensor (no intermediate buffer), checksum verified.
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
      const std::optional<io::H5Dataset> found = reader.find_dataset(path);
      if (!found) fail(reader, "layer '" + layer.name() + "': missing dataset '" + path + "'");
      const io::H5Dataset& dataset = *found;
      const std::vector<std::int64_t> want(vars[k].shape().begin(), vars[k].shape().end());
      const std::string what = "layer '" + layer.name() + "' weight '" + vars[k].name() + "': ";
      if (dataset.shape() != want)
        fail(reader, what + "shape in file " + shape_string(dataset.shape()) + ", model expects " + shape_string(want));
      if (dataset.dtype() != vars[k].dtype())
        fail(reader, what + "dtype in file " + dtype_name(dataset.dtype()) + ", model expects " +
                         dtype_name(vars[k].dtype()));
      Tensor value = Tensor::empty(vars[k].shape(), vars[k].dtype());
      dataset.read_into(value.mutable_raw_data(), value.nbytes());
      plan.emplace_back(vars[k], std::move(value));
    }
  }
}

void assign_weights(const WeightPlan& plan) {
  // Every pair is checked before any variable changes; then the variables take the plan's tensors
  // over (read for this load alone: sharing them avoids a copy of every weight).
  for (const auto& [var, value] : plan)
    if (value.shape() != var.shape() || value.dtype() != var.dtype())
      throw std::invalid_argument("assign_weights: variable '" + var.name() + "' has shape " + var.shape().to_string() +
                                  " dtype " + dtype_name(var.dtype()) + ", got shape " + value.shape().to_string() +
                                  " dtype " + dtype_name(value.dtype()));
  for (const auto& [var, value] : plan) var.assign_shared(value);
}

void read_keras_weights(const io::H5Reader& reader, const std::string& group, layers::Layer& model) {
  WeightPlan plan;
  plan_keras_weights(reader, group, model, plan);
  assign_weights(plan);
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
