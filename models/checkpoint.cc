#include "models/checkpoint.h"

#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "models/io/atomic_file.h"
#include "models/io/h5_io.h"
#include "models/saving.h"
#include "tape/runtime/logging.h"

namespace tapeflow::models {
namespace {

constexpr const char* kFormat = "tapeflow-checkpoint";

void check_name(const std::string& name, const char* kind) {
  bool ok = !name.empty();
  for (char c : name)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                c == '-');
  if (!ok) throw std::invalid_argument(std::string("Checkpoint: bad ") + kind + " name '" + name + "'");
}

template <class T>
void check_unique(const std::vector<std::pair<std::string, T>>& list, const std::string& name, const char* kind) {
  check_name(name, kind);
  for (const auto& [n, v] : list)
    if (n == name) throw std::invalid_argument(std::string("Checkpoint: duplicate ") + kind + " '" + name + "'");
}

std::string shape_string(const Shape& s) { return s.to_string(); }

std::string schedule_name(const optimizers::Optimizer& opt) {
  return opt.learning_rate().is_schedule() ? opt.learning_rate().schedule()->name() : "constant";
}

[[noreturn]] void fail(const io::H5Reader& r, const std::string& what) { throw std::runtime_error(r.path() + ": " + what); }

// Reads a dataset that must exist with the given shape and dtype; `what` names it in errors.
Tensor read_checked(const io::H5Reader& r, const std::string& path, const std::string& what, const Shape& shape,
                    DType dtype) {
  const std::optional<io::H5Dataset> found = r.find_dataset(path);
  if (!found) fail(r, what + ": missing dataset '" + path + "'");
  const io::H5Dataset& dataset = *found;
  const std::vector<std::int64_t>& dims = dataset.shape();
  if (dims.size() > static_cast<std::size_t>(Shape::kMaxRank))
    fail(r, what + ": rank " + std::to_string(dims.size()) + " in file, expected shape " + shape_string(shape));
  const Shape got(dims.begin(), dims.end());
  if (got != shape) fail(r, what + ": shape in file " + shape_string(got) + ", expected " + shape_string(shape));
  if (dataset.dtype() != dtype)
    fail(r, what + ": dtype in file " + dtype_name(dataset.dtype()) + ", expected " + dtype_name(dtype));
  Tensor t = Tensor::empty(shape, dtype);
  dataset.read_into(t.mutable_raw_data(), t.nbytes());
  return t;
}

}  // namespace

Checkpoint::Checkpoint(CheckpointOptions options) : options_(std::move(options)) {
  if (options_.model) track_layer_generators("model_rng", *options_.model);
}

std::size_t Checkpoint::track_layer_generators(const std::string& prefix, layers::Layer& model) {
  std::size_t count = 0;
  auto visit = [&](auto& self, layers::Layer& layer) -> void {
    if (Generator* g = layer.training_generator()) track_generator(prefix + "." + std::to_string(count++), g);
    for (const auto& sub : layer.layers()) self(self, *sub);
  };
  visit(visit, model);
  return count;
}

void Checkpoint::track_variable(const std::string& name, const Variable& variable) {
  check_unique(variables_, name, "variable");
  if (!variable.defined()) throw std::invalid_argument("Checkpoint: variable '" + name + "' is undefined");
  variables_.emplace_back(name, variable);
}

void Checkpoint::track_counter(const std::string& name, std::int64_t* counter) {
  check_unique(counters_, name, "counter");
  if (counter == nullptr) throw std::invalid_argument("Checkpoint: counter '" + name + "' is null");
  counters_.emplace_back(name, counter);
}

void Checkpoint::track_generator(const std::string& name, Generator* generator) {
  check_unique(generators_, name, "generator");
  if (generator == nullptr) throw std::invalid_argument("Checkpoint: generator '" + name + "' is null");
  generators_.emplace_back(name, generator);
}

void Checkpoint::add_function(const FunctionGraph& function) {
  for (const auto& f : functions_)
    if (f.name == function.name) throw std::invalid_argument("Checkpoint: duplicate function '" + function.name + "'");
  functions_.push_back(function);
}

void Checkpoint::set_config(std::string config) {
  if (config.find('\0') != std::string::npos) throw std::invalid_argument("Checkpoint::set_config: text contains a NUL byte");
  config_ = std::move(config);
}

