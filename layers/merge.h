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

struct MergeOptions {
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the dtype of the model it joins
};

// The shared part: checks the input list, then merge().
class Merge : public Layer {
 public:
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  nlohmann::json get_config() const override;

 protected:
  Merge(const char* class_name, const MergeOptions& options);
  // Errors: std::invalid_argument when the shapes do not fit (the default: all shapes equal).
  virtual void check_shapes(const std::vector<Tensor>& inputs) const;
  virtual Tensor merge(const std::vector<Tensor>& inputs) const = 0;
  std::string shapes_string(const std::vector<Tensor>& inputs) const;
};

class Add : public Merge {
 public:
  explicit Add(MergeOptions options = {}) : Merge("Add", options) {}
  static std::shared_ptr<Add> from_config(const nlohmann::json& config);

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override;
};

class Multiply : public Merge {
 public:
  explicit Multiply(MergeOptions options = {}) : Merge("Multiply", options) {}
  static std::shared_ptr<Multiply> from_config(const nlohmann::json& config);

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override;
};

class Average : public Merge {
 public:
  explicit Average(MergeOptions options = {}) : Merge("Average", options) {}
  static std::shared_ptr<Average> from_config(const nlohmann::json& config);

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override;
};

struct ConcatenateOptions {
  int axis = -1;
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the dtype of the model it joins
};

class Concatenate : public Merge {
 public:
  explicit Concatenate(ConcatenateOptions options = {});
  nlohmann::json get_config() const override;
  static std::shared_ptr<Concatenate> from_config(const nlohmann::json& config);
  int axis() const { return axis_; }

 protected:
  void check_shapes(const std::vector<Tensor>& inputs) const override;
  Tensor merge(const std::vector<Tensor>& inputs) const override;

 private:
  int axis_;
};

}  // namespace tapeflow::layers
