// Keras configs of the built-in optimizers and schedules (their get_config overrides live here,
// next to deserialize, so each field is written and read in one place).
#include "optimizers/serialization.h"
#include "optimizers/internal/serialization_json.h"

#include <algorithm>
#include <stdexcept>

#include "optimizers/adam.h"
#include "optimizers/rmsprop.h"
#include "optimizers/sgd.h"

namespace tapeflow::optimizers {
using nlohmann::json;

namespace {

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json base(const Optimizer& o) {
  const OptimizerConfig& c = o.config();
  return {{"name", c.name},
          {"weight_decay", c.weight_decay > 0 ? json(c.weight_decay) : json(nullptr)},
          {"clipnorm", optional_number(c.clipnorm)},
          {"global_clipnorm", optional_number(c.global_clipnorm)},
          {"clipvalue", optional_number(c.clipvalue)},
          {"use_ema", false},
          {"ema_momentum", 0.99},
          {"ema_overwrite_frequency", nullptr},
          {"jit_compile", false},
          {"is_legacy_optimizer", false},
          {"learning_rate", serialize_learning_rate(c.learning_rate)}};
}

// Field access with errors naming the optimizer or schedule and the field.
class Fields {
 public:
  Fields(const json& c, std::string where) : c_(c), where_(std::move(where)) {
    if (!c_.is_object()) throw std::invalid_argument(where_ + ": config must be a JSON object, got " + c_.dump());
  }
  bool has(const char* k) const { return c_.contains(k) && !c_[k].is_null(); }
  [[noreturn]] void fail(const char* k, const std::string& what) const {
    throw std::invalid_argument(where_ + ": config field '" + k + "': " + what);
  }
  double number(const char* k, double fallback) const {
    if (!has(k)) return fallback;
    if (!c_[k].is_number()) fail(k, "expected a number, got " + c_[k].dump());
    return c_[k].get<double>();
  }
  std::optional<double> optional(const char* k) const {
    if (!has(k)) return std::nullopt;
    return number(k, 0.0);
  }
  std::int64_t integer(const char* k) const {
    if (!has(k)) fail(k, "missing");
    if (!c_[k].is_number_integer()) fail(k, "expected an integer, got " + c_[k].dump());
    return c_[k].get<std::int64_t>();
  }
  bool boolean(const char* k, bool fallback) const {
    if (!has(k)) return fallback;
    if (!c_[k].is_boolean()) fail(k, "expected true or false, got " + c_[k].dump());
    return c_[k].get<bool>();
  }
  std::string string(const char* k, const std::string& fallback) const {
    if (!has(k)) return fallback;
    if (!c_[k].is_string()) fail(k, "expected a string, got " + c_[k].dump());
    return c_[k].get<std::string>();
  }
  const json& at(const char* k) const {
    if (!has(k)) fail(k, "missing");
    return c_[k];
  }

