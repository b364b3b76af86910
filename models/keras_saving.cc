#include "models/keras_saving.h"
#include "models/internal/config_json.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "layers/attention/multi_head_attention.h"
#include "layers/rnn/bidirectional.h"
#include "layers/rnn/rnn.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "models/config.h"
#include "tape/core/internal/config_json.h"
#include "models/internal/saving_common.h"
#include "models/io/atomic_file.h"
#include "models/io/h5_io.h"
#include "models/io/zip_archive.h"
#include "models/internal/keras3_config.h"
#include "models/saving.h"
#include "optimizers/serialization.h"

namespace tapeflow::models {
using nlohmann::json;

namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kMetadata = "metadata.json";
constexpr const char* kWeights = "model.weights.h5";
constexpr std::int64_t kMaxJsonBytes = std::int64_t{64} << 20;
constexpr std::int64_t kMaxWeightsBytes = std::int64_t{8} << 30;

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw std::runtime_error(path + ": " + what); }

// A layer's place in model.weights.h5, as saving_lib's _save_container_state names it.
struct Entry {
  std::string path;  // "layers/dense_1"
  const layers::Layer* layer;
  std::string container;  // "" or "layers/sequential": where its siblings are
};

void walk(const layers::Layer& container, const std::string& prefix, std::vector<Entry>& out, int depth) {
  if (depth > kMaxConfigDepth) throw std::invalid_argument("models nest deeper than " + std::to_string(kMaxConfigDepth));
  std::map<std::string, int> used;
  const std::string base = prefix.empty() ? "layers" : prefix + "/layers";
  for (const auto& l : container.layers()) {
    std::string name = layers::to_snake_case(l->class_name());
    if (auto [it, fresh] = used.emplace(name, 0); !fresh) {
      name += '_';  // appended piecewise: "_" + s trips GCC 12's -Wrestrict false positive
      name += std::to_string(++it->second);
    }
    std::string at = base;
    at += '/';
    at += name;
    out.push_back({at, l.get(), base});
    if (dynamic_cast<const Model*>(l.get()) != nullptr) walk(*l, at, out, depth + 1);
  }
}

// The vars groups of the layer at `path` and their variables, as saving_lib walks the layer's
// attributes: a recurrent layer keeps its weights in its cell ("<path>/cell/vars"), Bidirectional
// in its forward_layer / backward_layer; a nested model's are its layers' (walk), so its own are
// none; any other layer's are all its variables.
using Groups = std::vector<std::pair<std::string, std::vector<Variable>>>;
void add_groups(const layers::Layer& layer, const std::string& path, Groups& out) {
  out.emplace_back(path + "/vars", std::vector<Variable>{});
  if (dynamic_cast<const Model*>(&layer) != nullptr) return;
  if (const auto* rnn = dynamic_cast<const layers::RNN*>(&layer); rnn != nullptr && rnn->cell()) {
    out.emplace_back(path + "/cell/vars", rnn->cell()->variables());
  } else if (const auto* bi = dynamic_cast<const layers::Bidirectional*>(&layer);
             bi != nullptr && bi->forward_layer() && bi->backward_layer()) {
    add_groups(*bi->forward_layer(), path + "/forward_layer", out);
    add_groups(*bi->backward_layer(), path + "/backward_layer", out);
  } else if (const auto* mha = dynamic_cast<const layers::MultiHeadAttention*>(&layer); mha != nullptr) {
    // Keras 3 keeps them in four EinsumDense sublayers: kernel (and bias) each.
    const std::vector<Variable> vars = layer.variables();
    const std::size_t each = mha->options().use_bias ? 2 : 1;
    if (vars.size() != 4 * each)
      throw std::invalid_argument("MultiHeadAttention '" + layer.name() + "': expected " + std::to_string(4 * each) +
                                  " variables (built), has " + std::to_string(vars.size()));
    std::size_t i = 0;
    for (const char* sub : {"query_dense", "key_dense", "value_dense", "output_dense"}) {
      out.emplace_back(path + "/" + sub + "/vars", std::vector<Variable>(vars.begin() + i, vars.begin() + i + each));
      i += each;
    }
  } else {
    out.back().second = layer.variables();
  }
}

