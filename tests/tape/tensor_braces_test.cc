// Tensor's constructors pick the same overload on every compiler: Tensor({x}) is a [1] tensor
// (a one-element list), Tensor(x) a scalar. With plain Tensor(double) / Tensor(float) / Tensor(int)
// overloads clang 16 took Tensor({x}) as a scalar and GCC 12 as [1]; scripts/build_clang.sh runs
// this suite under clang.
#include <gtest/gtest.h>

#include <stdexcept>

#include "tape/core/shape.h"
#include "tape/core/tensor.h"

namespace tf = tapeflow;

namespace {

TEST(TensorBraces, OneElementListIsRankOneOnEveryCompiler) {
  const double x = 2.5;
  const float y = 1.5f;
  const int z = 3;
  EXPECT_EQ(tf::Tensor({x}).shape(), tf::Shape{1});
  EXPECT_EQ(tf::Tensor({y}).shape(), tf::Shape{1});
  EXPECT_EQ(tf::Tensor({z}).shape(), tf::Shape{1});
  EXPECT_EQ(tf::Tensor({z}).dtype(), tf::DType::kFloat32);  // lists are float32, as documented
  EXPECT_EQ(tf::Tensor({1.0}).shape(), tf::Shape{1});
  EXPECT_EQ(tf::Tensor({{x}}).shape(), (tf::Shape{1, 1}));
  EXPECT_EQ(tf::Tensor({x, x}).shape(), tf::Shape{2});
  EXPECT_EQ(tf::Tensor({x}).to_vector<double>(), std::vector<double>{2.5});
}

TEST(TensorBraces, NumbersAreScalarsOfTheirTfDtype) {
  const tf::Tensor d(2.5), f(1.5f), i(3);
  EXPECT_EQ(d.rank(), 0);
  EXPECT_EQ(d.dtype(), tf::DType::kFloat32);
  EXPECT_EQ(f.dtype(), tf::DType::kFloat32);
  EXPECT_EQ(i.dtype(), tf::DType::kInt32);
  EXPECT_EQ(i.item(), 3.0);
  const tf::Tensor implicit = 4.0;  // tensors are values: numbers convert implicitly
  EXPECT_EQ(implicit.rank(), 0);
  EXPECT_EQ(implicit.item(), 4.0);
}

// Shapes whose element count (or bytes) overflows int64 are errors, not wrapped-around sizes.
TEST(TensorBraces, ShapeOverflowIsAnError) {
  const std::int64_t big = std::int64_t{1} << 32;
  const tf::Shape huge{big, big};
  EXPECT_THROW(huge.num_elements(), tf::ShapeError);
  EXPECT_EQ(huge.strides()[0], big);  // [2^32, 1]: the strides themselves fit
  EXPECT_THROW((tf::Shape{2, big, big}).strides(), tf::ShapeError);
  EXPECT_THROW(tf::Tensor::empty(huge, tf::DType::kFloat32), tf::ShapeError);
  try {
    tf::Tensor::empty(tf::Shape{big, big >> 2}, tf::DType::kFloat64);  // 2^62 elements, 2^65 bytes
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[4294967296, 1073741824]"), std::string::npos) << e.what();
  }
  // A zero dimension makes the product 0 however large the others; strides still overflow.
  const tf::Shape empty{0, big, big};
  EXPECT_EQ(empty.num_elements(), 0);
  EXPECT_THROW(empty.strides(), tf::ShapeError);
  EXPECT_EQ((tf::Shape{big, big >> 2}).num_elements(), std::int64_t{1} << 62);
}

}  // namespace
