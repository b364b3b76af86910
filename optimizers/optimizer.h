// Optimizer: the Keras base class — apply_gradients, iterations, slot variables, gradient
// clipping, weight decay and a learning rate that is a number or a schedule; each algorithm
// writes only build_slots() and update_step().
//
// Facts:    apply_gradients(grads, vars) runs under RecordingPause (never recorded on tapes):
//           1. pairs with an absent gradient are skipped; 2. shapes/dtypes are checked; 3. slots of
//           new variables are created (build); 4. gradients are clipped as Keras: clipnorm (each
//           gradient to L2 norm <= clipnorm), else global_clipnorm (all together), else clipvalue
//           (element-wise to [-clipvalue, clipvalue]); 5. lr = learning_rate at `iterations`;
//           6. weight decay (if > 0): var -= var · weight_decay · lr; 7. update_step per variable;
//           8. iterations += 1.
//           Slots are Variables named "<optimizer>/<var name without :0>/<slot>:0"
//           ("Adam/dense/kernel/m:0"); variables() = iterations first ("<optimizer>/iterations:0",
//           int64), then each variable's slots in the order variables were first seen.
//           Updates are in-place loops over the variables' storage (copy-on-write if a tape still
//           holds the old value), TBB-parallel for large variables; float32 and float64.
// Errors:   std::invalid_argument: grads/vars counts differ; a gradient whose shape or dtype differs
//           from its variable's (names the variable and both shapes); no gradient at all ("No
//           gradients provided for any variable"); both clipnorm and global_clipnorm set; a
//           non-positive clip value; get_slot for an unknown variable or slot name.
// Ref:      keras/src/optimizers/base_optimizer.py, keras/src/optimizers/optimizer.py
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "optimizers/schedules.h"
#include "tape/core/tensor.h"
#include "tape/runtime/variable.h"

namespace tapeflow::optimizers {

// Keyword arguments every Keras optimizer takes.
struct OptimizerConfig {
  // A constant (default 0.001) or a schedule of the iteration count.
  LearningRate learning_rate = 0.001;
  // Clip each gradient to this L2 norm before the update (> 0; not with global_clipnorm).
  std::optional<double> clipnorm;
  // Clip each gradient element to [-clipvalue, clipvalue] (> 0).
  std::optional<double> clipvalue;
  // Clip all gradients together to this global L2 norm (> 0; not with clipnorm).
  std::optional<double> global_clipnorm;
  // Decoupled weight decay applied before each update, var -= var · weight_decay · lr (>= 0; 0: none).
  double weight_decay = 0.0;
  // The optimizer's name: prefix of its slot variables, and in configs (empty: "Optimizer").
  std::string name;
};

// The common config from an algorithm's options struct (fields learning_rate, clipnorm, clipvalue,
// global_clipnorm, name).
template <class Options>
OptimizerConfig common_config(const Options& o, double weight_decay = 0.0) {
  return {.learning_rate = o.learning_rate,
          .clipnorm = o.clipnorm,
          .clipvalue = o.clipvalue,
          .global_clipnorm = o.global_clipnorm,
          .weight_decay = weight_decay,
          .name = o.name};
}

// Base class of every optimizer (Keras's Optimizer): apply_gradients with clipping, weight decay,
// the learning rate at `iterations` and slot variables; see the file comment for the steps.
// Ref: keras.optimizers.Optimizer
class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update. An absent optional (or an undefined Tensor) means "no gradient".
  void apply_gradients(const std::vector<std::optional<Tensor>>& grads, const std::vector<Variable>& vars);
  // Creates the slots of variables not seen yet (done by apply_gradients; call it before restoring
  // a checkpoint into variables()).
  void build(const std::vector<Variable>& vars);

