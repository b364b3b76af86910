// custom_gradient (tf.custom_gradient), OpRegistry::set_gradient (tf.RegisterGradient) and user ops.
#include "tape/autodiff/custom_gradient.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "tape/runtime/execute.h"
#include "tape/ops/internal/batching_rules.h"
#include "tape/tapeflow.h"
#include "tests/testing/gradcheck_table.h"

namespace tf = tapeflow;

namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using UnaryGrad = std::function<tf::Tensor(const tf::Tensor&)>;
using Grads = std::vector<tf::Tensor>;

tf::Tensor f64(double v) { return tf::scalar(v, tf::DType::kFloat64); }

// The advanced-autodiff guide: an identity whose backward pass clips the gradient's norm to 0.5.
TEST(CustomGradient, SeedClipGradients) {
  auto clip_gradients = tf::custom_gradient([](const tf::Tensor& y) {
    return std::make_pair(y, UnaryGrad([](const tf::Tensor& dy) { return tf::clip_by_norm(dy, 0.5); }));
  });
  tf::Variable v(2.0);
  tf::GradientTape t;
  tf::Tensor output = clip_gradients(v * v);
  EXPECT_FLOAT_EQ(output.item(), 4.0);
  // d(v*v)/dv = 4 scaled by the clipped upstream 0.5 -> 2.0 ("clips 4 to 2").
  EXPECT_FLOAT_EQ(t.gradient(output, v)->item(), 2.0);
}

// The forward is the identity, but the custom gradient is g * x²: the outer tape must
// differentiate the gradient function's own ops (d/dx x² = 2x), not the forward.
TEST(CustomGradient, DifferentiatedTwiceThroughTheGradientFunctionsOps) {
  auto f = tf::custom_gradient([](const tf::Tensor& x) {
    return std::make_pair(tf::identity(x), UnaryGrad([x](const tf::Tensor& dy) { return dy * x * x; }));
  });
  tf::Tensor x = f64(3.0);
  tf::GradientTape outer;
  outer.watch(x);
  std::optional<tf::Tensor> dy_dx;
  {
    tf::GradientTape inner;
    inner.watch(x);
    tf::Tensor y = f(x);
    dy_dx = inner.gradient(y, x);
  }
  EXPECT_DOUBLE_EQ(dy_dx->item(), 9.0);
  EXPECT_DOUBLE_EQ(outer.gradient(*dy_dx, x)->item(), 6.0);
}

// A numerically stable log(1 + exp(x)) with its own gradient sigmoid(x), checked to second order.
TEST(CustomGradient, StableSoftplusPassesGradGradCheck) {
  auto softplus = tf::custom_gradient([](const tf::Tensor& x) {
    return std::make_pair(tf::softplus(x), UnaryGrad([x](const tf::Tensor& dy) { return dy * tf::sigmoid(x); }));
  });
  tf::testing::TestFn fn = [softplus](const std::vector<tf::Tensor>& in) { return softplus(in[0]); };
  std::vector<tf::Tensor> in{tf::testing::random_f64({2, 3}, 7, -3.0, 3.0)};
  EXPECT_TRUE(tf::testing::gradcheck(fn, in));
  EXPECT_TRUE(tf::testing::gradgradcheck(fn, in));
}

TEST(CustomGradient, MultipleInputsAndOutputs) {
  // Outputs (a + b, a * b); gradients written by hand, b's scaled by 10 to show they are used.
  auto f = tf::custom_gradient([](const std::vector<tf::Tensor>& in) {
    tf::Tensor a = in[0], b = in[1];
    tf::CustomGradFn grad = [a, b](const std::vector<tf::Tensor>& dy) {
      return Grads{dy[0] + dy[1] * b, (dy[0] + dy[1] * a) * 10.0};
    };
    return std::make_pair(Grads{a + b, a * b}, grad);
  });
  tf::Tensor a = f64(2.0), b = f64(5.0);
  tf::GradientTape tape({.persistent = true});
  tape.watch(a);
  tape.watch(b);
  Grads y = f({a, b});
  ASSERT_EQ(y.size(), 2u);
  EXPECT_DOUBLE_EQ(y[0].item(), 7.0);
  EXPECT_DOUBLE_EQ(y[1].item(), 10.0);
  tf::Tensor total = y[0] + y[1];
  EXPECT_DOUBLE_EQ(tape.gradient(total, a)->item(), 1.0 + 5.0);
  EXPECT_DOUBLE_EQ(tape.gradient(total, b)->item(), (1.0 + 2.0) * 10.0);
  // Only the second output as target: the first gets a zero upstream gradient.
  EXPECT_DOUBLE_EQ(tape.gradient(y[1], a)->item(), 5.0);
}

