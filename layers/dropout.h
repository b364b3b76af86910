// Dropout: in training, zeroes each element with probability `rate` and scales the rest by
// 1/(1 - rate); the identity otherwise.
//
// Shapes:   any; same shape out.
// Facts:    the mask comes from the layer's Generator (seeded by `.seed`), which advances on every
//           training call, so masks differ between steps but repeat run to run. The mask is a
//           constant: one recorded multiply, gradient g·mask. rate = 0 is the identity.
// Errors:   std::invalid_argument for rate outside [0, 1).
// Ref:      keras/src/layers/regularization/dropout.py, tf.nn.dropout
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

struct DropoutOptions {
  double rate = 0.0;
  std::optional<std::uint64_t> seed = std::nullopt;
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;  // empty: float32, or the dtype of the model it joins
};

class Dropout : public Layer {
 public:
  explicit Dropout(DropoutOptions options);
  explicit Dropout(double rate) : Dropout(DropoutOptions{.rate = rate}) {}
  Tensor call(const Tensor& inputs, bool training) override;
  nlohmann::json get_config() const override;  // rate, noise_shape (null), seed
  static std::shared_ptr<Dropout> from_config(const nlohmann::json& config);
  double rate() const { return options_.rate; }
  Generator* training_generator() override { return &generator(); }

 private:
  DropoutOptions options_;
};

}  // namespace tapeflow::layers
