// Keras's `dtype` argument of models: a float64 model computes in float64 end to end (inputs are
// cast to the model's compute dtype, the first layer's; layers created inside it default to it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "layers/layers.h"
#include "models/model.h"
#include "models/sequential.h"
#include "optimizers/optimizers.h"
#include "tape/tapeflow.h"

namespace tapeflow::models {
namespace {

using ::testing::HasSubstr;

constexpr double kLr = 0.1;

double max_abs_diff(const Tensor& a, const Tensor& b) { return reduce_max(abs(a - b)).item(); }

// One SGD step of the 2-layer MLP tanh(x W1 + b1) W2 + b2 with MSE, written with tapeflow ops in
// float64: updates `w` (W1, b1, W2, b2) and returns the loss before the step.
double reference_step(std::vector<Tensor>& w, const Tensor& x, const Tensor& y) {
  std::vector<Variable> v;
  for (const Tensor& t : w) v.emplace_back(t);
  GradientTape tape;
  Tensor h = tanh(matmul(x, v[0]) + v[1]);
  Tensor pred = matmul(h, v[2]) + v[3];
  Tensor loss = reduce_mean(reduce_mean(square(pred - y), -1));
  auto grads = tape.gradient(loss, v);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = w[i] - kLr * *grads[i];
  return loss.item();
}

Tensor reference_forward(const std::vector<Tensor>& w, const Tensor& x) {
  return matmul(tanh(matmul(x, w[0]) + w[1]), w[2]) + w[3];
}

// Three train_steps, then evaluate and predict, against the float64 reference to 1e-12. float32
// rounding of the inputs (the old behaviour) is off by ~1e-8.
void expect_matches_float64_reference(Sequential& model) {
  Generator gen(3);
  const Tensor x = random_normal({8, 3}, gen, 0.0, 1.0, DType::kFloat64);
  const Tensor y = random_normal({8, 1}, gen, 0.0, 1.0, DType::kFloat64);
  model.build(x.shape());
  std::vector<Tensor> w = model.get_weights();
  ASSERT_EQ(w.size(), 4u);
  for (const Tensor& t : w) ASSERT_EQ(t.dtype(), DType::kFloat64);
  model.compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = kLr}),
                 .loss = "mse"});
  for (int step = 0; step < 3; ++step) {
    model.reset_metrics();
    const double loss = model.train_step({x, y}).at("loss");
    EXPECT_NEAR(loss, reference_step(w, x, y), 1e-12) << "step " << step;
  }
  const std::vector<Tensor> trained = model.get_weights();
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_LT(max_abs_diff(trained[i], w[i]), 1e-12) << "weight " << i;
  const Tensor pred = model.predict(x);
  EXPECT_EQ(pred.dtype(), DType::kFloat64);
  EXPECT_LT(max_abs_diff(pred, reference_forward(w, x)), 1e-12);
  const Tensor ref_loss = reduce_mean(square(reference_forward(w, x) - y));
  EXPECT_NEAR(model.evaluate(x, y, {.batch_size = 8}).at("loss"), ref_loss.item(), 1e-12);
  // fit: one more epoch of one batch is the next reference step.
  const History h = model.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .shuffle = false});
  EXPECT_NEAR(h["loss"].back(), reference_step(w, x, y), 1e-12);
}

TEST(ModelDType, Float64LayersGetFloat64InputsFromTheFirstLayer) {
  // No model dtype: the model takes its first layer's (float64), and the weightless Activation
  // layer in between follows it instead of rounding to float32.
  Sequential model({std::make_shared<layers::Dense>(layers::DenseOptions{.units = 4, .seed = 1, .dtype = DType::kFloat64}),
                    std::make_shared<layers::Activation>("tanh"),
                    std::make_shared<layers::Dense>(layers::DenseOptions{.units = 1, .seed = 2, .dtype = DType::kFloat64})});
  EXPECT_EQ(model.dtype(), DType::kFloat64);
  EXPECT_EQ(model.layers()[1]->dtype(), DType::kFloat64);
  expect_matches_float64_reference(model);
}