TEST(CustomGradient, UndefinedGradientMeansNone) {
  auto f = tf::custom_gradient([](const std::vector<tf::Tensor>& in) {
    tf::CustomGradFn grad = [b = in[1]](const std::vector<tf::Tensor>& dy) { return Grads{dy[0] * b, tf::Tensor()}; };
    return std::make_pair(Grads{in[0] * in[1]}, grad);
  });
  tf::Tensor a = f64(2.0), b = f64(5.0);
  tf::GradientTape tape({.persistent = true});
  tape.watch(a);
  tape.watch(b);
  tf::Tensor y = f({a, b})[0];
  EXPECT_DOUBLE_EQ(tape.gradient(y, a)->item(), 5.0);
  EXPECT_FALSE(tape.gradient(y, b).has_value());
}

TEST(CustomGradient, BadGradientFunctionsAreReported) {
  auto wrong_count = tf::custom_gradient([](const std::vector<tf::Tensor>& in) {
    tf::CustomGradFn grad = [](const std::vector<tf::Tensor>& dy) { return Grads{dy[0]}; };
    return std::make_pair(Grads{in[0] * in[1]}, grad);
  });
  auto wrong_shape = tf::custom_gradient([](const tf::Tensor& x) {
    return std::make_pair(x * 2.0, UnaryGrad([](const tf::Tensor&) { return tf::zeros({3}, tf::DType::kFloat64); }));
  });
  auto no_grad_fn = tf::custom_gradient(
      [](const std::vector<tf::Tensor>& in) { return std::make_pair(Grads{in[0]}, tf::CustomGradFn()); });
  tf::Tensor a = f64(2.0), b = f64(5.0);
  {
    tf::GradientTape tape;
    tape.watch(a);
    tf::Tensor y = wrong_count({a, b})[0];
    EXPECT_THAT([&] { tape.gradient(y, a); },
                ThrowsMessage<std::invalid_argument>(
                    HasSubstr("custom_gradient: gradient function returned 1 gradients for 2 inputs")));
  }
  {
    tf::GradientTape tape;
    tape.watch(a);
    tf::Tensor y = wrong_shape(a);
    EXPECT_THAT([&] { tape.gradient(y, a); }, ThrowsMessage<std::invalid_argument>(HasSubstr(
                                                  "custom_gradient: gradient 0 has shape [3], input has shape []")));
  }
  EXPECT_THAT([&] { no_grad_fn({a}); }, ThrowsMessage<std::invalid_argument>(HasSubstr(
                                            "custom_gradient: the forward function returned no gradient function")));
}

// Restores an op's registered gradient when the test ends, even on failure.
class GradientOverride {
 public:
  GradientOverride(std::string op, tf::GradientFn fn)
      : op_(std::move(op)), saved_(tf::OpRegistry::global().get(op_).gradient) {
    tf::OpRegistry::global().set_gradient(op_, std::move(fn));
  }
  ~GradientOverride() { tf::OpRegistry::global().set_gradient(op_, saved_); }
  GradientOverride(const GradientOverride&) = delete;
  GradientOverride& operator=(const GradientOverride&) = delete;

 private:
  std::string op_;
  tf::GradientFn saved_;
};

