// 2-D pooling layers: MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, GlobalMaxPooling2D.
//
// Shapes:   MaxPooling2D / AveragePooling2D: [N, H, W, C] -> [N, Ho, Wo, C] ("valid": floor((H - k) / s) + 1,
//           "same": ceil(H / s)); Global*: [N, H, W, C] -> [N, C] ([N, 1, 1, C] with keepdims).
// Weights:  none.
// Facts:    strides default to pool_size (Keras's strides=None). "same" average pooling divides by
//           the number of unpadded elements (TF). channels_last only. `training` changes nothing.
// Errors:   std::invalid_argument at construction for a pool size or stride < 1 or a padding other
//           than "valid"/"same"; at call for inputs that are not rank 4 or too small for the window
//           (names the layer and the shape).
// Ref:      keras/src/layers/pooling/max_pooling2d.py, average_pooling2d.py,
//           global_average_pooling2d.py, global_max_pooling2d.py
#pragma once

#include <array>
#include <optional>

#include "layers/layer.h"

namespace tapeflow::layers {

struct Pooling2DOptions {
  std::array<std::int64_t, 2> pool_size = {2, 2};
  std::optional<std::array<std::int64_t, 2>> strides = std::nullopt;  // default: pool_size
  std::string padding = "valid";
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;  // empty: float32 or the enclosing model's; inputs are cast to it
};

// Shared by MaxPooling2D and AveragePooling2D.
class Pooling2D : public Layer {
 public:
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  const std::array<std::int64_t, 2>& pool_size() const { return pool_size_; }
  const std::array<std::int64_t, 2>& strides() const { return strides_; }
  const std::string& padding() const { return padding_; }
  nlohmann::json get_config() const override;  // Keras's pool_size/padding/strides/data_format

 protected:
  Pooling2D(const char* class_name, bool max, Pooling2DOptions options);

 private:
  bool max_;
  std::array<std::int64_t, 2> pool_size_, strides_;
  std::string padding_;
};

class MaxPooling2D : public Pooling2D {
 public:
  explicit MaxPooling2D(Pooling2DOptions options = {});
  static std::shared_ptr<MaxPooling2D> from_config(const nlohmann::json& config);
};

class AveragePooling2D : public Pooling2D {
 public:
  explicit AveragePooling2D(Pooling2DOptions options = {});
  static std::shared_ptr<AveragePooling2D> from_config(const nlohmann::json& config);
};

struct GlobalPooling2DOptions {
  bool keepdims = false;
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;
};

// Shared by GlobalAveragePooling2D and GlobalMaxPooling2D.
class GlobalPooling2D : public Layer {
 public:
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  bool keepdims() const { return keepdims_; }
  nlohmann::json get_config() const override;  // Keras's data_format/keepdims

 protected:
  GlobalPooling2D(const char* class_name, bool max, GlobalPooling2DOptions options);

 private:
  bool max_;
  bool keepdims_;
};

class GlobalAveragePooling2D : public GlobalPooling2D {
 public:
  explicit GlobalAveragePooling2D(GlobalPooling2DOptions options = {});
  static std::shared_ptr<GlobalAveragePooling2D> from_config(const nlohmann::json& config);
};

class GlobalMaxPooling2D : public GlobalPooling2D {
 public:
  explicit GlobalMaxPooling2D(GlobalPooling2DOptions options = {});
  static std::shared_ptr<GlobalMaxPooling2D> from_config(const nlohmann::json& config);
};

}  // namespace tapeflow::layers
