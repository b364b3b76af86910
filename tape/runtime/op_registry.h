// OpRegistry: every op, by name. Registration is explicit (register_*_ops lists).
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "tape/runtime/op_def.h"

namespace tapeflow {

// The global op registry (one of the three pieces of global state, with the tape stack and the logger).
// Built-in ops are registered on first use. OpDef addresses are stable for the process lifetime.
class OpRegistry {
 public:
  // Defined in tape/ops/register_ops.cc, which fills it with the built-in op families.
  static OpRegistry& global();

  // Adds a new op. Errors: std::invalid_argument if the name is taken or forward is empty.
  const OpDef& add(OpDef def);
  // Errors: std::invalid_argument "unknown op 'X'".
  const OpDef& get(const std::string& name) const;
  // The op named `name`, or null if none is registered (get() throws instead).
  const OpDef* find(const std::string& name) const;
  // Replaces the gradient of a registered op (tf.RegisterGradient for an existing op type).
  // The registry is global: change it with caution. Errors: std::invalid_argument for an unknown op.
  void set_gradient(const std::string& name, GradientFn gradient);
  // Names of every registered op, in registration order.
  std::vector<std::string> names() const;

 private:
  OpRegistry() = default;
  mutable std::mutex mutex_;
  std::deque<OpDef> ops_;
};

// Looks an op up once and caches the reference: `static const OpDef& kMul = op_def("Mul");`
inline const OpDef& op_def(const std::string& name) { return OpRegistry::global().get(name); }

// Registers a user op with forward and gradient (tf.RegisterGradient + a new op); returns it.
const OpDef& register_op(OpDef def);

}  // namespace tapeflow
