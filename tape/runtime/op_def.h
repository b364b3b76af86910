// OpDef: the one place an op is declared (forward kernel, gradient, what backward keeps).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

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
  GradContext(std::span<const Tensor> inputs, std::span<const Tensor> outputs, std::span<const Shape> input_shapes,
              std::span<const DType> input_dtypes, const Attrs& attrs, const char* op_name,
              std::span<const char> needed = {})
      : inputs_(inputs), outputs_(outputs), input_shapes_(input_shapes), input_dtypes_(input_dtypes),
        attrs_(attrs), op_name_(op_name), needed_(needed) {}
  // Whether the backward pass uses input i's gradient (false: the gradient may return none for it).
  bool needs_gradient(int i) const { return needed_.empty() || needed_[static_cast<std::size_t>(i)] != 0; }
  // Saved forward input i. Errors: std::logic_error if the op's SaveFlags do not keep inputs.
  const Tensor& input(int i) const;
  // Saved forward output i. Errors: std::logic_error if the op's SaveFlags do not keep outputs.
  const Tensor& output(int i) const;
  const Shape& input_shape(int i) const { return input_shapes_[static_cast<std::size_t>(i)]; }
  DType input_dtype(int i) const { return input_dtypes_[static_cast<std::size_t>(i)]; }
  int num_inputs() const { return static_cast<int>(input_shapes_.size()); }
  const Attrs& attrs() const { return attrs_; }
  const char* op_name() const { return op_name_; }

 private:
  std::span<const Tensor> inputs_, outputs_;
  std::span<const Shape> input_shapes_;
  std::span<const DType> input_dtypes_;
  const Attrs& attrs_;
  const char* op_name_;
  std::span<const char> needed_;
};

// Computes the outputs of an op from its inputs. Validates shapes/dtypes and throws
// std::invalid_argument naming the op and what it received.
using ForwardFn = std::function<TensorList(std::span<const Tensor> inputs, const Attrs& attrs)>;
// Returns one gradient per input (undefined = none) from one gradient per output (an output that
// received no gradient gets zeros). Written with tapeflow ops so it is itself recorded.
using GradientFn = std::function<TensorList(const GradContext& ctx, std::span<const Tensor> output_grads)>;

struct OpDef {
  std::string name;        // TensorFlow's op name where one exists ("Mul", "MatMul")
  ForwardFn forward;
  GradientFn gradient;     // empty: not differentiable; such ops are never recorded on tapes
  std::uint8_t saves = kSaveInputs;
};

}  // namespace tapeflow