 private:
  const json& c_;
  std::string where_;
};

// Keras's variable-name prefix of a tapeflow slot.
std::string keras_slot_name(const Optimizer& o, const std::string& slot) {
  if (slot == "rms") return "velocity";
  if (slot == "mg") return "average_gradient";
  if (slot == "momentum" && o.class_name() == "SGD") return "m";
  return slot;
}

std::string strip_suffix(const std::string& name) {
  return name.size() > 2 && name.compare(name.size() - 2, 2, ":0") == 0 ? name.substr(0, name.size() - 2) : name;
}

}  // namespace

Config Optimizer::get_config() const {
  throw std::logic_error(name() + ": get_config() is not implemented for optimizer class '" + class_name() + "'");
}

Config LearningRateSchedule::get_config() const {
  throw std::logic_error(name() + ": get_config() is not implemented for this learning-rate schedule");
}

Config ExponentialDecay::get_config() const {
  return to_config({{"initial_learning_rate", o_.initial_learning_rate},
          {"decay_steps", o_.decay_steps},
          {"decay_rate", o_.decay_rate},
          {"staircase", o_.staircase},
          {"name", nullptr}});
}

Config CosineDecay::get_config() const {
  return to_config({{"initial_learning_rate", o_.initial_learning_rate},
          {"decay_steps", o_.decay_steps},
          {"alpha", o_.alpha},
          {"name", nullptr},
          {"warmup_target", nullptr},
          {"warmup_steps", 0}});
}

Config PiecewiseConstantDecay::get_config() const {
  return to_config({{"boundaries", boundaries_}, {"values", values_}, {"name", nullptr}});
}

Config Adam::get_config() const {
  json c = base(*this);
  c["beta_1"] = options_.beta_1;
  c["beta_2"] = options_.beta_2;
  c["epsilon"] = options_.epsilon;
  c["amsgrad"] = options_.amsgrad;
  return to_config(std::move(c));
}

Config AdamW::get_config() const { return Adam::get_config(); }

Config SGD::get_config() const {
  json c = base(*this);
  c["momentum"] = options_.momentum;
  c["nesterov"] = options_.nesterov;
  return to_config(std::move(c));
}

Config RMSprop::get_config() const {
  json c = base(*this);
  c["rho"] = options_.rho;
  c["momentum"] = options_.momentum;
  c["epsilon"] = options_.epsilon;
  c["centered"] = options_.centered;
  return to_config(std::move(c));
}

Config Adagrad::get_config() const {
  json c = base(*this);
  c["initial_accumulator_value"] = options_.initial_accumulator_value;
  c["epsilon"] = options_.epsilon;
  return to_config(std::move(c));
}

json serialize_json(const Optimizer& optimizer) {
  Config config = optimizer.get_config();  // named, so its JSON moves in (of a temporary it would copy)
  return {{"class_name", optimizer.class_name()}, {"config", std::move(json_of(config))}};
}
Config serialize(const Optimizer& optimizer) { return to_config(serialize_json(optimizer)); }

json serialize_learning_rate(const LearningRate& lr) {
  if (!lr.is_schedule()) return lr.at(0);
  Config config = lr.schedule()->get_config();
  return {{"class_name", lr.schedule()->name()}, {"config", std::move(json_of(config))}};
}

LearningRate deserialize_learning_rate(const json& v, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string() || !v.contains("config"))
    throw std::invalid_argument(where + ": config field 'learning_rate': expected a number or a schedule "
                                "{\"class_name\", \"config\"}, got " + v.dump().substr(0, 200));
  const std::string cls = v["class_name"].get<std::string>();
  Fields f(v["config"], where + " schedule " + cls);
  try {
    if (cls == "ExponentialDecay")
      return ExponentialDecay(f.number("initial_learning_rate", 0.0), f.integer("decay_steps"),
                              f.number("decay_rate", 0.0), f.boolean("staircase", false));
    if (cls == "CosineDecay") {
      if (f.has("warmup_target") || f.number("warmup_steps", 0) != 0)
        f.fail("warmup_steps", "warmup is not supported by tapeflow");
      return CosineDecay(f.number("initial_learning_rate", 0.0), f.integer("decay_steps"), f.number("alpha", 0.0));
    }
    if (cls == "PiecewiseConstantDecay") {
      const json& b = f.at("boundaries");
      const json& vals = f.at("values");
      if (!b.is_array() || !vals.is_array()) f.fail("boundaries", "expected lists of boundaries and values");
      std::vector<std::int64_t> bs;
      std::vector<double> vs;
      for (const json& e : b) {
        if (!e.is_number_integer()) f.fail("boundaries", "expected integers, got " + b.dump());
        bs.push_back(e.get<std::int64_t>());
      }
      for (const json& e : vals) {
        if (!e.is_number()) f.fail("values", "expected numbers, got " + vals.dump());
        vs.push_back(e.get<double>());
      }
      return PiecewiseConstantDecay(bs, vs);
    }
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind(where, 0) == 0) throw;
    throw std::invalid_argument(where + " schedule " + cls + ": " + e.what());
  }
  throw std::invalid_argument(where + ": unknown learning-rate schedule class '" + cls +
                              "' (known: ExponentialDecay, CosineDecay, PiecewiseConstantDecay)");
}

