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

struct PermuteOptions {
  std::vector<int> dims;
  std::string name = "";
  std::optional<DType> dtype = std::nullopt;
};

class Permute : public Layer {
 public:
  explicit Permute(PermuteOptions options);
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;  // dims
  static std::shared_ptr<Permute> from_config(const nlohmann::json& config);

 private:
  void check_rank(const Shape& s) const;
  std::vector<int> dims_;
};

}  // namespace tapeflow::layers
