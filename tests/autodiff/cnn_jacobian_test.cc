// Vectorized (experimental_use_pfor) and loop jacobians, batch_jacobians and Hessians agree through a
// small float64 convnet (Conv2D SAME stride 2, MaxPooling2D, Conv2DTranspose, AveragePooling2D,
// flatten, Dense), and match finite differences.
#include <gtest/gtest.h>

#include "layers/layers.h"
#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
using namespace tf::layers;
using tf::testing::all_close;
using tf::testing::random_f64;

namespace {

const tf::DType f64 = tf::DType::kFloat64;

struct SmallCnn {
  Conv2D conv{{.filters = 3, .kernel_size = {3, 3}, .strides = {2, 2}, .padding = "same", .activation = "tanh",
               .seed = 1, .dtype = f64}};
  MaxPooling2D pool{{.pool_size = {2, 2}, .strides = {{1, 1}}, .dtype = f64}};
  Conv2DTranspose up{{.filters = 2, .kernel_size = {2, 2}, .strides = {2, 2}, .activation = "elu", .seed = 2, .dtype = f64}};
  AveragePooling2D avg{{.pool_size = {2, 2}, .padding = "same", .dtype = f64}};
  Dense dense{{.units = 3, .seed = 3, .dtype = f64}};
  tf::Tensor operator()(const tf::Tensor& x) {
    const tf::Tensor h = avg(up(pool(conv(x))));
    return dense(tf::reshape(h, std::vector<std::int64_t>{h.shape()[0], -1}));  // Flatten (a float32 layer)
  }
};

TEST(CnnJacobian, VectorizedMatchesLoop) {
  SmallCnn net;
  const tf::Tensor x = random_f64({2, 6, 6, 1}, 7);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  const tf::Tensor y = net(x);
  ASSERT_EQ(y.shape(), (tf::Shape{2, 3}));
  const tf::Tensor vec = *tape.jacobian(y, x, {.experimental_use_pfor = true});
  const tf::Tensor loop = *tape.jacobian(y, x, {.experimental_use_pfor = false});
  EXPECT_EQ(vec.shape(), (tf::Shape{2, 3, 2, 6, 6, 1}));
  EXPECT_TRUE(all_close(vec, loop, 1e-12, 1e-12));
  const tf::Tensor bvec = *tape.batch_jacobian(y, x, {.experimental_use_pfor = true});
  const tf::Tensor bloop = *tape.batch_jacobian(y, x, {.experimental_use_pfor = false});
  EXPECT_EQ(bvec.shape(), (tf::Shape{2, 3, 6, 6, 1}));
  EXPECT_TRUE(all_close(bvec, bloop, 1e-12, 1e-12));
  // And the jacobian is right: finite differences of the whole net.
  EXPECT_TRUE(tf::testing::gradcheck([&](const std::vector<tf::Tensor>& in) { return net(in[0]); }, {x}));
}

TEST(CnnJacobian, HessianOfTheLossVectorizedMatchesLoop) {
  SmallCnn net;
  const tf::Tensor x = random_f64({2, 6, 6, 1}, 8);
  net(x);  // build
  const tf::Variable kernel = net.conv.kernel();
  auto loss = [&] { return tf::reduce_sum(tf::square(net(x))); };
  const tf::HessianResult vec = tf::hessian(loss, {kernel}, {.experimental_use_pfor = true});
  const tf::HessianResult loop = tf::hessian(loss, {kernel}, {.experimental_use_pfor = false});
  EXPECT_EQ(vec.matrix.shape(), (tf::Shape{27, 27}));
  EXPECT_TRUE(all_close(vec.matrix, loop.matrix, 1e-10, 1e-12));
  EXPECT_TRUE(all_close(vec.gradient, loop.gradient, 1e-12, 1e-12));
}

}  // namespace