TEST(RegisterGradient, SetGradientOverridesAndRestores) {
  tf::Tensor x = f64(3.0);
  {
    // tf.RegisterGradient-style override of Square: 10 g instead of 2 x g.
    GradientOverride override_square(
        "Square", [](const tf::GradContext&, std::span<const tf::Tensor> g) { return tf::TensorList{g[0] * 10.0}; });
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = tf::square(x);
    EXPECT_DOUBLE_EQ(tape.gradient(y, x)->item(), 10.0);
  }
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = tf::square(x);
  EXPECT_DOUBLE_EQ(tape.gradient(y, x)->item(), 6.0);  // restored
  EXPECT_THAT([] { tf::OpRegistry::global().set_gradient("NoSuchOp", {}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("unknown op 'NoSuchOp'")));
}

// A brand-new user op: y = x³ with forward kernel and gradient 3 x² g (written with ops).
tf::Tensor user_cube(const tf::Tensor& x) {
  static const tf::OpDef& op = tf::register_op(
      {"TestUserCube",
       [](std::span<const tf::Tensor> in, const tf::Attrs&) {
         const tf::Tensor& x = in[0];
         if (x.dtype() != tf::DType::kFloat64)
           throw std::invalid_argument(std::string("user_cube: expected float64, got ") + tf::dtype_name(x.dtype()));
         tf::Tensor y = tf::Tensor::empty(x.shape(), x.dtype());
         for (std::int64_t i = 0; i < x.num_elements(); ++i) {
           const double v = x.data<double>()[i];
           y.mutable_data<double>()[i] = v * v * v;
         }
         return tf::TensorList{y};
       },
       [](const tf::GradContext& c, std::span<const tf::Tensor> g) {
         return tf::TensorList{g[0] * 3.0 * tf::square(c.input(0))};
       },
       tf::kSaveInputs, {}, /*loop_only=*/true});  // the forward reads raw float64 data
  return tf::execute1(op, {x});
}

tf::testing::RegisterGradChecks rows({
    {"TestUserCube", "user op registered by custom_gradient_test",
     [](const std::vector<tf::Tensor>& in) { return user_cube(in[0]); },
     [] {
       return std::vector<tf::Tensor>{tf::testing::random_f64({2, 2}, 5)};
     }},
});

TEST(RegisterOp, UserOpWithForwardAndGradientUnderATape) {
  tf::Tensor x = f64(2.0);
  tf::GradientTape outer;
  outer.watch(x);
  std::optional<tf::Tensor> dy;
  {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = user_cube(x);
    EXPECT_DOUBLE_EQ(y.item(), 8.0);
    dy = tape.gradient(y, x);
  }
  EXPECT_DOUBLE_EQ(dy->item(), 12.0);
  EXPECT_DOUBLE_EQ(outer.gradient(*dy, x)->item(), 12.0);  // 6 x
  tf::testing::run_gradcheck_cases({"TestUserCube"});
  EXPECT_THAT([] { user_cube(tf::scalar(1.0)); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("user_cube: expected float64, got float32")));
}

// y = a b + c, whose gradient notes which inputs the backward pass says it needs.
std::vector<bool> g_needed;
tf::Tensor user_fma(const tf::Tensor& a, const tf::Tensor& b, const tf::Tensor& c) {
  static const tf::OpDef& op = tf::register_op(
      {"TestUserFma",
       [](std::span<const tf::Tensor> in, const tf::Attrs&) { return tf::TensorList{in[0] * in[1] + in[2]}; },
       [](const tf::GradContext& ctx, std::span<const tf::Tensor> g) {
         g_needed = {ctx.needs_gradient(0), ctx.needs_gradient(1), ctx.needs_gradient(2)};
         return tf::TensorList{g[0] * ctx.input(1), g[0] * ctx.input(0), g[0]};
       },
       tf::kSaveInputs, tf::batching::elementwise()});
  return tf::execute1(op, {a, b, c});
}

tf::testing::RegisterGradChecks fma_rows({
    {"TestUserFma", "user op registered by custom_gradient_test",
     [](const std::vector<tf::Tensor>& in) { return user_fma(in[0], in[1], in[2]); },
     [] {
       return std::vector<tf::Tensor>{tf::testing::random_f64({2, 2}, 6), tf::testing::random_f64({2, 2}, 7),
                                      tf::testing::random_f64({2, 2}, 8)};
     }},
});

// GradContext::needs_gradient: true exactly for the inputs whose gradient the pass routes on (a
// watched source, or an op on a path from one), so gradients may skip the others (MatMul does).
TEST(RegisterOp, GradientKnowsWhichInputsAreNeeded) {
  tf::Tensor a = f64(2.0), b = f64(3.0), c = f64(4.0);
  {
    tf::GradientTape tape;
    tape.watch(b);
    tf::Tensor y = user_fma(a, b, tf::exp(c));
    EXPECT_DOUBLE_EQ(tape.gradient(y, b)->item(), 2.0);
    EXPECT_EQ(g_needed, (std::vector<bool>{false, true, false}));
  }
  {
    tf::GradientTape tape;
    tape.watch(a);
    tape.watch(c);
    tf::Tensor y = user_fma(a, b, tf::exp(c));  // c reaches the op through exp
    auto g = tape.gradient(y, std::vector<tf::Source>{c});
    EXPECT_DOUBLE_EQ(g[0]->item(), std::exp(4.0));
    EXPECT_EQ(g_needed, (std::vector<bool>{false, false, true}));
  }
  tf::testing::run_gradcheck_cases({"TestUserFma"});
  // MatMul computes only the needed product; both gradients are still right when both are needed.
  tf::Tensor x = tf::testing::random_f64({3, 2}, 9), w = tf::testing::random_f64({2, 4}, 10);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tape.watch(w);
  tf::Tensor y = tf::reduce_sum(tf::matmul(x, w));
  auto gw = tape.gradient(y, w), gx = tape.gradient(y, x);
  auto both = tape.gradient(y, std::vector<tf::Source>{x, w});
  EXPECT_TRUE(tf::testing::all_close(*gw, *both[1], 0, 0));
  EXPECT_TRUE(tf::testing::all_close(*gx, *both[0], 0, 0));
}

TEST(RegisterOp, DuplicateOrEmptyRegistrationsAreRejected) {
  user_cube(f64(1.0));  // make sure it is registered
  EXPECT_THAT(
      [] {
        tf::register_op(
            {"TestUserCube", [](std::span<const tf::Tensor>, const tf::Attrs&) { return tf::TensorList{}; }, {}});
      },
      ThrowsMessage<std::invalid_argument>(HasSubstr("op 'TestUserCube' is already registered")));
  EXPECT_THAT(
      [] {
        tf::register_op({"TestNoForward", {}, {}});
      },
      ThrowsMessage<std::invalid_argument>(HasSubstr("op 'TestNoForward' has no forward function")));
}

}  // namespace
