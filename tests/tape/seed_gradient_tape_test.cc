// The examples of the tf.GradientTape API page and the two tutorials (../shared/seeds), in C++,
// with their documented numbers.
#include <gtest/gtest.h>

#include "tape/tapeflow.h"

namespace tf = tapeflow;

namespace {

TEST(SeedGradientTapeApi, SquareAtThree) {
  tf::Tensor x = tf::scalar(3.0);
  tf::GradientTape g;
  g.watch(x);
  tf::Tensor y = x * x;
  auto dy_dx = g.gradient(y, x);
  ASSERT_TRUE(dy_dx);
  EXPECT_FLOAT_EQ(dy_dx->item(), 6.0);
  EXPECT_EQ(dy_dx->to_string(), "tf.Tensor(6.0, shape=(), dtype=float32)");
}

TEST(SeedGradientTapeApi, NestedTapesSecondDerivative) {
  tf::Tensor x = tf::scalar(3.0);
  tf::GradientTape g;
  g.watch(x);
  std::optional<tf::Tensor> dy_dx;
  {
    tf::GradientTape gg;
    gg.watch(x);
    tf::Tensor y = x * x;
    dy_dx = gg.gradient(y, x);
  }
  auto d2y_dx2 = g.gradient(*dy_dx, x);
  EXPECT_FLOAT_EQ(dy_dx->item(), 6.0);
  ASSERT_TRUE(d2y_dx2);
  EXPECT_FLOAT_EQ(d2y_dx2->item(), 2.0);
}

TEST(SeedGradientTapeApi, PersistentTape) {
  tf::Tensor x = tf::scalar(3.0);
  tf::GradientTape g({.persistent = true});
  g.watch(x);
  tf::Tensor y = x * x;
  tf::Tensor z = y * y;
  EXPECT_FLOAT_EQ(g.gradient(z, x)->item(), 108.0);
  EXPECT_FLOAT_EQ(g.gradient(y, x)->item(), 6.0);
}

TEST(SeedGradientTapeApi, NonPersistentSecondCallThrows) {
  tf::Variable x0(5.0), x1(10.0);
  tf::GradientTape tape;
  tf::Tensor y0 = tf::pow(x0, 2.0);
  tf::Tensor y1 = tf::pow(x1, 2.0);
  EXPECT_FLOAT_EQ(tape.gradient(y0, x0)->item(), 10.0);
  try {
    tape.gradient(y1, x1);
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("persistent"), std::string::npos) << e.what();
  }
}

TEST(SeedGradientTapeApi, WatchAccessedVariablesFalse) {
  tf::Variable a(3.0), b(2.0);
  tf::GradientTape tape({.watch_accessed_variables = false});
  tape.watch(a);
  tf::Tensor y = tf::pow(a, 2.0);
  tf::Tensor z = tf::pow(b, 3.0);
  auto g = tape.gradient(y + z, std::vector<tf::Variable>{a, b});
  EXPECT_FLOAT_EQ(g[0]->item(), 6.0);
  // b was read but not watched: no gradient (with watch_accessed_variables = true it would be 12).
  EXPECT_FALSE(g[1].has_value());
  ASSERT_EQ(tape.watched_variables().size(), 1u);
  EXPECT_TRUE(tape.watched_variables()[0].same_as(a));
}

TEST(SeedAutodiffTutorial, AddThenMultiply) {
  tf::Tensor x = tf::scalar(1.0);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tf::Tensor y = tf::add(x, x);
  tf::Tensor z = tf::multiply(y, y);
  EXPECT_FLOAT_EQ(tape.gradient(z, y)->item(), 4.0);
  EXPECT_FLOAT_EQ(tape.gradient(y, x)->item(), 2.0);
  EXPECT_FLOAT_EQ(tape.gradient(z, x)->item(), 8.0);
  EXPECT_EQ(tape.gradient(z, x)->to_string(), "tf.Tensor(8.0, shape=(), dtype=float32)");
}

