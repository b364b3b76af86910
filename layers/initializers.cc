#include "layers/initializers.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace tapeflow::layers {

Initializer::Initializer(const char* name) : Initializer(initializers::get(name)) {}
Initializer::Initializer(const std::string& name) : Initializer(initializers::get(name)) {}
Initializer::Initializer(std::string name, Fn fn, Params params)
    : name_(std::move(name)), fn_(std::move(fn)), params_(std::move(params)) {
  if (!fn_) throw std::invalid_argument("Initializer '" + name_ + "': empty function");
}

Tensor Initializer::operator()(const Shape& shape, DType dtype, Generator& gen) const {
  return fn_(shape, dtype, gen);
}

namespace initializers {
namespace {

void check_float(const char* name, DType dtype) {
  if (!is_floating(dtype))
    throw std::invalid_argument(std::string("initializer ") + name + ": expected float32 or float64, got " +
                                dtype_name(dtype));
}

enum class Mode { kFanIn, kFanOut, kFanAvg };
enum class Dist { kUniform, kTruncatedNormal, kNormal };

// keras.initializers.VarianceScaling.
Initializer variance_scaling(const char* name, double scale, Mode mode, Dist dist, Initializer::Params params = {}) {
  return Initializer(
      name,
      [=](const Shape& shape, DType dtype, Generator& gen) {
        check_float(name, dtype);
        Fans f = compute_fans(shape);
        double n = mode == Mode::kFanIn ? f.fan_in : mode == Mode::kFanOut ? f.fan_out : (f.fan_in + f.fan_out) / 2.0;
        double s = scale / std::max(1.0, n);
        if (dist == Dist::kUniform) {
          double limit = std::sqrt(3.0 * s);
          return tapeflow::random_uniform(shape, gen, -limit, limit, dtype);
        }
        if (dist == Dist::kNormal) return tapeflow::random_normal(shape, gen, 0.0, std::sqrt(s), dtype);
        return tapeflow::truncated_normal(shape, gen, 0.0, std::sqrt(s) / kTruncatedStddevCorrection, dtype);
      },
      std::move(params));
}

}  // namespace

Fans compute_fans(const Shape& shape) {
  const int r = shape.rank();
  if (r == 0) return {1, 1};
  if (r == 1) return {double(shape[0]), double(shape[0])};
  if (r == 2) return {double(shape[0]), double(shape[1])};
  double receptive = 1;
  for (int i = 0; i < r - 2; ++i) receptive *= double(shape[i]);
  return {double(shape[r - 2]) * receptive, double(shape[r - 1]) * receptive};
}

Initializer glorot_uniform() { return variance_scaling("glorot_uniform", 1.0, Mode::kFanAvg, Dist::kUniform); }
Initializer glorot_normal() {
  return variance_scaling("glorot_normal", 1.0, Mode::kFanAvg, Dist::kTruncatedNormal);
}
Initializer he_uniform() { return variance_scaling("he_uniform", 2.0, Mode::kFanIn, Dist::kUniform); }
Initializer he_normal() { return variance_scaling("he_normal", 2.0, Mode::kFanIn, Dist::kTruncatedNormal); }

Initializer variance_scaling(double scale, const std::string& mode, const std::string& distribution) {
  if (!(scale > 0)) throw std::invalid_argument("initializer VarianceScaling: scale must be > 0, got " + std::to_string(scale));
  Mode m;
  if (mode == "fan_in") m = Mode::kFanIn;
  else if (mode == "fan_out") m = Mode::kFanOut;
  else if (mode == "fan_avg") m = Mode::kFanAvg;
  else throw std::invalid_argument("initializer VarianceScaling: unknown mode '" + mode + "' (fan_in, fan_out, fan_avg)");
  Dist d;
  if (distribution == "uniform") d = Dist::kUniform;
  else if (distribution == "truncated_normal" || distribution == "normal") d = Dist::kTruncatedNormal;
  else if (distribution == "untruncated_normal") d = Dist::kNormal;
  else
    throw std::invalid_argument("initializer VarianceScaling: unknown distribution '" + distribution +
                                "' (uniform, truncated_normal, untruncated_normal)");
  // Params keep the mode and distribution as numbers in Keras's order of the enums above.
  return variance_scaling("variance_scaling", scale, m, d,
                          {{"scale", scale}, {"mode", double(int(m))}, {"distribution", double(int(d))}});
}

Initializer constant(double value) {
  return Initializer(
      "constant", [value](const Shape& shape, DType dtype, Generator&) { return fill(shape, value, dtype); },
      {{"value", value}});
}
Initializer zeros() {
  return Initializer("zeros", [](const Shape& shape, DType dtype, Generator&) { return tapeflow::zeros(shape, dtype); });
}
Initializer ones() {
  return Initializer("ones", [](const Shape& shape, DType dtype, Generator&) { return tapeflow::ones(shape, dtype); });
}
Initializer random_normal(double mean, double stddev) {
  return Initializer(
      "random_normal",
      [=](const Shape& shape, DType dtype, Generator& gen) {
        check_float("random_normal", dtype);
        return tapeflow::random_normal(shape, gen, mean, stddev, dtype);
      },
      {{"mean", mean}, {"stddev", stddev}});
}
Initializer random_uniform(double minval, double maxval) {
  return Initializer(
      "random_uniform",
      [=](const Shape& shape, DType dtype, Generator& gen) {
        check_float("random_uniform", dtype);
        return tapeflow::random_uniform(shape, gen, minval, maxval, dtype);
      },
      {{"minval", minval}, {"maxval", maxval}});
}
Initializer truncated_normal(double mean, double stddev) {
  return Initializer(
      "truncated_normal",
      [=](const Shape& shape, DType dtype, Generator& gen) {
        check_float("truncated_normal", dtype);
        return tapeflow::truncated_normal(shape, gen, mean, stddev, dtype);
      },
      {{"mean", mean}, {"stddev", stddev}});
}

Initializer orthogonal(double gain) {
  return Initializer(
      "orthogonal",
      [=](const Shape& shape, DType dtype, Generator& gen) {
        check_float("orthogonal", dtype);
        if (shape.rank() < 2)
          throw std::invalid_argument("initializer orthogonal: expected a shape of rank >= 2, got " + shape.to_string());
        const std::int64_t cols = shape.dim(-1), rows = shape.num_elements() / std::max<std::int64_t>(cols, 1);
        const std::int64_t m = std::max(rows, cols), n = std::min(rows, cols);
        // q of the QR of a normal [m, n] draw with diag(r) > 0 (Keras's q * sign(diag(r))): modified
        // Gram-Schmidt on the columns gives exactly that q.
        Tensor a = tapeflow::random_normal(Shape{m, n}, gen, 0.0, 1.0, DType::kFloat64);
        std::vector<double> q(a.data<double>(), a.data<double>() + m * n);
        for (std::int64_t j = 0; j < n; ++j) {
          for (std::int64_t k = 0; k < j; ++k) {
            double dot = 0;
            for (std::int64_t i = 0; i < m; ++i) dot += q[i * n + k] * q[i * n + j];
            for (std::int64_t i = 0; i < m; ++i) q[i * n + j] -= dot * q[i * n + k];
          }
          double nrm = 0;
          for (std::int64_t i = 0; i < m; ++i) nrm += q[i * n + j] * q[i * n + j];
          nrm = std::sqrt(nrm);
          for (std::int64_t i = 0; i < m; ++i) q[i * n + j] /= nrm;
        }
        Tensor out = Tensor::empty(shape, DType::kFloat64);
        double* o = out.mutable_data<double>();
        for (std::int64_t r = 0; r < rows; ++r)  // [rows, cols]: q itself, or qᵀ when rows < cols
          for (std::int64_t c = 0; c < cols; ++c) o[r * cols + c] = gain * (rows >= cols ? q[r * n + c] : q[c * n + r]);
        return dtype == DType::kFloat64 ? out : convert(out, dtype);
      },
      {{"gain", gain}});
}

Initializer get(const std::string& name) {
  if (name == "orthogonal") return orthogonal();
  if (name == "glorot_uniform") return glorot_uniform();
  if (name == "glorot_normal") return glorot_normal();
  if (name == "he_uniform") return he_uniform();
  if (name == "he_normal") return he_normal();
  if (name == "zeros") return zeros();
  if (name == "ones") return ones();
  if (name == "random_normal") return random_normal();
  if (name == "random_uniform") return random_uniform();
  if (name == "truncated_normal") return truncated_normal();
  throw std::invalid_argument("initializers::get: unknown initializer '" + name +
                              "' (known: glorot_uniform, glorot_normal, he_uniform, he_normal, zeros, ones, "
                              "random_normal, random_uniform, truncated_normal, orthogonal)");
}

}  // namespace initializers
}  // namespace tapeflow::layers