std::shared_ptr<Optimizer> deserialize(const json& j) {
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string())
    throw std::invalid_argument("optimizers::deserialize: expected {\"class_name\", \"config\"}, got " +
                                j.dump().substr(0, 200));
  std::string cls = j["class_name"].get<std::string>();
  // tf_keras 2.11+ registers its optimizers under the "Custom" package: "Custom>Adam" in its files.
  if (cls.rfind("Custom>", 0) == 0) cls = cls.substr(7);
  static const json empty = json::object();
  const json& c = j.contains("config") ? j["config"] : empty;
  const std::string where = "optimizer " + cls;
  Fields f(c, where);
  if (f.boolean("use_ema", false)) f.fail("use_ema", "exponential moving averages are not supported by tapeflow");
  const LearningRate lr = f.has("learning_rate") ? deserialize_learning_rate(c["learning_rate"], where) : LearningRate(0.001);
  const double wd = f.number("weight_decay", 0.0);
  if (wd != 0.0 && cls != "AdamW") f.fail("weight_decay", "only AdamW supports weight_decay in tapeflow");
  const auto clipnorm = f.optional("clipnorm"), clipvalue = f.optional("clipvalue"),
             global_clipnorm = f.optional("global_clipnorm");
  const std::string name = f.string("name", cls);
  // The fields every optimizer shares, set on an algorithm's options.
  auto common = [&](auto o) {
    o.learning_rate = lr;
    o.clipnorm = clipnorm;
    o.clipvalue = clipvalue;
    o.global_clipnorm = global_clipnorm;
    o.name = name;
    return o;
  };
  try {
    if (cls == "Adam")
      return std::make_shared<Adam>(common(AdamOptions{.beta_1 = f.number("beta_1", 0.9),
                                                       .beta_2 = f.number("beta_2", 0.999),
                                                       .epsilon = f.number("epsilon", 1e-7),
                                                       .amsgrad = f.boolean("amsgrad", false)}));
    if (cls == "AdamW")
      return std::make_shared<AdamW>(common(AdamWOptions{.weight_decay = f.number("weight_decay", 0.004),
                                                         .beta_1 = f.number("beta_1", 0.9),
                                                         .beta_2 = f.number("beta_2", 0.999),
                                                         .epsilon = f.number("epsilon", 1e-7),
                                                         .amsgrad = f.boolean("amsgrad", false)}));
    if (cls == "SGD")
      return std::make_shared<SGD>(
          common(SGDOptions{.momentum = f.number("momentum", 0.0), .nesterov = f.boolean("nesterov", false)}));
    if (cls == "RMSprop")
      return std::make_shared<RMSprop>(common(RMSpropOptions{.rho = f.number("rho", 0.9),
                                                             .momentum = f.number("momentum", 0.0),
                                                             .epsilon = f.number("epsilon", 1e-7),
                                                             .centered = f.boolean("centered", false)}));
    if (cls == "Adagrad")
      return std::make_shared<Adagrad>(common(AdagradOptions{
          .initial_accumulator_value = f.number("initial_accumulator_value", 0.1), .epsilon = f.number("epsilon", 1e-7)}));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
  throw std::invalid_argument("optimizers::deserialize: unknown optimizer class '" + cls +
                              "' (known: Adam, AdamW, SGD, RMSprop, Adagrad)");
}
std::shared_ptr<Optimizer> deserialize(const Config& optimizer_config) { return deserialize(json_of(optimizer_config)); }

std::vector<std::pair<std::string, Variable>> keras_weights(Optimizer& optimizer, const std::vector<Variable>& vars) {
  optimizer.build(vars);
  std::vector<std::pair<std::string, Variable>> out;
  out.emplace_back("iteration:0", optimizer.variables()[0]);
  std::vector<std::vector<std::string>> order = optimizer.keras_slot_order();
  if (order.empty() && !vars.empty()) order = {optimizer.slot_names(vars[0])};
  std::size_t listed = 0;
  for (const auto& pass : order)
    for (const Variable& v : vars) {
      const std::vector<std::string> have = optimizer.slot_names(v);
      for (const std::string& slot : pass) {
        if (std::find(have.begin(), have.end(), slot) == have.end()) continue;
        out.emplace_back(keras_slot_name(optimizer, slot) + "/" + strip_suffix(v.name()) + ":0",
                         optimizer.get_slot(v, slot));
        ++listed;
      }
    }
  // Every slot must be listed exactly once (a keras_slot_order that misses one is a bug).
  if (listed + 1 != optimizer.variables().size())
    throw std::logic_error(optimizer.name() + ": keras_weights listed " + std::to_string(listed + 1) + " of " +
                           std::to_string(optimizer.variables().size()) +
                           " optimizer variables (keras_slot_order misses a slot)");
  return out;
}

}  // namespace tapeflow::optimizers
