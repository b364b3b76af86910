// The one-include umbrella compiles on its own and exposes every layer of the library.
#include "tapeflow.h"

#include <gtest/gtest.h>

namespace tf = tapeflow;

TEST(Umbrella, OneIncludeGivesTheWholeLibrary) {
  tf::layers::Dense dense({.units = 3});
  tf::Tensor x = tf::ones({2, 4});
  tf::GradientTape tape;
  tf::Tensor y = tf::reduce_sum(dense(x));
  auto grads = tape.gradient(y, dense.trainable_variables());
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(grads[0]->shape(), (tf::Shape{4, 3}));
}