void Checkpoint::write(const std::string& path) const {
  io::H5Writer w(path);
  w.write_attribute("", "format", std::string(kFormat));
  w.write_attribute("", "format_version", std::int64_t{1});
  if (!config_.empty()) w.write_attribute("", "config", config_);
  if (options_.model) write_keras_weights(w, "model_weights", *options_.model);
  if (options_.optimizer) {
    optimizers::Optimizer& opt = *options_.optimizer;
    if (options_.model) opt.build(options_.model->trainable_variables());  // as read() does
    w.create_group("optimizer_weights");
    std::vector<std::string> names;
    for (const Variable& v : opt.variables()) {
      names.push_back(v.name());
      write_tensor(w, "optimizer_weights/" + v.name(), v.value());
    }
    w.write_attribute("optimizer_weights", "weight_names", names);
    w.write_attribute("optimizer_weights", "optimizer", opt.name());
    w.write_attribute("optimizer_weights", "learning_rate_schedule", schedule_name(opt));
  }
  for (const auto& [name, v] : variables_) write_tensor(w, "variables/" + name, v.value());
  for (const auto& [name, c] : counters_) w.write_dataset("counters/" + name, DType::kInt64, {}, c);
  for (const auto& [name, g] : generators_) {
    std::vector<std::uint64_t> s = g->state();
    w.write_dataset("generators/" + name, DType::kInt64, {static_cast<std::int64_t>(s.size())}, s.data());
  }
  for (const FunctionGraph& f : functions_) {
    SerializedFunction s = f.serialize();
    const std::string g = "functions/" + f.name;
    w.create_group(g);
    w.write_attribute(g, "program", s.program);
    w.write_attribute(g, "num_constants", static_cast<std::int64_t>(s.constants.size()));
    w.create_group(g + "/constants");
    for (std::size_t i = 0; i < s.constants.size(); ++i) write_tensor(w, g + "/constants/" + std::to_string(i), s.constants[i]);
  }
  w.commit();
}

