#include "models/architectures.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tape/ops/math_ops.h"
#include "tape/ops/reduction_ops.h"

namespace tapeflow::models {
namespace {

using ::testing::HasSubstr;

TEST(ArchitecturesTest, ClassifierMlpMatchesW1) {
  auto m = make_classifier_mlp({.seed = 1});
  ASSERT_EQ(m->layers().size(), 7u);
  EXPECT_EQ(m->count_params(), 271370);
  EXPECT_EQ(m->trainable_variables().size(), 10u);      // 3 kernels, 3 biases, 2 x (gamma, beta)
  EXPECT_EQ(m->non_trainable_variables().size(), 4u);   // 2 x (moving mean, variance)
  const std::string s = m->summary();
  EXPECT_THAT(s, HasSubstr("(BatchNormalization)"));
  EXPECT_THAT(s, HasSubstr("(None, 10)"));
  EXPECT_THAT(s, HasSubstr("Total params: 271,370 (1.04 MB)"));
  EXPECT_THAT(s, HasSubstr("Non-trainable params: 1,024 (4.00 KB)"));
  EXPECT_EQ((*m)(zeros(Shape{5, 784})).shape(), (Shape{5, 10}));
}

TEST(ArchitecturesTest, SameSeedSameWeights) {
  auto a = make_classifier_mlp({.seed = 7}), b = make_classifier_mlp({.seed = 7}), c = make_classifier_mlp({.seed = 8});
  EXPECT_EQ(a->variables()[0].value().to_vector<float>(), b->variables()[0].value().to_vector<float>());
  EXPECT_NE(a->variables()[0].value().to_vector<float>(), c->variables()[0].value().to_vector<float>());
}

TEST(ArchitecturesTest, ClassifierOptionsAndErrors) {
  auto m = make_classifier_mlp({.inputs = 4, .hidden = {3}, .classes = 2, .batch_norm = false, .dropout = 0.5});
  EXPECT_EQ(m->layers().size(), 4u);  // Dense, ReLU, Dropout, Dense
  EXPECT_EQ(m->count_params(), 4 * 3 + 3 + 3 * 2 + 2);
  EXPECT_THROW(make_classifier_mlp({.hidden = {0}}), std::invalid_argument);
  EXPECT_THROW(make_classifier_mlp({.classes = 0}), std::invalid_argument);
  EXPECT_THROW(make_classifier_mlp({.dropout = 1.0}), std::invalid_argument);
}

TEST(ArchitecturesTest, GanGeneratorAndDiscriminator) {
  auto g = make_gan_generator({.seed = 3});
  auto d = make_gan_discriminator({.seed = 4});
  EXPECT_EQ(g->count_params(), (100 * 256 + 256) + (256 * 512 + 512) + 4 * 512 + (512 * 784 + 784));
  EXPECT_EQ(d->count_params(), (784 * 512 + 512) + (512 * 256 + 256) + (256 + 1));
  const Tensor images = (*g)(ones(Shape{2, 100}));
  EXPECT_EQ(images.shape(), (Shape{2, 784}));
  EXPECT_LE(reduce_max(abs(images)).item(), 1.0);  // tanh output
  EXPECT_EQ((*d)(images).shape(), (Shape{2, 1}));
  EXPECT_THROW(make_gan_generator({.noise_dim = 0}), std::invalid_argument);
  EXPECT_THROW(make_gan_discriminator({.image_dim = -1}), std::invalid_argument);
}

}  // namespace
}  // namespace tapeflow::models
