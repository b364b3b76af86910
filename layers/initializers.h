// Weight initializers (Keras names and defaults), drawing from an explicit seeded Generator.
//
// Shapes:   fans as keras.initializers compute_fans: rank 0 -> (1, 1); rank 1 -> (n, n); rank 2
//           [in, out] -> (in, out); rank > 2 -> receptive field = prod(shape[:-2]) times shape[-2]
//           and shape[-1].
// DTypes:   float32, float64 (random ones); zeros/ones/constant any dtype.
// Facts:    glorot_uniform: U(-l, l), l = sqrt(6 / (fan_in + fan_out)); glorot_normal: truncated
//           normal (re-drawn beyond 2 stddev) with stddev sqrt(2 / (fan_in + fan_out)) / 0.8796...;
//           he_uniform: l = sqrt(6 / fan_in); he_normal: truncated, stddev sqrt(2 / fan_in) / 0.8796...;
//           random_normal (mean 0, stddev 0.05), random_uniform (-0.05, 0.05) as Keras 3.
// Errors:   std::invalid_argument for an unknown name (lists the known ones) and for a non-float
//           dtype given to a random initializer.
// Ref:      keras/src/initializers/random_initializers.py, constant_initializers.py
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tape/core/random.h"
#include "tape/core/tensor.h"

namespace tapeflow::layers {

// A named function (shape, dtype, generator) -> initial value. Converts implicitly from a Keras
// identifier, so option structs read `.kernel_initializer = "he_normal"`.
class Initializer {
 public:
  // The function: a new tensor of `shape` and `dtype`, drawing any randomness from `gen`.
  using Fn = std::function<Tensor(const Shape& shape, DType dtype, Generator& gen)>;
  // The numeric arguments (Keras config fields such as {"mean", 0.0}, {"stddev", 0.05}).
  using Params = std::vector<std::pair<std::string, double>>;
  Initializer(const char* name);         // NOLINT: Keras identifiers, like kernel_initializer="zeros"
  Initializer(const std::string& name);  // NOLINT
  // A custom initializer: `name` (its Keras identifier in configs), `fn`, and the numeric arguments
  // serialized with it. Errors: std::invalid_argument (naming it) for an empty fn.
  Initializer(std::string name, Fn fn, Params params = {});
  // The initial value for a weight of `shape` and `dtype`, drawn from `gen`.
  // Errors: std::invalid_argument from the random initializers for a non-float dtype.
  Tensor operator()(const Shape& shape, DType dtype, Generator& gen) const;
  // The Keras identifier ("glorot_uniform", "random_normal", ...).
  const std::string& name() const { return name_; }
  // The numeric arguments, as in the Keras config (empty for those without).
  const Params& params() const { return params_; }

 private:
  std::string name_;
  Fn fn_;
  Params params_;
};

namespace initializers {

// The fan-in and fan-out of a weight shape, as keras.initializers compute_fans.
struct Fans {
  double fan_in = 1;   // inputs per output unit (receptive field · shape[-2] for kernels)
  double fan_out = 1;  // outputs per input unit (receptive field · shape[-1] for kernels)
};
// Fans of a weight `shape` (rules in the file comment's Shapes).
Fans compute_fans(const Shape& shape);

// Keras 2's truncated-normal stddev correction: the stddev of N(0, 1) truncated at ±2.
inline constexpr double kTruncatedStddevCorrection = 0.87962566103423978;

// keras.initializers.GlorotUniform: U(-l, l), l = sqrt(6 / (fan_in + fan_out)); Dense's and
// Conv2D's default kernel_initializer. DTypes: float32, float64.
Initializer glorot_uniform();
// keras.initializers.GlorotNormal: truncated normal, stddev sqrt(2 / (fan_in + fan_out)) / 0.8796...
// DTypes: float32, float64.
Initializer glorot_normal();
// keras.initializers.HeUniform: U(-l, l), l = sqrt(6 / fan_in). DTypes: float32, float64.
Initializer he_uniform();
// keras.initializers.HeNormal: truncated normal, stddev sqrt(2 / fan_in) / 0.8796...
// DTypes: float32, float64.
Initializer he_normal();
// keras.initializers.Zeros: all 0 (the default bias_initializer). DTypes: any.
Initializer zeros();
// keras.initializers.Ones: all 1 (BatchNormalization's gamma). DTypes: any.
Initializer ones();
// keras.initializers.Constant: every element `value`. DTypes: any.
Initializer constant(double value);
// keras.initializers.RandomNormal: N(mean, stddev²), Keras 3's defaults mean 0, stddev 0.05.
// DTypes: float32, float64.
Initializer random_normal(double mean = 0.0, double stddev = 0.05);
// keras.initializers.RandomUniform: U(minval, maxval), Keras 3's defaults -0.05, 0.05.
// DTypes: float32, float64.
Initializer random_uniform(double minval = -0.05, double maxval = 0.05);
// keras.initializers.TruncatedNormal: N(mean, stddev²) re-drawn beyond 2 stddev from the mean;
// defaults mean 0, stddev 0.05. DTypes: float32, float64.
Initializer truncated_normal(double mean = 0.0, double stddev = 0.05);
// keras.initializers.Orthogonal: gain · q of the QR decomposition of a standard normal draw of the
// shape flattened to [prod(shape[:-1]), shape[-1]] (transposed when it has fewer rows than columns),
// the signs of q's columns fixed by diag(r) > 0. The default recurrent_initializer of RNN cells.
// Errors: std::invalid_argument for a shape of rank < 2.
Initializer orthogonal(double gain = 1.0);
// keras.initializers.VarianceScaling: mode "fan_in" / "fan_out" / "fan_avg", distribution
// "uniform" / "truncated_normal" / "untruncated_normal" ("normal" = truncated, as Keras).
// Errors: std::invalid_argument for scale <= 0 or an unknown mode / distribution.
Initializer variance_scaling(double scale, const std::string& mode, const std::string& distribution);
// Looks up a Keras identifier ("glorot_uniform", "he_normal", "zeros", ...).
// Errors: std::invalid_argument for an unknown name.
Initializer get(const std::string& name);

}  // namespace initializers
}  // namespace tapeflow::layers
