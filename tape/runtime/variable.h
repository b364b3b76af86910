// Variable: a named, mutable holder of a Tensor whose reads can be watched by GradientTape.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tape/core/tensor.h"

namespace tapeflow {

// Keras/TF keyword arguments of tf.Variable.
struct VariableOptions {
  std::string name = "Variable";
  bool trainable = true;
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
  Variable(double value, VariableOptions options = {}) : Variable(Tensor(value), std::move(options)) {}
  Variable(int value, VariableOptions options = {}) : Variable(Tensor(value), std::move(options)) {}

  bool defined() const { return impl_ != nullptr; }
  const std::string& name() const;
  bool trainable() const;
  void set_trainable(bool trainable);
  std::int64_t handle_id() const;
  const Shape& shape() const { return value().shape(); }
  DType dtype() const { return value().dtype(); }

  // Reads the value as a tape-visible tensor (records a read on tapes that watch this variable).
  Tensor read() const;
  operator Tensor() const { return read(); }  // NOLINT: variables are usable wherever a Tensor is
  // The current value, invisible to tapes (for optimizers, checkpoints and printing).
  Tensor value() const;

  void assign(const Tensor& value) const;
  // Makes `value` the variable's value without copying its elements: they are shared, which is
  // safe because tensors never change and in-place updates (mutable_data_for_update) copy first
  // while anything else still references them. For loads that hand over freshly read tensors.
  void assign_shared(const Tensor& value) const;
  void assign_add(const Tensor& delta) const;
  void assign_sub(const Tensor& delta) const;
  // Writable elements for an in-place update (optimizers): copies first if the current value is
  // shared with live tensors, so values saved by tapes never change under them.
  void* mutable_raw_data_for_update() const;
  template <typename T>
  T* mutable_data_for_update() const {
    (void)value().data<T>();  // dtype check
    return static_cast<T*>(mutable_raw_data_for_update());
  }

  bool same_as(const Variable& other) const { return impl_ == other.impl_; }
  // "<tf.Variable 'name:0' shape=() dtype=float32, numpy=20.0>"
  std::string to_string() const;

 private:
  struct Impl;
  const Impl& impl() const;
  std::shared_ptr<Impl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Variable& v);

}  // namespace tapeflow
