// Variable: a named, mutable holder of a Tensor whose reads can be watched by GradientTape.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tape/core/tensor.h"

namespace tapeflow {

// Keras/TF keyword arguments of tf.Variable.
struct VariableOptions {
  // Shown as '<name>:0'; optimizer slots and checkpoint weights are named after it.
  std::string name = "Variable";
  bool trainable = true;           // gradients wanted: tapes watch it when read, optimizers update it
  std::optional<DType> dtype;  // convert the initial value to this dtype
};

// A mutable value with a stable identity (its handle id). Reading it while a GradientTape is
// recording makes the tape watch it (if trainable and the tape watches accessed variables) and
// records the read, so gradients flow to the variable. assign / assign_add / assign_sub are never
// recorded. Copies of a Variable share the same underlying variable (like Python references).
// DTypes: any; only float32/float64 variables get gradients.
// Errors: assign* throw std::invalid_argument on shape or dtype mismatch (naming the variable).
// Ref: tf.Variable
class Variable {
 public:
  Variable() = default;
  Variable(const Tensor& initial_value, VariableOptions options = {});  // NOLINT: like tf.Variable(x)
  // A scalar variable: float32 (TF's default for Python floats) unless options.dtype says otherwise.
  Variable(double value, VariableOptions options = {}) : Variable(Tensor(value), std::move(options)) {}
  // A scalar variable: int32 (TF's default for Python ints) unless options.dtype says otherwise.
  Variable(int value, VariableOptions options = {}) : Variable(Tensor(value), std::move(options)) {}

  // False for a default-constructed Variable (every other member then throws std::logic_error).
  bool defined() const { return impl_ != nullptr; }
  // VariableOptions::name (without TF's ":0" suffix).
  const std::string& name() const;
  // Whether tapes watch it when read and optimizers / Model::fit update it.
  bool trainable() const;
  // Changes trainable() for this variable and every copy sharing it (Keras's layer.trainable).
  void set_trainable(bool trainable);
  // The stable id tapes track this variable's reads by (unlike value().id(), it never changes).
  std::int64_t handle_id() const;
  // The value's shape (fixed: assign needs the same shape).
  const Shape& shape() const { return value().shape(); }
  // The value's dtype (fixed: assign needs the same dtype).
  DType dtype() const { return value().dtype(); }

  // Reads the value as a tape-visible tensor (records a read on tapes that watch this variable).
  Tensor read() const;
  // read(): a Variable converts to a tape-visible Tensor wherever one is expected.
  operator Tensor() const { return read(); }  // NOLINT: variables are usable wherever a Tensor is
  // The current value, invisible to tapes (for optimizers, checkpoints and printing).
  Tensor value() const;

  // Copies `value`'s elements into the variable (never recorded). Errors: std::invalid_argument naming
  // the variable and both shapes/dtypes unless value has its shape and dtype. Ref: tf.Variable.assign
  void assign(const Tensor& value) const;
  // Makes `value` the variable's value without copying its elements: they are shared, which is
  // safe because tensors never change and in-place updates (mutable_data_for_update) copy first
  // while anything else still references them. For loads that hand over freshly read tensors.
  void assign_shared(const Tensor& value) const;
  // value += delta element-wise, in place (never recorded). Errors: as assign, and for a bool
  // variable. Ref: tf.Variable.assign_add
  void assign_add(const Tensor& delta) const;
  // value -= delta element-wise, in place (never recorded). Errors: as assign_add.
  // Ref: tf.Variable.assign_sub
  void assign_sub(const Tensor& delta) const;
  // Writable elements for an in-place update (optimizers): copies first if the current value is
  // shared with live tensors, so values saved by tapes never change under them.
  void* mutable_raw_data_for_update() const;
  template <typename T>
  T* mutable_data_for_update() const {
    (void)value().data<T>();  // dtype check
    return static_cast<T*>(mutable_raw_data_for_update());
  }

  // True if both handles refer to the same underlying variable (copies of one Variable).
  bool same_as(const Variable& other) const { return impl_ == other.impl_; }
  // "<tf.Variable 'name:0' shape=() dtype=float32, numpy=20.0>"
  std::string to_string() const;

 private:
  struct Impl;
  const Impl& impl() const;
  std::shared_ptr<Impl> impl_;
};

// Writes v.to_string(): "<tf.Variable 'name:0' shape=() dtype=float32, numpy=20.0>".
std::ostream& operator<<(std::ostream& os, const Variable& v);

}  // namespace tapeflow
