// Permute: permutes the non-batch axes of every example.
//
// Shapes:   [b, d1, ..., dn] -> [b, d_dims[0], ..., d_dims[n-1]].
// Facts:    dims counts from 1 (the batch axis 0 stays), as Keras. One transpose op.
// Errors:   std::invalid_argument for dims that are not a permutation of 1..n (at construction), or
//           inputs whose rank is not len(dims) + 1 (names the layer and the shapes).
// Ref:      keras/src/layers/reshaping/permute.py
#pragma once

#include "layers/layer.h"

namespace tapeflow::layers {

// Permute's keyword arguments. Ref: keras.layers.Permute
struct PermuteOptions {
  // The permutation of the non-batch axes, counting from 1 (Keras's dims): {2, 1} swaps the
  // two axes of [b, d1, d2]. Must be a permutation of 1..n.
  std::vector<int> dims;
  // The layer's name; empty: the unique snake_case class name ("permute", "permute_1", ...).
  std::string name = "";
  // The layer's dtype (float32 or float64); empty: float32, or the dtype of the model it joins.
  std::optional<DType> dtype = std::nullopt;
};

// Permutes the non-batch axes of every example (one transpose).
// Shapes: [b, d1, ..., dn] -> [b, d_dims[0], ..., d_dims[n-1]]. Ref: keras.layers.Permute
class Permute : public Layer {
 public:
  // Errors: std::invalid_argument if dims is not a permutation of 1..n (names the layer and dims).
  explicit Permute(PermuteOptions options);
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  Config get_config() const override;  // dims
  // Builds a Permute from its Keras config ("dims" required; unknown fields ignored).
  // Errors: std::invalid_argument naming the field for missing or invalid dims.
  static std::shared_ptr<Permute> from_config(const Config& config);

 private:
  void check_rank(const Shape& s) const;
  std::vector<int> dims_;
};

}  // namespace tapeflow::layers