// Python control flow: f multiplies by x for 1 < i < 5.
tf::Tensor control_flow_f(const tf::Tensor& x, int y) {
  tf::Tensor output = tf::scalar(1.0);
  for (int i = 0; i < y; ++i)
    if (i > 1 && i < 5) output = tf::multiply(output, x);
  return output;
}
double control_flow_grad(const tf::Tensor& x, int y) {
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor out = control_flow_f(x, y);
  return tape.gradient(out, x)->item();
}

TEST(SeedAutodiffTutorial, ControlFlow) {
  tf::Tensor x = tf::scalar(2.0);
  EXPECT_FLOAT_EQ(control_flow_grad(x, 6), 12.0);
  EXPECT_FLOAT_EQ(control_flow_grad(x, 5), 12.0);
  EXPECT_FLOAT_EQ(control_flow_grad(x, 4), 4.0);
}

TEST(SeedAutodiffTutorial, HigherOrderWithVariable) {
  tf::Variable x(1.0);
  tf::GradientTape t;
  std::optional<tf::Tensor> dy_dx;
  {
    tf::GradientTape t2;
    tf::Tensor y = x * x * x;
    dy_dx = t2.gradient(y, x);
  }
  auto d2y_dx2 = t.gradient(*dy_dx, x);
  EXPECT_FLOAT_EQ(dy_dx->item(), 3.0);
  EXPECT_FLOAT_EQ(d2y_dx2->item(), 6.0);
}

TEST(SeedTutorial, FloatVariable) {
  tf::Variable x(20.0);
  EXPECT_EQ(x.to_string(), "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=20.0>");
  tf::GradientTape tape;
  tf::Tensor y = tf::pow(x, 2.0);
  EXPECT_NEAR(tape.gradient(y, x)->item(), 40.0, 1e-4);
}

TEST(SeedTutorial, IntegerVariableGivesNone) {
  tf::Variable x(30);
  EXPECT_EQ(x.dtype(), tf::DType::kInt32);
  tf::GradientTape tape;
  tf::Tensor y = tf::pow(x, tf::Tensor(3));
  EXPECT_EQ(y.to_string(), "tf.Tensor(27000, shape=(), dtype=int32)");
  EXPECT_FALSE(tape.gradient(y, x).has_value());
}

TEST(SeedTutorial, IntegerConvertedToFloat) {
  tf::Variable x(30, {.dtype = tf::DType::kFloat32});
  EXPECT_EQ(x.to_string(), "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=30.0>");
  tf::GradientTape tape;
  tf::Tensor y = tf::pow(x, 3.0);
  EXPECT_NEAR(tape.gradient(y, x)->item(), 2700.0, 1e-3);
}

TEST(SeedTutorial, VectorVariable) {
  tf::Variable x({1.0, 2.0, 3.0});
  tf::GradientTape tape;
  tf::Tensor y = tf::pow(x, 3.0);
  EXPECT_EQ(y.to_string(), "tf.Tensor([1.0 8.0 27.0], shape=(3,), dtype=float32)");
  EXPECT_EQ(tape.gradient(y, x)->to_vector<float>(), (std::vector<float>{3, 12, 27}));
}

TEST(SeedTutorial, ConstantNeedsWatch) {
  tf::Tensor x = tf::scalar(3.0);
  {
    tf::GradientTape tape;
    tf::Tensor y = tf::pow(x, 2.0);
    EXPECT_FALSE(tape.gradient(y, x).has_value());
  }
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = tf::pow(x, 2.0);
  EXPECT_FLOAT_EQ(tape.gradient(y, x)->item(), 6.0);
}

TEST(SeedTutorial, NonTrainableVariable) {
  tf::Variable x(5.0, {.trainable = false});
  {
    tf::GradientTape tape;
    tf::Tensor y = tf::pow(x, 3.0);
    EXPECT_FALSE(tape.gradient(y, x).has_value());
  }
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = tf::pow(x, 3.0);
  EXPECT_NEAR(tape.gradient(y, x)->item(), 75.0, 1e-4);
}

