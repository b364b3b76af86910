// Merge layers: Add, Multiply, Average (element-wise over equal shapes) and Concatenate (along an axis).
//
// Shapes:   Add / Multiply / Average: n >= 2 inputs of one shape -> that shape.
//           Concatenate: n >= 2 inputs of one rank, equal except on `axis` (default -1) -> the
//           sum of the sizes on `axis`.
// Facts:    built from the add / multiply / concat ops, so gradients (of any order) come free.
//           No weights; `training` changes nothing. Called on one tensor they throw.
// Errors:   std::invalid_argument naming the layer and every input shape for fewer than 2 inputs,
//           different shapes (Concatenate: ranks, or sizes off the axis), or an axis out of range.
// Ref:      keras/src/layers/merging/add.py, multiply.py, average.py, concatenate.py
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// Add's, Multiply's and Average's keyword arguments. Ref: keras.layers.Add
struct MergeOptions {
  // The layer's name; empty: the unique snake_case class name ("add", "multiply", "average", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// The shared part: checks the input list, then merge().
class Merge : public Layer {
 public:
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  Config get_config() const override;

 protected:
  // class_name: "Add", "Multiply", "Average" or "Concatenate".
  Merge(const char* class_name, const MergeOptions& options);
  // Errors: std::invalid_argument when the shapes do not fit (the default: all shapes equal).
  virtual void check_shapes(const std::vector<Tensor>& inputs) const;
  // The merged tensor of >= 2 inputs that passed check_shapes().
  virtual Tensor merge(const std::vector<Tensor>& inputs) const = 0;
  // "[2, 3], [2, 4]": the inputs' shapes for error messages.
  std::string shapes_string(const std::vector<Tensor>& inputs) const;
};

// The element-wise sum of the inputs. Shapes: n >= 2 inputs of one shape -> that shape.
// Ref: keras.layers.Add
class Add : public Merge {
 public:
  // Makes the layer (no weights; the shapes are checked at call).
  explicit Add(MergeOptions options = {}) : Merge("Add", options) {}
  // Builds an Add from its Keras config (name, trainable, dtype; unknown fields ignored).
  // Errors: std::invalid_argument naming the field for a mistyped name or dtype.
  static std::shared_ptr<Add> from_config(const Config& config);

 protected:
  // The element-wise sum of the inputs, folded left to right.
  Tensor merge(const std::vector<Tensor>& inputs) const override;
};

// The element-wise product of the inputs. Shapes: n >= 2 inputs of one shape -> that shape.
// Ref: keras.layers.Multiply
class Multiply : public Merge {
 public:
  // Makes the layer (no weights; the shapes are checked at call).
  explicit Multiply(MergeOptions options = {}) : Merge("Multiply", options) {}
  // Builds a Multiply from its Keras config (name, trainable, dtype; unknown fields ignored).
  // Errors: std::invalid_argument naming the field for a mistyped name or dtype.
  static std::shared_ptr<Multiply> from_config(const Config& config);

 protected:
  // The element-wise product of the inputs, folded left to right.
  Tensor merge(const std::vector<Tensor>& inputs) const override;
};

// The element-wise mean of the inputs. Shapes: n >= 2 inputs of one shape -> that shape.
// Ref: keras.layers.Average
class Average : public Merge {
 public:
  // Makes the layer (no weights; the shapes are checked at call).
  explicit Average(MergeOptions options = {}) : Merge("Average", options) {}
  // Builds an Average from its Keras config (name, trainable, dtype; unknown fields ignored).
  // Errors: std::invalid_argument naming the field for a mistyped name or dtype.
  static std::shared_ptr<Average> from_config(const Config& config);

 protected:
  // The sum of the inputs times 1/n.
  Tensor merge(const std::vector<Tensor>& inputs) const override;
};

// Concatenate's keyword arguments. Ref: keras.layers.Concatenate
struct ConcatenateOptions {
  // The axis to concatenate along (default -1, the last; negative counts from the end).
  int axis = -1;
  // The layer's name; empty: the unique snake_case class name ("concatenate", "concatenate_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Joins the inputs along `axis`. Shapes: n >= 2 inputs of one rank, equal except on axis ->
// the sum of their sizes on axis. Ref: keras.layers.Concatenate
class Concatenate : public Merge {
 public:
  // Makes the layer (no weights; the axis and shapes are checked at call).
  explicit Concatenate(ConcatenateOptions options = {});
  Config get_config() const override;
  // Builds a Concatenate from its Keras config (axis, default -1; unknown fields ignored).
  // Errors: std::invalid_argument naming the field for a non-integer axis.
  static std::shared_ptr<Concatenate> from_config(const Config& config);
  // The concatenation axis as given (may be negative).
  int axis() const { return axis_; }

 protected:
  void check_shapes(const std::vector<Tensor>& inputs) const override;
  // concat(inputs, axis).
  Tensor merge(const std::vector<Tensor>& inputs) const override;

 private:
  int axis_;
};

}  // namespace tapeflow::layers
