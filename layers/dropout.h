// Dropout: in training, zeroes each element with probability `rate` and scales the rest by
// 1/(1 - rate); the identity otherwise.
//
// Shapes:   any; same shape out.
// Facts:    the mask comes from the layer's Generator (seeded by `.seed`), which advances on every
//           training call, so masks differ between steps but repeat run to run. The mask is a
//           constant, drawn packed (Generator::fill_keep_bits, 1 bit per element): one recorded
//           apply_dropout_mask (the bits of x · mask), gradient the same mask on g. rate = 0 is the
//           identity.
// Errors:   std::invalid_argument for rate outside [0, 1).
// Ref:      keras/src/layers/regularization/dropout.py, tf.nn.dropout
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// Dropout's keyword arguments, in Keras's order. Ref: keras.layers.Dropout
struct DropoutOptions {
  // Fraction of the inputs dropped in training, in [0, 1); 0 (default): the identity.
  double rate = 0.0;
  // Seeds the layer's Generator (the masks); empty: the process-wide default sequence.
  std::optional<std::uint64_t> seed = std::nullopt;
  // The layer's name; empty: the unique snake_case class name ("dropout", "dropout_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// In training zeroes each element with probability rate and scales the rest by 1/(1 - rate);
// the identity in inference. Shapes: any -> the same. Ref: keras.layers.Dropout
class Dropout : public Layer {
 public:
  // Errors: std::invalid_argument for rate outside [0, 1) (names the layer and the rate).
  explicit Dropout(DropoutOptions options);
  // Dropout({.rate = rate}), as keras.layers.Dropout(rate).
  explicit Dropout(double rate) : Dropout(DropoutOptions{.rate = rate}) {}
  Tensor call(const Tensor& inputs, bool training) override;
  Config get_config() const override;  // rate, noise_shape (null), seed
  // Builds a Dropout from its Keras config ("rate" required, "seed"; unknown fields ignored).
  // Errors: std::invalid_argument naming the field for a missing rate or one outside [0, 1), a
  // noise_shape that is not null, a negative seed.
  static std::shared_ptr<Dropout> from_config(const Config& config);
  // The drop probability.
  double rate() const { return options_.rate; }
  Generator* training_generator() override { return &generator(); }

 private:
  DropoutOptions options_;
};

}  // namespace tapeflow::layers