std::string date_saved() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d@%H:%M:%S", &tm);
  return buf;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in && !in.eof()) throw std::runtime_error(path + ": cannot read back the weights file");
  return s.str();
}

// A temporary file removed when this goes out of scope.
struct TempFile {
  std::string path;
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

json parse_member(const io::ZipReader& zip, const char* member) {
  const std::string text = zip.read(member, kMaxJsonBytes);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(zip.path(), std::string(member) + " is not valid JSON: " + e.what());
  }
  try {  // before from_keras3 or anything else recurses over it
    check_config_depth(j, member);
  } catch (const std::invalid_argument& e) {
    fail(zip.path(), e.what());
  }
  return j;
}

}  // namespace

void save_keras(const Model& model, const std::string& path, const SaveModelOptions& options) {
  // First: a model without a config writes nothing. Functional nodes all in Keras 3's form
  // (Functional::get_config), not model_to_config's tf.keras 2 lists.
  json config = to_keras3(layers::serialize_json(model));
  const json state = internal::compile_state(model);
  if (!state.is_null())
    config["compile_config"] = {{"optimizer", optimizer_to_keras3(state["optimizer"])},
                                {"loss", loss_to_keras3(state["loss"])},
                                {"loss_weights", nullptr},
                                {"metrics", state["metrics"].empty() ? json(nullptr) : state["metrics"]},
                                {"weighted_metrics", nullptr},
                                {"run_eagerly", false},
                                {"steps_per_execution", 1},
                                {"jit_compile", false}};
  const json metadata = {{"keras_version", kKeras3Version}, {"date_saved", date_saved()}};

  std::vector<Entry> entries;
  walk(model, "", entries, 0);
  TempFile weights{io::make_temp_path(path + ".weights.h5")};
  {
    io::H5Writer writer(weights.path);
    writer.create_group("vars");
    writer.write_attribute("vars", "name", model.name());
    writer.create_group("layers");
    for (const Entry& e : entries) {
      Groups groups;
      add_groups(*e.layer, e.path, groups);
      for (const auto& [vars, variables] : groups) {
        writer.create_group(vars);
        for (std::size_t i = 0; i < variables.size(); ++i)
          write_tensor(writer, vars + "/" + std::to_string(i), variables[i].value());
      }
      writer.write_attribute(e.path + "/vars", "name", e.layer->name());
    }
    if (!state.is_null() && options.include_optimizer) {
      optimizers::Optimizer& opt = *model.optimizer();
      writer.create_group("optimizer/vars");
      writer.write_attribute("optimizer/vars", "name", opt.name());
      const auto vars = internal::keras3_optimizer_variables(opt, model);
      for (std::size_t i = 0; i < vars.size(); ++i) {
        const std::string at = "optimizer/vars/" + std::to_string(i);
        if (vars[i].second) {
          write_tensor(writer, at, vars[i].second->value());
        } else {
          const float rate = static_cast<float>(opt.current_learning_rate());
          writer.write_dataset(at, DType::kFloat32, {}, &rate);
        }
      }
    }
    writer.commit();
  }
  io::write_zip_atomic(path, {{kMetadata, metadata.dump()}, {kConfig, config.dump()}, {kWeights, slurp(weights.path)}});
}

