// 1-D pooling layers over steps: MaxPooling1D, AveragePooling1D.
//
// Shapes:   [N, steps, C] -> [N, out_steps, C] ("valid": (steps - pool_size) / strides + 1, "same":
//           ceil(steps / strides)).
// Weights:  none.
// Facts:    strides default to pool_size (Keras's strides=None). Runs as max_pool2d / avg_pool2d on a
//           [N, 1, steps, C] image (gradients of any order are theirs). "same" average pooling divides
//           by the number of unpadded steps (TF). channels_last only. `training` changes nothing.
// Errors:   std::invalid_argument at construction for a pool size or stride < 1 or a padding other
//           than "valid"/"same"; at call for inputs that are not rank 3 or shorter than the window
//           (names the layer and the shape).
// Ref:      keras/src/layers/pooling/max_pooling1d.py, average_pooling1d.py, base_pooling.py
#pragma once

#include <optional>

#include "layers/layer.h"

namespace tapeflow::layers {

struct Pooling1DOptions {
  std::int64_t pool_size = 2;
  std::optional<std::int64_t> strides = std::nullopt;  // default: pool_size
  std::string padding = "valid";
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;  // empty: float32 or the enclosing model's; inputs are cast to it
};

// Shared by MaxPooling1D and AveragePooling1D.
class Pooling1D : public Layer {
 public:
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  std::int64_t pool_size() const { return pool_size_; }
  std::int64_t strides() const { return strides_; }
  const std::string& padding() const { return padding_; }
  nlohmann::json get_config() const override;  // Keras's pool_size/strides as 1-element lists, padding, data_format

 protected:
  Pooling1D(const char* class_name, bool max, Pooling1DOptions options);
  template <class L>
  static std::shared_ptr<L> make_from_config(const nlohmann::json& config, const char* class_name);

 private:
  bool max_;
  std::int64_t pool_size_, strides_;
  std::string padding_;
};

class MaxPooling1D : public Pooling1D {
 public:
  explicit MaxPooling1D(Pooling1DOptions options = {});
  static std::shared_ptr<MaxPooling1D> from_config(const nlohmann::json& config);
};

class AveragePooling1D : public Pooling1D {
 public:
  explicit AveragePooling1D(Pooling1DOptions options = {});
  static std::shared_ptr<AveragePooling1D> from_config(const nlohmann::json& config);
};

}  // namespace tapeflow::layers