TEST(SeedTutorial, WatchAccessedVariables) {
  tf::Variable x0(5.0);
  {
    tf::GradientTape tape({.watch_accessed_variables = true});
    EXPECT_FLOAT_EQ(tape.gradient(tf::pow(x0, 2.0), x0)->item(), 10.0);
  }
  {
    tf::GradientTape tape({.watch_accessed_variables = false});
    EXPECT_FALSE(tape.gradient(tf::pow(x0, 2.0), x0).has_value());
  }
  tf::GradientTape tape({.watch_accessed_variables = false});
  tape.watch(x0);
  EXPECT_FLOAT_EQ(tape.gradient(tf::pow(x0, 2.0), x0)->item(), 10.0);
}

TEST(SeedTutorial, PersistentTwoVariables) {
  tf::Variable x0(5.0), x1(10.0);
  tf::GradientTape tape({.persistent = true});
  tf::Tensor y0 = tf::pow(x0, 2.0);
  tf::Tensor y1 = tf::pow(x1, 2.0);
  EXPECT_FLOAT_EQ(tape.gradient(y0, x0)->item(), 10.0);
  EXPECT_FLOAT_EQ(tape.gradient(y1, x1)->item(), 20.0);
}

TEST(SeedAdvancedAutodiff, StopRecording) {
  tf::Variable x(2.0), y(3.0);
  tf::GradientTape t;
  tf::Tensor x_sq = x * x;
  tf::Tensor y_sq;
  {
    auto pause = t.stop_recording();
    y_sq = y * y;
  }
  tf::Tensor z = x_sq + y_sq;
  auto grad = t.gradient(z, std::map<std::string, tf::Source>{{"x", x}, {"y", y}});
  EXPECT_FLOAT_EQ(grad["x"]->item(), 4.0);
  EXPECT_FALSE(grad["y"].has_value());
}

TEST(SeedAdvancedAutodiff, Reset) {
  tf::Variable x(2.0), y(3.0);
  tf::GradientTape t;
  tf::Tensor y_sq = y * y;
  t.reset();
  tf::Tensor z = x * x + y_sq;
  auto grad = t.gradient(z, std::map<std::string, tf::Source>{{"x", x}, {"y", y}});
  EXPECT_FLOAT_EQ(grad["x"]->item(), 4.0);
  EXPECT_FALSE(grad["y"].has_value());
}

TEST(SeedAdvancedAutodiff, StopGradient) {
  tf::Variable x(2.0), y(3.0);
  tf::GradientTape t;
  tf::Tensor y_sq = tf::pow(y, 2.0);
  tf::Tensor z = tf::pow(x, 2.0) + tf::stop_gradient(y_sq);
  auto grad = t.gradient(z, std::map<std::string, tf::Source>{{"x", x}, {"y", y}});
  EXPECT_FLOAT_EQ(grad["x"]->item(), 4.0);
  EXPECT_FALSE(grad["y"].has_value());
}

TEST(SeedAdvancedAutodiff, MultipleTapes) {
  tf::Tensor x0 = tf::scalar(0.0), x1 = tf::scalar(0.0);
  tf::GradientTape tape0, tape1;
  tape0.watch(x0);
  tape1.watch(x1);
  tf::Tensor y0 = tf::sin(x0);
  tf::Tensor y1 = tf::sigmoid(x1);
  tf::Tensor y = y0 + y1;
  tf::Tensor ys = tf::reduce_sum(y);
  EXPECT_FLOAT_EQ(tape0.gradient(ys, x0)->item(), 1.0);
  EXPECT_FLOAT_EQ(tape1.gradient(ys, x1)->item(), 0.25);
}

TEST(SeedAdvancedAutodiff, HigherOrder) {
  tf::Variable x(1.0);
  tf::GradientTape t2;
  std::optional<tf::Tensor> dy_dx;
  {
    tf::GradientTape t1;
    tf::Tensor y = x * x * x;
    dy_dx = t1.gradient(y, x);
  }
  EXPECT_FLOAT_EQ(dy_dx->item(), 3.0);
  EXPECT_FLOAT_EQ(t2.gradient(*dy_dx, x)->item(), 6.0);
}

}  // namespace
