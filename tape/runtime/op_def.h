// OpDef: the one place an op is declared (forward kernel, gradient, what backward keeps).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <type_traits>

#include "tape/core/small_vector.h"
#include "tape/core/tensor.h"
#include "tape/runtime/attrs.h"

namespace tapeflow {

// Inputs/outputs of one op call. An undefined Tensor in a gradient list means "no gradient" (None).
using TensorList = SmallVector<Tensor, 3>;

// What a recorded op call keeps alive for its gradient: DESIGN: drop what backward does not need.
enum SaveFlags : std::uint8_t { kSaveNone = 0, kSaveInputs = 1, kSaveOutputs = 2, kSaveAll = 3 };

// What a gradient function sees of the recorded forward call.
class GradContext {
 public:
  // Views of one recorded call (the tape makes it; spans must outlive the context). `needed` marks the
  // inputs whose gradient is used (empty: all); `output_shapes` may be empty if no gradient asks for them.
  GradContext(std::span<const Tensor> inputs, std::span<const Tensor> outputs, std::span<const Shape> input_shapes,
              std::span<const DType> input_dtypes, const Attrs& attrs, const char* op_name,
              std::span<const char> needed = {}, std::span<const Shape> output_shapes = {})
      : inputs_(inputs), outputs_(outputs), input_shapes_(input_shapes), output_shapes_(output_shapes),
        input_dtypes_(input_dtypes), attrs_(attrs), op_name_(op_name), needed_(needed) {}
  // Whether the backward pass uses input i's gradient (false: the gradient may return none for it).
  bool needs_gradient(int i) const { return needed_.empty() || needed_[static_cast<std::size_t>(i)] != 0; }
  // Saved forward input i. Errors: std::logic_error if the op's SaveFlags do not keep inputs.
  const Tensor& input(int i) const;
  // Saved forward output i. Errors: std::logic_error if the op's SaveFlags do not keep outputs.
  const Tensor& output(int i) const;
  // Shapes of the forward call. Take shapes from here, never from the output gradients: in a
  // vectorized jacobian/hessian the gradients carry an extra leading dimension (batching.h).
  const Shape& input_shape(int i) const { return input_shapes_[static_cast<std::size_t>(i)]; }
  // Errors: std::logic_error if the caller did not provide output shapes.
  const Shape& output_shape(int i) const;
  // The dtype of forward input i.
  DType input_dtype(int i) const { return input_dtypes_[static_cast<std::size_t>(i)]; }
  // Number of forward inputs (one gradient is returned per input).
  int num_inputs() const { return static_cast<int>(input_shapes_.size()); }
  // The attributes of the forward call.
  const Attrs& attrs() const { return attrs_; }
  // The op's registered name (for error messages).
  const char* op_name() const { return op_name_; }

 private:
  std::span<const Tensor> inputs_, outputs_;
  std::span<const Shape> input_shapes_, output_shapes_;
  std::span<const DType> input_dtypes_;
  const Attrs& attrs_;
  const char* op_name_;
  std::span<const char> needed_;
};

// Computes the outputs of an op from its inputs. Validates shapes/dtypes and throws
// std::invalid_argument naming the op and what it received.
using ForwardFn = std::function<TensorList(std::span<const Tensor> inputs, const Attrs& attrs)>;
// Returns one gradient per input (undefined = none) from one gradient per output (an output that
// received no gradient gets zeros, or an undefined Tensor for ops with OpDef::takes_missing_grads;
// an integer output gets an undefined Tensor). Written with
// tapeflow ops so it is itself recorded.
using GradientFn = std::function<TensorList(const GradContext& ctx, std::span<const Tensor> output_grads)>;

struct OpDef;
class BatchScope;

// What a batching rule sees of one call: which inputs carry the leading batch dimension of size K.
// Batched inputs are physically [K, per-example shape...]; attrs are in per-example terms.
class BatchContext {
 public:
  // Views of one batched call (made by execute_batched; spans must outlive the context): `batched`
  // and `one_hot` mark each input, `scope` materialises one-hot inputs (dense()).
  BatchContext(const OpDef& op, const Attrs& attrs, std::int64_t size, std::span<const Tensor> inputs,
               std::span<const char> batched, std::span<const char> one_hot = {}, BatchScope* scope = nullptr)
      : op_(op), attrs_(attrs), size_(size), inputs_(inputs), batched_(batched), one_hot_(one_hot), scope_(scope) {}
  // K, the batch size of the batched inputs.
  std::int64_t size() const { return size_; }
  // True if input i carries the leading K (physically [K, per-example shape...]).
  bool batched(int i) const { return batched_[static_cast<std::size_t>(i)] != 0; }
  // Per-example shape of input i (its physical shape without the leading K when batched).
  Shape shape(int i) const;
  // Number of inputs of the call.
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // The call's attributes, in per-example terms.
  const Attrs& attrs() const { return attrs_; }
  // The op being batched.
  const OpDef& op() const { return op_; }
  // Internal optimisation (batch_jacobian): input i is in one-hot form, physically the per-example
  // scale s with value[k, i, j] = δ(j, offset + k) s[i, j] (see tape/runtime/batching.h). Only seen
  // by rules with BatchRule::accepts_one_hot(); others receive the dense [K, ...] tensor.
  bool one_hot(int i) const { return !one_hot_.empty() && one_hot_[static_cast<std::size_t>(i)] != 0; }
  // Input i as a dense [K, ...] tensor (a one-hot input materialised, an unbatched one broadcast).
  Tensor dense(int i) const;
  // The one-hot form's first column (see one_hot()); -1 when the form is off.
  std::int64_t one_hot_offset() const;
  // One-hot rules: declares output i to be in one-hot form (its physical value is the scale).
  void mark_one_hot_output(int i) const { one_hot_outputs_ |= 1u << i; }
  // True if the rule declared output i one-hot (mark_one_hot_output).
  bool one_hot_output(int i) const { return (one_hot_outputs_ >> i) & 1u; }