  // The number of apply_gradients calls so far (the int64 variable "<name>/iterations:0"; restored
  // with variables()). Ref: optimizer.iterations
  std::int64_t iterations() const;
  // The learning rate the next apply_gradients uses (the schedule at iterations()).
  double current_learning_rate() const;
  // The learning rate as configured: a constant or a schedule (current_learning_rate() evaluates it).
  const LearningRate& learning_rate() const { return config_.learning_rate; }
  // Replaces the learning rate (keras: optimizer.learning_rate = x; used by LearningRateScheduler).
  void set_learning_rate(LearningRate lr) { config_.learning_rate = std::move(lr); }
  // The common keyword arguments in force (set_learning_rate changes learning_rate).
  const OptimizerConfig& config() const { return config_; }
  // The optimizer's name (its options' name, e.g. "Adam"; "Optimizer" if empty): prefix of its
  // variables' names.
  const std::string& name() const { return config_.name; }

  // Every optimizer variable: iterations first, then each tracked variable's slots in the order the
  // variables were first seen (what checkpoints save and restore). Ref: optimizer.variables
  std::vector<Variable> variables() const;
  // A slot of `var` by its stored name (slot_names) or its Keras 3 name: Adam "momentum" (m),
  // "velocity" (v), "velocity_hat" (vhat); RMSprop "velocity" (rms), "momentum",
  // "average_gradient" (mg); SGD "momentum"; Adagrad "accumulator".
  // Errors: std::invalid_argument for an untracked variable or an unknown name (lists the slots).
  Variable get_slot(const Variable& var, const std::string& slot) const;
  // Slot names of one variable, in creation order, as stored: the TF-Keras 2 names that the slot
  // variables and weight files use ("m", "v", "vhat", "rms", "mg", "momentum", "accumulator").
  std::vector<std::string> slot_names(const Variable& var) const;
  // Keras's optimizer config (optimizers/serialization.h): class name via class_name(), fields as
  // tf.keras 2.15 writes them. Errors: std::logic_error for a class that does not implement it.
  virtual Config get_config() const;
  // Keras's class name in configs ("Adam", "SGD", ...); serialize() writes it, deserialize() reads it.
  virtual std::string class_name() const { return "Optimizer"; }
  // Slot names in the order Keras creates an optimizer's variables: each inner list is one pass
  // over the model variables creating those slots per variable (Adam: {{"m", "v"}, {"vhat"}};
  // RMSprop: {{"rms"}, {"momentum"}, {"mg"}}). Default: one pass over every slot.
  virtual std::vector<std::vector<std::string>> keras_slot_order() const { return {}; }

 protected:
  // Errors: std::invalid_argument for both clipnorm and global_clipnorm set, a clip value <= 0 or
  // weight_decay < 0 (names the optimizer, the option and the value).
  explicit Optimizer(OptimizerConfig config);
  // Creates the slots of one variable with add_slot (default: none).
  virtual void build_slots(const Variable& var) {}
  // Updates `var` in place from `grad` (same shape and dtype, already clipped) at learning rate lr.
  // iterations() is the number of earlier steps (Keras's local_step = iterations() + 1).
  virtual void update_step(const Tensor& grad, const Variable& var, double lr) = 0;

  // A non-trainable slot like `var` filled with `initial_value`.
  Variable add_slot(const Variable& var, const std::string& slot, double initial_value = 0.0);
  // Throws std::invalid_argument "<name>: <what>, got <value>" unless ok (constructor checks).
  void require(bool ok, const char* what, double value) const;
  // A slot made by add_slot, by stored name or alias. Errors: std::invalid_argument if absent.
  const Variable& slot(const Variable& var, const std::string& slot) const;
  // Lets get_slot find stored slot `slot` under `alias` too (its Keras 3 name).
  void add_slot_alias(std::string alias, std::string slot);

 private:
  struct Tracked {
    Variable var;
    std::vector<std::pair<std::string, Variable>> slots;
  };
  const Tracked& tracked(const Variable& var, const char* what) const;
  void apply(std::vector<std::pair<Tensor, Variable>>& pairs);

  OptimizerConfig config_;
  Variable iterations_;
  std::vector<Tracked> tracked_;
  std::unordered_map<std::int64_t, std::size_t> index_;  // handle id -> tracked_ index
  std::vector<std::pair<std::string, std::string>> slot_aliases_;  // alias -> stored slot name
};

}  // namespace tapeflow::optimizers
