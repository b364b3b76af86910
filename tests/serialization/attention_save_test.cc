// The attention wing in whole models: the ViT (and a small cross-attention model) through to_json /
// model_from_json and save_model / load_model give the same predictions bit for bit.
#include <gtest/gtest.h>

#include "models/architectures.h"
#include "tests/serialization/test_models.h"

namespace tapeflow {
namespace {

using namespace testing_io;
namespace L = layers;

TEST(AttentionSaveModel, VitRoundTripIsBitIdentical) {
  auto model = models::make_classifier_vit({.transformer_layers = 1, .seed = 3});
  EXPECT_EQ(model->count_params(), 138890 - 3 * 33472);
  Generator g(5);
  const Tensor x = random_uniform({4, 784}, g);
  const Tensor before = model->predict(x);
  const std::string path = temp_path("vit.h5");
  models::save_model(*model, path);
  auto loaded = models::load_model(path, {.compile = false});
  EXPECT_TRUE(same_bits(loaded->predict(x), before));
  auto from_json = models::model_from_json(models::to_json(*model));
  from_json->set_weights(model->get_weights());
  EXPECT_TRUE(same_bits(from_json->predict(x), before));
  EXPECT_EQ(models::to_json(*from_json), models::to_json(*model));
}

TEST(AttentionSaveModel, CrossAttentionWithKeyAndEmbedding) {
  auto ids = L::Input({.shape = {5}});
  auto q = L::Input({.shape = {3, 6}});
  auto e = (*std::make_shared<L::Embedding>(L::EmbeddingOptions{.input_dim = 7, .output_dim = 4, .seed = 1}))(ids);
  auto mha = std::make_shared<L::MultiHeadAttention>(
      L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 3, .value_dim = 2, .output_shape = 5, .seed = 2});
  auto a = (*mha)(std::vector<L::KerasTensor>{q, e, e});
  auto out = (*std::make_shared<L::GlobalMaxPooling1D>())(
      (*std::make_shared<L::LayerNormalization>(L::LayerNormalizationOptions{.axis = {1, 2}}))(a));
  auto model = std::make_shared<models::Functional>(std::vector<L::KerasTensor>{ids, q}, std::vector<L::KerasTensor>{out});
  Generator g(9);
  const Tensor xi = constant<float>({1, 0, 6, 3, 2, 5, 5, 0, 1, 4}, {2, 5});
  const Tensor xq = random_normal({2, 3, 6}, g);
  const Tensor before = model->predict(std::vector<Tensor>{xi, xq});
  EXPECT_EQ(before.shape(), (Shape{2, 5}));
  const std::string path = temp_path("cross_attention.h5");
  models::save_model(*model, path);
  auto loaded = std::dynamic_pointer_cast<models::Functional>(models::load_model(path, {.compile = false}));
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(same_bits(loaded->predict(std::vector<Tensor>{xi, xq}), before));
}

}  // namespace
}  // namespace tapeflow