void Checkpoint::read(const std::string& path) {
  io::H5Reader r(path);
  if (!r.has_attribute("", "format") || r.read_string_attribute("", "format") != kFormat)
    fail(r, "not a tapeflow checkpoint (root attribute 'format' is missing or not '" + std::string(kFormat) + "')");
  if (r.read_int_attribute("", "format_version") != 1)
    fail(r, "unsupported format_version " + std::to_string(r.read_int_attribute("", "format_version")));

  std::string config = r.has_attribute("", "config") ? r.read_string_attribute("", "config") : std::string();

  // 1. Functions: parse all first, so an unknown op is reported before anything changes.
  std::vector<FunctionGraph> functions;
  if (r.is_group("functions")) {
    for (const std::string& name : r.list_group("functions")) {
      const std::string g = "functions/" + name;
      if (!r.has_attribute(g, "program")) fail(r, "function group '" + g + "' has no 'program' attribute");
      SerializedFunction s;
      s.program = r.read_string_attribute(g, "program");
      const std::int64_t n = r.read_int_attribute(g, "num_constants");
      if (n < 0 || n > (1 << 24)) fail(r, "function '" + name + "': bad num_constants " + std::to_string(n));
      for (std::int64_t i = 0; i < n; ++i) {
        const std::string c = g + "/constants/" + std::to_string(i);
        if (!r.is_dataset(c)) fail(r, "function '" + name + "': missing constant '" + c + "'");
        s.constants.push_back(read_tensor(r, c));
      }
      try {
        functions.push_back(FunctionGraph::deserialize(name, s));
      } catch (const std::exception& e) {
        fail(r, e.what());
      }
    }
  }

  // 2. Everything else into a plan of checked assignments.
  WeightPlan plan;
  std::int64_t iterations = -1;
  if (options_.optimizer) {
    optimizers::Optimizer& opt = *options_.optimizer;
    if (options_.model) opt.build(options_.model->trainable_variables());
    const std::string g = "optimizer_weights";
    if (!r.is_group(g)) fail(r, "missing group '" + g + "'");
    if (!r.has_attribute(g, "weight_names")) fail(r, "group '" + g + "' has no 'weight_names' attribute");
    if (r.has_attribute(g, "learning_rate_schedule")) {
      const std::string saved = r.read_string_attribute(g, "learning_rate_schedule");
      if (saved != schedule_name(opt))
        fail(r, "learning-rate schedule in file is '" + saved + "', the optimizer has '" + schedule_name(opt) + "'");
    }
    auto names = r.read_string_array_attribute(g, "weight_names");
    std::vector<Variable> vars = opt.variables();
    if (names.size() != vars.size())
      fail(r, "optimizer '" + opt.name() + "': file has " + std::to_string(names.size()) +
                  " optimizer weights, the optimizer has " + std::to_string(vars.size()) +
                  " (build it for the same variables)");
    for (std::size_t i = 0; i < vars.size(); ++i) {
      plan.emplace_back(vars[i], read_checked(r, g + "/" + names[i], "optimizer weight '" + vars[i].name() + "'",
                                              vars[i].shape(), vars[i].dtype()));
      if (i == 0) iterations = plan.back().second.item<std::int64_t>();
    }
    if (iterations < 0) fail(r, "optimizer iterations is negative: " + std::to_string(iterations));
  }
  for (const auto& [name, v] : variables_)
    plan.emplace_back(v, read_checked(r, "variables/" + name, "variable '" + name + "'", v.shape(), v.dtype()));
  std::vector<std::int64_t> counter_values;
  for (const auto& [name, c] : counters_) {
    const std::int64_t value = *read_checked(r, "counters/" + name, "counter '" + name + "'", Shape{}, DType::kInt64)
                                    .data<std::int64_t>();
    if (value < 0) fail(r, "counter '" + name + "' is negative: " + std::to_string(value));
    counter_values.push_back(value);
  }
  std::vector<std::vector<std::uint64_t>> generator_states;
  for (const auto& [name, gen] : generators_) {
    Tensor t = read_checked(r, "generators/" + name, "generator '" + name + "'",
                            Shape{static_cast<std::int64_t>(Generator::kStateWords)}, DType::kInt64);
    std::vector<std::uint64_t> s(Generator::kStateWords);
    std::memcpy(s.data(), t.raw_data(), t.nbytes());
    try {
      Generator probe(0);
      probe.set_state(s);
    } catch (const std::invalid_argument& e) {
      fail(r, "generator '" + name + "': " + e.what());
    }
    generator_states.push_back(std::move(s));
  }

  // 3. Model weights, checked like the rest; then the functions are registered, then everything is assigned.
  if (options_.model) plan_keras_weights(r, "model_weights", *options_.model, plan);
  // Functions first: registration refuses call cycles before anything changes.
  std::vector<std::string> function_names;
  for (const FunctionGraph& f : functions) function_names.push_back(f.name);
  try {
    register_functions(std::move(functions));
  } catch (const std::invalid_argument& e) {
    fail(r, e.what());
  }
  assign_weights(plan);
  for (std::size_t i = 0; i < counters_.size(); ++i) *counters_[i].second = counter_values[i];
  for (std::size_t i = 0; i < generators_.size(); ++i) generators_[i].second->set_state(generator_states[i]);
  loaded_functions_ = std::move(function_names);
  loaded_config_ = std::move(config);
}

// ---------------------------------------------------------------------------------------------
namespace {
constexpr const char* kIndexHeader = "tapeflow-checkpoint-index 1";
constexpr std::uintmax_t kMaxIndexBytes = 1 << 20;

std::int64_t number_of(const std::string& file) {
  // "ckpt-<n>.h5" -> n, or -1.
  if (file.rfind("ckpt-", 0) != 0 || file.size() < 9 || file.substr(file.size() - 3) != ".h5") return -1;
  const std::string digits = file.substr(5, file.size() - 8);
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}
}  // namespace