TEST(ModelDType, LayersInsideAFloat64ModelDefaultToFloat64) {
  Sequential model({std::make_shared<layers::Dense>(layers::DenseOptions{.units = 4, .activation = "tanh", .seed = 1}),
                    std::make_shared<layers::Dense>(layers::DenseOptions{.units = 1, .seed = 2})},
                   "mlp64", DType::kFloat64);
  for (const auto& l : model.layers()) EXPECT_EQ(l->dtype(), DType::kFloat64) << l->name();
  expect_matches_float64_reference(model);
}

TEST(ModelDType, FloatInputsAreCastToTheModelsDtype) {
  Sequential model({std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .seed = 1})}, "", DType::kFloat64);
  EXPECT_EQ(model(ones({3, 2}), false).dtype(), DType::kFloat64);  // float32 in, float64 out
  // An explicit float32 layer keeps its dtype inside a float64 model (Keras does too).
  auto f32 = std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .dtype = DType::kFloat32});
  Sequential mixed({f32}, "", DType::kFloat64);
  EXPECT_EQ(f32->dtype(), DType::kFloat32);
  EXPECT_EQ(mixed(ones({1, 2}, DType::kFloat64), false).dtype(), DType::kFloat32);
  // Without any dtype everything stays float32, as before.
  Sequential plain({std::make_shared<layers::Dense>(2)});
  EXPECT_FALSE(plain.dtype_is_set());
  EXPECT_EQ(plain(ones({1, 2}, DType::kFloat64), false).dtype(), DType::kFloat32);
}

// A subclassed model with a dtype: the layers its constructor creates compute in it.
class TwoLayer : public Model {
 public:
  TwoLayer() : Model("two_layer", "TwoLayer", DType::kFloat64) {
    hidden_ = track_layer(std::make_shared<layers::Dense>(layers::DenseOptions{.units = 3, .activation = "tanh"}));
    out_ = track_layer(std::make_shared<layers::Dense>(1));
  }
  Tensor call(const Tensor& x, bool training) override { return (*out_)((*hidden_)(x, training), training); }
  std::shared_ptr<layers::Dense> hidden_, out_;
};

TEST(ModelDType, SubclassedModelLayersFollowItsDtype) {
  TwoLayer m;
  EXPECT_EQ(m.hidden_->dtype(), DType::kFloat64);
  EXPECT_EQ(m.out_->dtype(), DType::kFloat64);
  Generator gen(5);
  const Tensor x = random_normal({4, 2}, gen, 0.0, 1.0, DType::kFloat64);
  const Tensor y = m(x, false);
  EXPECT_EQ(y.dtype(), DType::kFloat64);
  const auto w = m.get_weights();
  EXPECT_LT(max_abs_diff(y, reference_forward(w, x)), 1e-12);
}

// A model whose dtype can be changed after construction (set_dtype is protected).
class Retypable : public Model {
 public:
  Retypable() : Model("retypable") { dense_ = track_layer(std::make_shared<layers::Dense>(2)); }
  Tensor call(const Tensor& x, bool training) override { return (*dense_)(x, training); }
  using Model::set_dtype;
  std::shared_ptr<layers::Dense> dense_;
};

TEST(ModelDType, Errors) {
  EXPECT_THAT([] { Sequential({}, "", DType::kInt32); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("dtype must be float32 or float64, got int32")));
  // A built layer keeps its float32 weights when a float64 model adds it.
  auto built = std::make_shared<layers::Dense>(2);
  (*built)(ones({1, 2}), false);
  Sequential s({}, "", DType::kFloat64);
  s.add(built);
  EXPECT_EQ(built->dtype(), DType::kFloat32);
  // set_dtype before build reaches the tracked layers; after build it is an error naming both dtypes.
  Retypable r;
  r.set_dtype(DType::kFloat64);
  EXPECT_EQ(r.dense_->dtype(), DType::kFloat64);
  r(ones({1, 2}, DType::kFloat64), false);
  EXPECT_THAT([&] { r.set_dtype(DType::kFloat32); },
              ::testing::ThrowsMessage<std::logic_error>(
                  HasSubstr("cannot change the dtype of a built layer from float64 to float32")));
  EXPECT_THAT([&] { r.set_dtype(DType::kInt64); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("dtype must be float32 or float64, got int64")));
}

}  // namespace
}  // namespace tapeflow::models
