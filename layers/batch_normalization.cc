#include "layers/batch_normalization.h"

#include <stdexcept>

#include "tape/kernels/batch_norm.h"
#include "layers/serialization.h"
#include "layers/internal/serialization_json.h"
#include "tape/autodiff/custom_gradient.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tape/runtime/recorder.h"

namespace tapeflow::layers {

Config BatchNormalization::get_config() const {
  Config config = base_config();
  nlohmann::json& c = json_of(config);
  c["axis"] = options_.axis;
  c["momentum"] = options_.momentum;
  c["epsilon"] = options_.epsilon;
  c["center"] = options_.center;
  c["scale"] = options_.scale;
  c["beta_initializer"] = serialize_initializer(options_.beta_initializer);
  c["gamma_initializer"] = serialize_initializer(options_.gamma_initializer);
  c["moving_mean_initializer"] = serialize_initializer(options_.moving_mean_initializer);
  c["moving_variance_initializer"] = serialize_initializer(options_.moving_variance_initializer);
  for (const char* k : {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"}) c[k] = nullptr;
  return config;
}

std::shared_ptr<BatchNormalization> BatchNormalization::from_config(const Config& config_in) {
  const nlohmann::json& config = json_of(config_in);
  ConfigReader r(config_in, "BatchNormalization");
  for (const char* k : {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"})
    r.require_null(k);
  if (r.boolean("synchronized", false)) r.fail("synchronized", "not supported by tapeflow");
  int axis = -1;
  if (r.has("axis")) {
    const nlohmann::json& a = config["axis"];
    if (a.is_array() && a.size() == 1 && a[0].is_number_integer()) axis = a[0].get<int>();  // Keras after build
    else if (a.is_number_integer()) axis = a.get<int>();
    else r.fail("axis", "expected one integer axis, got " + a.dump());
  }
  try {
    return r.finish(std::make_shared<BatchNormalization>(BatchNormalizationOptions{
        .axis = axis,
        .momentum = r.number("momentum", 0.99),
        .epsilon = r.number("epsilon", 1e-3),
        .center = r.boolean("center", true),
        .scale = r.boolean("scale", true),
        .beta_initializer = r.initializer("beta_initializer", "zeros"),
        .gamma_initializer = r.initializer("gamma_initializer", "ones"),
        .moving_mean_initializer = r.initializer("moving_mean_initializer", "zeros"),
        .moving_variance_initializer = r.initializer("moving_variance_initializer", "ones"),
        .name = r.name(),
        .dtype = r.dtype()}));
  } catch (const std::invalid_argument& e) {
    r.fail("momentum/epsilon", e.what());
  }
}

BatchNormalization::BatchNormalization(BatchNormalizationOptions options)
    : Layer("BatchNormalization", options.name, options.seed, options.dtype), options_(std::move(options)) {
  if (!(options_.momentum >= 0 && options_.momentum <= 1))
    throw std::invalid_argument(describe() + ": momentum must be in [0, 1], got " + std::to_string(options_.momentum));
  if (!(options_.epsilon > 0))
    throw std::invalid_argument(describe() + ": epsilon must be positive, got " + std::to_string(options_.epsilon));
}

void BatchNormalization::build(const Shape& input_shape) {
  const int rank = input_shape.rank();
  if (rank < 1 || options_.axis < -rank || options_.axis >= rank)
    throw std::invalid_argument(describe() + ": axis " + std::to_string(options_.axis) +
                                " is out of range for input shape " + input_shape.to_string());
  axis_ = options_.axis < 0 ? options_.axis + rank : options_.axis;
  built_shape_ = input_shape;
  const Shape c{input_shape[axis_]};
  if (options_.scale) gamma_ = add_weight("gamma", c, options_.gamma_initializer);
  if (options_.center) beta_ = add_weight("beta", c, options_.beta_initializer);
  moving_mean_ = add_weight("moving_mean", c, options_.moving_mean_initializer, /*trainable=*/false);
  moving_variance_ = add_weight("moving_variance", c, options_.moving_variance_initializer, /*trainable=*/false);
  Layer::build(input_shape);
}

const Variable& BatchNormalization::built_weight(const Variable& v, const char* what) const {
  if (!v.defined())
    throw std::logic_error(describe() + ": " + what + (built() ? " is disabled (scale/center false)" : " before build"));
  return v;
}
const Variable& BatchNormalization::gamma() const { return built_weight(gamma_, "gamma"); }
const Variable& BatchNormalization::beta() const { return built_weight(beta_, "beta"); }
const Variable& BatchNormalization::moving_mean() const { return built_weight(moving_mean_, "moving_mean"); }
const Variable& BatchNormalization::moving_variance() const {
  return built_weight(moving_variance_, "moving_variance");
}

Tensor BatchNormalization::broadcastable(const Tensor& p) const {
  if (axis_ == built_shape_.rank() - 1) return p;
  std::vector<std::int64_t> s(built_shape_.rank(), 1);
  s[axis_] = built_shape_[axis_];
  return reshape(p, s);
}

Tensor BatchNormalization::call(const Tensor& x, bool training) {
  const Shape& s = x.shape();
  if (s.rank() != built_shape_.rank() || s[axis_] != built_shape_[axis_])
    throw std::invalid_argument(describe() + ": expected inputs of rank " + std::to_string(built_shape_.rank()) +
                                " with " + std::to_string(built_shape_[axis_]) + " features on axis " +
                                std::to_string(axis_) + " (built for " + built_shape_.to_string() + "), got " +
                                s.to_string());
  if (!training || !trainable()) return infer(x);
  Tensor mean, var;
  Tensor y = axis_ == s.rank() - 1 ? train_fused(x, &mean, &var) : train_composed(x, &mean, &var);
  update_moving(mean, var);
  return y;
}

Tensor BatchNormalization::infer(const Tensor& x) {
  Tensor scale = rsqrt(moving_variance_.value() + options_.epsilon);
  if (options_.scale) scale = scale * gamma_.read();
  Tensor offset = -(moving_mean_.value() * scale);
  if (options_.center) offset = offset + beta_.read();
  return x * broadcastable(scale) + broadcastable(offset);
}

Tensor BatchNormalization::train_composed(const Tensor& x, Tensor* mean_out, Tensor* var_out) {
  std::vector<int> axes;
  for (int i = 0; i < x.rank(); ++i)
    if (i != axis_) axes.push_back(i);
  Tensor mean = reduce_mean(x, axes, /*keepdims=*/true);
  Tensor d = x - mean;
  Tensor var = reduce_mean(square(d), axes, /*keepdims=*/true);
  Tensor inv = rsqrt(var + options_.epsilon);
  if (options_.scale) inv = inv * broadcastable(gamma_.read());
  Tensor y = d * inv;
  if (options_.center) y = y + broadcastable(beta_.read());
  *mean_out = mean;
  *var_out = var;
  return y;
}

Tensor BatchNormalization::train_fused(const Tensor& x_in, Tensor* mean_out, Tensor* var_out) {
  const std::int64_t c = x_in.shape().dim(-1);
  const std::int64_t n = c == 0 ? 0 : x_in.num_elements() / c;
  const bool reshaped = x_in.rank() != 2;
  Tensor x = reshaped ? reshape(x_in, std::vector<std::int64_t>{n, c}) : x_in;
  const DType dt = x.dtype();
  Tensor gamma = options_.scale ? gamma_.read() : ones({c}, dt);
  Tensor beta = options_.center ? beta_.read() : zeros({c}, dt);
  const double eps = options_.epsilon;
  const bool scale = options_.scale, center = options_.center;
  Tensor mean = Tensor::empty({c}, dt), var = Tensor::empty({c}, dt), inv = Tensor::empty({c}, dt);

  CustomForwardFn forward = [&](const std::vector<Tensor>& in) {
    const Tensor &xx = in[0], &gm = in[1], &bt = in[2];
    Tensor y = Tensor::empty(xx.shape(), dt);
    dispatch_floating(dt, "BatchNormalization", [&](auto tag) {
      using T = decltype(tag);
      kernels::batch_norm_forward<T>(xx.data<T>(), n, c, gm.data<T>(), bt.data<T>(), eps, y.mutable_data<T>(),
                                      mean.mutable_data<T>(), var.mutable_data<T>(), inv.mutable_data<T>());
    });
    CustomGradFn grad = [xx, gm, mean, inv, n, c, eps, scale, center](const std::vector<Tensor>& up) {
      const Tensor& g = up[0];
      Tensor dx, dgamma, dbeta;
      if (!is_recording()) {  // plain backward: one fused kernel
        dx = Tensor::empty(xx.shape(), xx.dtype());
        dgamma = Tensor::empty({c}, xx.dtype());
        dbeta = Tensor::empty({c}, xx.dtype());
        dispatch_floating(xx.dtype(), "BatchNormalization", [&](auto tag) {
          using T = decltype(tag);
          kernels::batch_norm_backward<T>(xx.data<T>(), g.data<T>(), n, c, gm.data<T>(), mean.data<T>(),
                                           inv.data<T>(), dx.mutable_data<T>(), dgamma.mutable_data<T>(),
                                           dbeta.mutable_data<T>());
        });
      } else {  // a tape records this backward pass: build it from ops (differentiable again)
        Tensor m = reduce_mean(xx, 0, true);
        Tensor d = xx - m;
        Tensor iv = rsqrt(reduce_mean(square(d), 0, true) + eps);
        Tensor xhat = d * iv;
        dbeta = reduce_sum(g, 0);
        dgamma = reduce_sum(g * xhat, 0);
        dx = (gm * iv / double(n)) * (g * double(n) - dbeta - xhat * dgamma);
      }
      return std::vector<Tensor>{dx, scale ? dgamma : Tensor(), center ? dbeta : Tensor()};
    };
    return std::make_pair(std::vector<Tensor>{y}, grad);
  };
  Tensor y = call_with_custom_gradient(forward, {x, gamma, beta})[0];
  *mean_out = mean;
  *var_out = var;
  return reshaped ? reshape(y, x_in.shape()) : y;
}

void BatchNormalization::update_moving(const Tensor& mean, const Tensor& var) {
  RecordingPause pause;
  const double mom = options_.momentum;
  dispatch_floating(mean.dtype(), "BatchNormalization", [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t c = mean.num_elements();
    const T* bm = mean.data<T>();
    const T* bv = var.data<T>();
    T* mm = moving_mean_.mutable_data_for_update<T>();
    T* mv = moving_variance_.mutable_data_for_update<T>();
    for (std::int64_t i = 0; i < c; ++i) {
      mm[i] = static_cast<T>(mm[i] * mom + bm[i] * (1.0 - mom));
      mv[i] = static_cast<T>(mv[i] * mom + bv[i] * (1.0 - mom));
    }
  });
}

}  // namespace tapeflow::layers
