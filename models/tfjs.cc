#include "models/tfjs.h"
#include "models/internal/config_json.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "tape/core/internal/config_json.h"
#include "models/io/atomic_file.h"
#include "models/saving.h"

namespace tapeflow::models {
using nlohmann::json;

namespace {
namespace fs = std::filesystem;

std::string weight_name(const Variable& v) {
  const std::string& n = v.name();
  return n.size() > 2 && n.compare(n.size() - 2, 2, ":0") == 0 ? n.substr(0, n.size() - 2) : n;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw std::runtime_error(path.string() + ": read error");
  return s.str();
}

}  // namespace

void export_tfjs(const Model& model, const std::string& directory) {
  json topology = model_to_config_json(model);  // first: a model without a config writes nothing
  topology["keras_version"] = kKerasVersion;
  topology["backend"] = "tensorflow";
  json specs = json::array();
  std::string bytes;
  for (const Variable& v : model.variables()) {
    if (v.dtype() != DType::kFloat32)
      throw std::invalid_argument("export_tfjs: weight '" + v.name() + "' is " + dtype_name(v.dtype()) +
                                  "; TensorFlow.js models hold float32 weights");
    specs.push_back({{"name", weight_name(v)},
                     {"shape", std::vector<std::int64_t>(v.shape().begin(), v.shape().end())},
                     {"dtype", "float32"}});
    const Tensor value = v.value();
    bytes.append(static_cast<const char*>(value.raw_data()), value.nbytes());
  }
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) throw std::runtime_error(directory + ": cannot create directory (" + ec.message() + ")");
  const std::size_t shards = std::max<std::size_t>(1, (bytes.size() + kTfjsShardBytes - 1) / kTfjsShardBytes);
  json paths = json::array();
  for (std::size_t i = 0; i < shards; ++i) {
    const std::string file = "group1-shard" + std::to_string(i + 1) + "of" + std::to_string(shards) + ".bin";
    paths.push_back(file);
    const std::size_t begin = i * kTfjsShardBytes;
    io::atomic_write_file((fs::path(directory) / file).string(),
                          bytes.substr(begin, std::min(kTfjsShardBytes, bytes.size() - begin)));
  }
  json model_json = {{"format", "layers-model"},
                     {"generatedBy", "tapeflow 0.1.0"},
                     {"convertedBy", nullptr},
                     {"modelTopology", topology},
                     {"weightsManifest", json::array({{{"paths", paths}, {"weights", specs}}})}};
  io::atomic_write_file((fs::path(directory) / "model.json").string(), model_json.dump());
}

std::shared_ptr<Model> load_tfjs(const std::string& path) {
  fs::path file = fs::is_directory(path) ? fs::path(path) / "model.json" : fs::path(path);
  const fs::path dir = file.parent_path();
  const std::string where = file.string();
  json j;
  try {
    j = json::parse(read_file(file));
  } catch (const json::parse_error& e) {
    throw std::runtime_error(where + ": invalid JSON: " + e.what());
  }
  try {  // before anything copies or dumps it (both recurse)
    check_config_depth(j, where);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  if (!j.is_object() || !j.contains("modelTopology") || !j["modelTopology"].is_object())
    throw std::runtime_error(where + ": no 'modelTopology' object (not a TensorFlow.js layers model)");
  if (j.contains("format") && j["format"] != "layers-model")
    throw std::runtime_error(where + ": format " + j["format"].dump() + " is not \"layers-model\" (graph models hold "
                             "no Keras config)");
  json topology = j["modelTopology"];
  if (topology.contains("model_config")) topology = topology["model_config"];  // the converter's form
  std::shared_ptr<Model> model;
  try {
    model = model_from_config(topology);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(where + ": modelTopology: " + e.what());
  }
  // Every weight of the manifest by name, read from the concatenated shards of its group.
  std::map<std::string, Tensor> weights;
  if (!j.contains("weightsManifest") || !j["weightsManifest"].is_array())
    throw std::runtime_error(where + ": no 'weightsManifest' list");
  for (const json& group : j["weightsManifest"]) {
    if (!group.is_object() || !group.contains("paths") || !group.contains("weights") || !group["paths"].is_array() ||
        !group["weights"].is_array())
      throw std::runtime_error(where + ": a weightsManifest entry needs 'paths' and 'weights' lists");
    std::string bytes;
    for (const json& p : group["paths"]) {
      if (!p.is_string()) throw std::runtime_error(where + ": weightsManifest path " + p.dump() + " is not a string");
      const std::string rel = p.get<std::string>();
      if (rel.find("..") != std::string::npos || (!rel.empty() && rel[0] == '/'))
        throw std::runtime_error(where + ": weightsManifest path '" + rel + "' leaves the model directory");
      bytes += read_file(dir / rel);
    }
    std::size_t offset = 0;
    for (const json& spec : group["weights"]) {
      if (!spec.is_object() || !spec.contains("name") || !spec["name"].is_string() || !spec.contains("shape") ||
          !spec["shape"].is_array())
        throw std::runtime_error(where + ": bad weight spec " + spec.dump().substr(0, 200));
      const std::string name = spec["name"].get<std::string>();
      const std::string dtype = spec.contains("dtype") && spec["dtype"].is_string() ? spec["dtype"].get<std::string>() : "";
      if (dtype != "float32")
        throw std::runtime_error(where + ": weight '" + name + "' has dtype '" + dtype + "' (only float32 is supported)");
      if (spec.contains("quantization"))
        throw std::runtime_error(where + ": weight '" + name + "' is quantized (not supported)");
      std::vector<std::int64_t> dims;
      for (const json& d : spec["shape"]) {
        if (!d.is_number_integer() || d.get<std::int64_t>() < 0 || d.get<std::int64_t>() > (std::int64_t{1} << 40))
          throw std::runtime_error(where + ": weight '" + name + "' has a bad shape " + spec["shape"].dump());
        dims.push_back(d.get<std::int64_t>());
      }
      Tensor t = Tensor::empty(Shape(dims), DType::kFloat32);
      if (offset + t.nbytes() > bytes.size())
        throw std::runtime_error(where + ": weight '" + name + "' needs bytes " + std::to_string(offset) + ".." +
                                 std::to_string(offset + t.nbytes()) + " but the shards hold " +
                                 std::to_string(bytes.size()));
      std::memcpy(t.mutable_raw_data(), bytes.data() + offset, t.nbytes());
      offset += t.nbytes();
      weights[name] = t;
    }
  }
  WeightPlan plan;
  for (const Variable& v : model->variables()) {
    auto it = weights.find(weight_name(v));
    if (it == weights.end()) throw std::runtime_error(where + ": no weight '" + weight_name(v) + "' in the manifest");
    if (it->second.shape() != v.shape() || v.dtype() != DType::kFloat32)
      throw std::runtime_error(where + ": weight '" + weight_name(v) + "': shape in file " +
                               it->second.shape().to_string() + ", model expects " + v.shape().to_string() + " " +
                               dtype_name(v.dtype()));
    plan.emplace_back(v, it->second);
  }
  assign_weights(plan);
  return model;
}

}  // namespace tapeflow::models
