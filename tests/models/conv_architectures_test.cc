// make_classifier_cnn (W8) and the DCGAN pair (W9): Keras parameter counts, shapes, summary rows,
// seeds, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/architectures.h"
#include "tape/tapeflow.h"

namespace tapeflow::models {
namespace {

using ::testing::HasSubstr;

std::int64_t count(const std::vector<Variable>& vars) {
  std::int64_t n = 0;
  for (const auto& v : vars) n += v.shape().num_elements();
  return n;
}

TEST(ConvArchitectures, ConvnetIsTheKerasExample) {
  auto m = make_classifier_cnn({.seed = 3});
  EXPECT_EQ(m->count_params(), 34826);
  EXPECT_EQ((*m)(zeros({5, 784})).shape(), (Shape{5, 10}));
  const std::string s = m->summary();
  for (const char* row : {"(None, 26, 26, 32)", "(None, 13, 13, 32)", "(None, 11, 11, 64)", "(None, 5, 5, 64)",
                          "(None, 1600)", "(None, 10)", "Conv2D", "MaxPooling2D", "Dropout", "320", "18,496", "16,010"})
    EXPECT_THAT(s, HasSubstr(row));
  auto again = make_classifier_cnn({.seed = 3});
  EXPECT_EQ(m->variables()[0].value().to_vector<float>(), again->variables()[0].value().to_vector<float>());
  EXPECT_THROW(make_classifier_cnn({.classes = 0}), std::invalid_argument);
  EXPECT_THROW(make_classifier_cnn({.dropout = 1.0}), std::invalid_argument);
  EXPECT_THROW(make_classifier_cnn({.height = 5, .width = 5}), std::invalid_argument);  // too small for two stages
}

TEST(ConvArchitectures, DcganIsTheTensorFlowTutorial) {
  auto g = make_dcgan_generator({.seed = 1});
  auto d = make_dcgan_discriminator({.seed = 2});
  EXPECT_EQ(g->count_params(), 2330944);
  EXPECT_EQ(count(g->trainable_variables()), 2305472);
  EXPECT_EQ(d->count_params(), 212865);
  const Tensor images = (*g)(zeros({3, 100}));
  EXPECT_EQ(images.shape(), (Shape{3, 28, 28, 1}));
  EXPECT_EQ((*d)(images).shape(), (Shape{3, 1}));
  const std::string s = g->summary();
  for (const char* row : {"(None, 7, 7, 256)", "(None, 7, 7, 128)", "(None, 14, 14, 64)", "(None, 28, 28, 1)",
                          "Conv2DTranspose", "819,200", "204,800", "1,600"})
    EXPECT_THAT(s, HasSubstr(row));
  EXPECT_THAT(d->summary(), HasSubstr("(None, 7, 7, 128)"));
  EXPECT_THROW(make_dcgan_generator({.noise_dim = 0}), std::invalid_argument);
}

}  // namespace
}  // namespace tapeflow::models