std::shared_ptr<Model> load_keras(const std::string& path, const LoadModelOptions& options) {
  const io::ZipReader zip(path);
  for (const char* member : {kMetadata, kConfig, kWeights})
    if (!zip.has(member)) fail(path, std::string("missing member '") + member + "' (not a Keras 3 .keras file?)");
  const json metadata = parse_member(zip, kMetadata);
  if (!metadata.is_object() || !metadata.contains("keras_version") || !metadata["keras_version"].is_string())
    fail(path, std::string(kMetadata) + ": expected an object with a 'keras_version' string");
  const json raw = parse_member(zip, kConfig);
  if (!raw.is_object()) fail(path, std::string(kConfig) + ": expected a JSON object");
  std::shared_ptr<Model> model;
  json config;
  try {
    config = from_keras3(raw);
    model = model_from_config(config);
    check_config_keys(config, *model);
  } catch (const std::invalid_argument& e) {
    fail(path, std::string(kConfig) + ": " + e.what());
  }

  TempFile weights{io::make_temp_path((std::filesystem::temp_directory_path() / "tapeflow-keras-weights.h5").string())};
  {
    const std::string bytes = zip.read(kWeights, kMaxWeightsBytes);
    std::ofstream out(weights.path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) fail(path, "cannot extract " + std::string(kWeights) + " to " + weights.path);
  }
  const std::string where = path + ": " + kWeights;
  io::H5Reader reader(weights.path);
  WeightPlan plan;
  auto read_vars = [&](const std::string& group, const std::vector<Variable>& vars, const std::string& who) {
    if (!reader.is_group(group)) {
      if (vars.empty()) return;
      fail(where, "missing group '" + group + "' for " + who);
    }
    std::size_t datasets = 0;
    for (const std::string& n : reader.list_group(group)) datasets += reader.is_dataset(group + "/" + n);
    if (datasets != vars.size())
      fail(where, "'" + group + "' holds " + std::to_string(datasets) + " variables, " + who + " has " +
                      std::to_string(vars.size()));
    for (std::size_t i = 0; i < vars.size(); ++i) {
      const std::string at = group + "/" + std::to_string(i);
      if (!reader.is_dataset(at)) fail(where, "missing variable '" + at + "' for " + who);
      plan.emplace_back(vars[i], internal::checked_value(where, "'" + at + "' (" + who + " " + vars[i].name() + ")",
                                                         read_tensor(reader, at), vars[i]));
    }
  };
  std::vector<Entry> entries;
  walk(*model, "", entries, 0);
  std::map<std::string, std::map<std::string, std::string>> by_name;  // container -> layer name -> group
  for (const Entry& e : entries) {
    auto [it, fresh] = by_name.try_emplace(e.container);
    if (fresh && reader.is_group(e.container))
      for (const std::string& g : reader.list_group(e.container)) {
        const std::string vars = e.container + "/" + g + "/vars";
        if (reader.is_group(vars) && reader.has_attribute(vars, "name"))
          it->second.emplace(reader.read_string_attribute(vars, "name"), e.container + "/" + g);
      }
    std::string at = e.path;
    if (const auto named = it->second.find(e.layer->name()); named != it->second.end()) at = named->second;
    Groups groups;
    add_groups(*e.layer, at, groups);
    for (const auto& [vars, variables] : groups)
      read_vars(vars, variables, e.layer->class_name() + " '" + e.layer->name() + "'");
  }

  CompileOptions compile;
  if (options.compile && raw.contains("compile_config") && raw["compile_config"].is_object()) {
    const json& cc = raw["compile_config"];
    try {
      if (!cc.contains("optimizer") || !cc.contains("loss")) throw std::invalid_argument("expected 'optimizer' and 'loss'");
      compile = internal::compile_options(cc["optimizer"], cc["loss"], cc.value("metrics", json()));
    } catch (const std::invalid_argument& e) {
      fail(path, std::string(kConfig) + ": compile_config: " + e.what());
    }
    if (reader.is_group("optimizer/vars")) {
      const auto vars = internal::keras3_optimizer_variables(*compile.optimizer, *model);
      std::vector<Variable> assignable;
      std::size_t datasets = 0;
      for (const std::string& n : reader.list_group("optimizer/vars")) datasets += reader.is_dataset("optimizer/vars/" + n);
      if (datasets != vars.size())
        fail(where, "'optimizer/vars' holds " + std::to_string(datasets) + " variables, the " +
                        compile.optimizer->class_name() + " optimizer of this model has " + std::to_string(vars.size()));
      for (std::size_t i = 0; i < vars.size(); ++i) {
        const std::string at = "optimizer/vars/" + std::to_string(i);
        if (!reader.is_dataset(at)) fail(where, "missing optimizer variable '" + at + "'");
        if (!vars[i].second) {  // the learning rate: its config value is the saved one
          if (read_tensor(reader, at).shape().rank() != 0) fail(where, "'" + at + "' (learning_rate) is not a scalar");
          continue;
        }
        plan.emplace_back(*vars[i].second, internal::checked_value(where, "'" + at + "' (optimizer " + vars[i].first + ")",
                                                                   read_tensor(reader, at), *vars[i].second));
      }
    }
  }
  assign_weights(plan);
  if (compile.optimizer) model->compile(std::move(compile));
  return model;
}

}  // namespace tapeflow::models