CheckpointManager::CheckpointManager(std::shared_ptr<Checkpoint> checkpoint, std::string directory, int max_to_keep)
    : checkpoint_(std::move(checkpoint)), directory_(std::move(directory)), max_to_keep_(max_to_keep) {
  if (!checkpoint_) throw std::invalid_argument("CheckpointManager: null checkpoint");
  if (max_to_keep < 1) throw std::invalid_argument("CheckpointManager: max_to_keep must be >= 1, got " + std::to_string(max_to_keep));
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) throw std::runtime_error(directory_ + ": cannot create checkpoint directory (" + ec.message() + ")");
  if (!fs::is_directory(directory_, ec)) throw std::runtime_error(directory_ + ": is not a directory");
  // Temporary files of dead writers: "<target>.tmp-<pid>-<hex>".
  std::set<std::string> targets;
  for (const auto& e : fs::directory_iterator(directory_, ec)) {
    const std::string n = e.path().filename().string();
    auto pos = n.find(".tmp-");
    if (pos != std::string::npos) targets.insert((fs::path(directory_) / n.substr(0, pos)).string());
  }
  if (ec) throw std::runtime_error(directory_ + ": cannot list checkpoint directory (" + ec.message() + ")");
  for (const std::string& t : targets) io::remove_stale_temp_files(t);
  // The files are the truth: every "ckpt-<n>.h5" counts (a save killed between its rename and the
  // index update, an index lost or damaged), so numbering never reuses a name that exists.
  std::vector<std::pair<std::int64_t, std::string>> found;
  for (const auto& e : fs::directory_iterator(directory_, ec)) {
    const std::string n = e.path().filename().string();
    if (const std::int64_t k = number_of(n); k > 0) found.emplace_back(k, n);
  }
  std::sort(found.begin(), found.end());
  for (const auto& [k, n] : found) {
    kept_.push_back(n);
    next_ = std::max(next_, k + 1);
  }
  read_index();
}

void CheckpointManager::read_index() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string index = (fs::path(directory_) / "checkpoint").string();
  if (!fs::exists(index, ec)) return;
  // The index only carries the numbering on (its "next" line) once files were deleted; a damaged
  // one is reported and ignored.
  auto ignore = [&](const std::string& why) {
    logger()->warn("{}: {}; ignoring the index and using the checkpoint files in {}", index, why, directory_);
  };
  if (fs::file_size(index, ec) > kMaxIndexBytes) return ignore("checkpoint index is too large");
  std::ifstream in(index);
  std::string line;
  if (!in) return ignore("cannot read the checkpoint index");
  if (!std::getline(in, line) || line != kIndexHeader) return ignore("not a checkpoint index (first line '" + line + "')");
  if (!std::getline(in, line) || line.rfind("next ", 0) != 0 || number_of("ckpt-" + line.substr(5) + ".h5") < 1)
    return ignore("malformed 'next' line '" + line + "'");
  const std::int64_t next = number_of("ckpt-" + line.substr(5) + ".h5");
  while (std::getline(in, line)) {
    const std::int64_t n = number_of(line);
    if (n < 1 || n >= next) return ignore("malformed checkpoint entry '" + line + "'");
  }
  next_ = std::max(next_, next);
}

void CheckpointManager::write_index() const {
  std::string s = std::string(kIndexHeader) + "\nnext " + std::to_string(next_) + "\n";
  for (const std::string& f : kept_) s += f + "\n";
  io::atomic_write_file((std::filesystem::path(directory_) / "checkpoint").string(), s);
}

std::string CheckpointManager::save() {
  const std::string file = "ckpt-" + std::to_string(next_) + ".h5";
  const std::string path = (std::filesystem::path(directory_) / file).string();
  checkpoint_->write(path);
  ++next_;
  kept_.push_back(file);
  std::vector<std::string> dropped;
  while (static_cast<int>(kept_.size()) > max_to_keep_) {
    dropped.push_back(kept_.front());
    kept_.erase(kept_.begin());
  }
  write_index();
  for (const std::string& f : dropped) {
    std::error_code ec;
    std::filesystem::remove(std::filesystem::path(directory_) / f, ec);
  }
  return path;
}

std::optional<std::string> CheckpointManager::latest_checkpoint() const {
  if (kept_.empty()) return std::nullopt;
  return (std::filesystem::path(directory_) / kept_.back()).string();
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  std::vector<std::string> out;
  for (const std::string& f : kept_) out.push_back((std::filesystem::path(directory_) / f).string());
  return out;
}

std::optional<std::string> CheckpointManager::restore() {
  std::string problems;
  for (auto it = kept_.rbegin(); it != kept_.rend(); ++it) {
    const std::string path = (std::filesystem::path(directory_) / *it).string();
    try {
      checkpoint_->read(path);  // checks everything before it changes anything
      return path;
    } catch (const std::runtime_error& e) {
      logger()->warn("cannot restore {}: {}; trying an older checkpoint", path, e.what());
      problems += std::string("\n  ") + e.what();
    }
  }
  if (!kept_.empty())
    throw std::runtime_error(directory_ + ": none of the " + std::to_string(kept_.size()) +
                             " checkpoint files can be restored (they are kept; move them away to start afresh):" +
                             problems);
  return std::nullopt;
}

}  // namespace tapeflow::models