 private:
  const OpDef& op_;
  const Attrs& attrs_;
  std::int64_t size_;
  std::span<const Tensor> inputs_;
  std::span<const char> batched_, one_hot_;
  BatchScope* scope_;
  mutable std::uint32_t one_hot_outputs_ = 0;
};

// How an op runs when some inputs carry an extra leading dimension K (the vectorized jacobian /
// hessian run the ordinary backward pass with K cotangents, and every op its gradient functions
// execute dispatches here). Returns every output batched: [K, per-example output shape]. Written
// with tapeflow ops on physical tensors (batching is suspended inside a rule), so active tapes record
// what it does and the vectorized result stays differentiable. Any callable
// (std::span<const Tensor> inputs, const BatchContext&) -> TensorList converts to a BatchRule.
// Ready-made rules: tape/ops/internal/batching_rules.h.
class BatchRule {
 public:
  // The rule's signature: batched outputs from the physical inputs and the call's context.
  using Fn = std::function<TensorList(std::span<const Tensor> inputs, const BatchContext& ctx)>;
  BatchRule() = default;
  // Wraps any callable of the Fn signature; accepts_one_hot: it also handles one-hot-form inputs.
  template <class F>
    requires std::is_constructible_v<Fn, F> && (!std::is_same_v<std::decay_t<F>, BatchRule>)
  BatchRule(F fn, bool accepts_one_hot = false)  // NOLINT: implicit, so `.batch = my_rule` reads naturally
      : fn_(std::move(fn)), one_hot_(accepts_one_hot) {}
  // True if a rule is set (an OpDef without one cannot batch).
  explicit operator bool() const { return static_cast<bool>(fn_); }
  // Runs the rule (std::bad_function_call if none is set).
  TensorList operator()(std::span<const Tensor> inputs, const BatchContext& ctx) const { return fn_(inputs, ctx); }
  // Internal optimisation: the rule also accepts one-hot-form inputs (BatchContext::one_hot).
  bool accepts_one_hot() const { return one_hot_; }

 private:
  Fn fn_;
  bool one_hot_ = false;
};

// One op, one entry: forward kernel, gradient, what backward keeps, and how it batches.
struct OpDef {
  std::string name;        // TensorFlow's op name where one exists ("Mul", "MatMul")
  ForwardFn forward;       // the kernel: outputs from inputs and attrs (validates them)
  GradientFn gradient;     // empty: not differentiable; such ops are never recorded on tapes
  std::uint8_t saves = kSaveInputs;  // SaveFlags: what a recorded call keeps for the gradient
  BatchRule batch;         // how it runs on batched inputs; a differentiable op needs this or loop_only
  // Explicitly cannot batch: vectorized jacobian / batch_jacobian / hessian through it take the loop
  // of backward passes (logged at warning level once per op name).
  bool loop_only = false;
  // Checks the attribute values on their own, before any input is seen: presence and type, list
  // lengths, ranges, shapes that can exist (helpers in attrs.h); throws std::invalid_argument naming
  // the op, the attribute and its value. FunctionGraph::deserialize runs it on every node, so a
  // crafted program fails when it is loaded, not when it is called. The forward still checks what
  // depends on the inputs (execute() does not call this: the public functions build valid attrs).
  // Empty: the op has no attributes whose value can be wrong.
  std::function<void(const Attrs& attrs)> check_attrs;
  // The gradient takes an undefined gradient for a floating output that received none and reads it
  // as zeros itself, so the tape passes it undefined instead of making zeros of the output's shape:
  // for ops whose large outputs are there for their own backward (BlockLSTM's gates of every step).
  bool takes_missing_grads = false;
};

}  // namespace tapeflow
