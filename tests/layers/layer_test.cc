// Layer base: Keras naming, trainable switch, sublayer tracking, snake_case.
#include "layers/layer.h"

#include <gtest/gtest.h>

#include <set>

#include "layers/dense.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/ops/reduction_ops.h"

namespace tf = tapeflow;
using namespace tf::layers;

TEST(Layer, SnakeCaseLikeKeras) {
  EXPECT_EQ(to_snake_case("Dense"), "dense");
  EXPECT_EQ(to_snake_case("BatchNormalization"), "batch_normalization");
  EXPECT_EQ(to_snake_case("LeakyReLU"), "leaky_re_lu");
  EXPECT_EQ(to_snake_case("Conv2D"), "conv2d");
}

TEST(Layer, UniqueNamesPerClass) {
  std::string b = to_snake_case("TestThing");
  EXPECT_EQ(unique_layer_name(b), "test_thing");
  EXPECT_EQ(unique_layer_name(b), "test_thing_1");
  EXPECT_EQ(unique_layer_name(b), "test_thing_2");
  std::set<std::string> names;
  for (int i = 0; i < 5; ++i) names.insert(Dense(1).name());
  EXPECT_EQ(names.size(), 5u);
  for (const auto& n : names) EXPECT_EQ(n.rfind("dense", 0), 0u) << n;
  EXPECT_EQ(Dense(DenseOptions{.units = 1, .name = "head"}).name(), "head");
}

namespace {
// A layer with two Dense sublayers (how Model/Sequential compose layers).
class TwoDense : public Layer {
 public:
  TwoDense() : Layer("TwoDense") {
    a_ = track_layer(std::make_shared<Dense>(DenseOptions{.units = 3}));
    b_ = track_layer(std::make_shared<Dense>(DenseOptions{.units = 1}));
  }
  tf::Tensor call(const tf::Tensor& x, bool training) override { return (*b_)((*a_)(x, training), training); }
  std::shared_ptr<Dense> a_, b_;
};
}  // namespace

TEST(Layer, SublayersAndTrainableSwitch) {
  TwoDense m;
  EXPECT_EQ(m.name().rfind("two_dense", 0), 0u);
  EXPECT_FALSE(m.built());
  m(tf::ones({2, 4}));
  EXPECT_TRUE(m.built());
  EXPECT_EQ(m.variables().size(), 4u);
  EXPECT_EQ(m.count_params(), 4 * 3 + 3 + 3 + 1);
  EXPECT_EQ(m.trainable_variables()[0].name(), m.a_->name() + "/kernel:0");
  m.b_->set_trainable(false);
  EXPECT_EQ(m.trainable_variables().size(), 2u);
  EXPECT_EQ(m.non_trainable_variables().size(), 2u);
  {
    tf::GradientTape tape;  // frozen weights are not watched
    tf::Tensor y = tf::reduce_sum(m(tf::ones({2, 4})));
    auto g = tape.gradient(y, m.variables());
    EXPECT_TRUE(g[0] && g[1]);
    EXPECT_FALSE(g[2] || g[3]);
  }
  m.set_trainable(false);
  EXPECT_TRUE(m.trainable_variables().empty());
  EXPECT_EQ(m.non_trainable_variables().size(), 4u);
  m.set_trainable(true);
  EXPECT_EQ(m.trainable_variables().size(), 4u);
  EXPECT_TRUE(m.variables()[3].trainable());
}

namespace {
// A layer whose initializer returns the wrong shape (misuse add_weight must report).
class BadInit : public Layer {
 public:
  BadInit() : Layer("BadInit") {}
  void build(const tf::Shape& s) override {
    Initializer wrong("wrong", [](const tf::Shape&, tf::DType dt, tf::Generator&) { return tf::zeros({1}, dt); });
    add_weight("w", {2, 2}, wrong);
    Layer::build(s);
  }
  tf::Tensor call(const tf::Tensor& x, bool) override { return x; }
};
}  // namespace

TEST(Layer, AddWeightChecksTheInitializerResult) {
  BadInit l;
  try {
    l(tf::ones({1}));
    FAIL();
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("'wrong'"), std::string::npos) << e.what();
  }
}

TEST(Layer, GetAndSetWeights) {
  Dense a(DenseOptions{.units = 2}), b(DenseOptions{.units = 2});
  a(tf::ones({1, 3}));
  b(tf::ones({1, 3}));
  b.set_weights(a.get_weights());
  EXPECT_EQ(b.kernel().value().to_vector<float>(), a.kernel().value().to_vector<float>());
  EXPECT_THROW(b.set_weights({a.get_weights()[0]}), std::invalid_argument);
  try {
    b.set_weights({tf::ones({2, 3}), tf::ones({2})});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kernel:0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.kernel().value().to_vector<float>(), a.kernel().value().to_vector<float>());  // unchanged
}
