// The attention wing's layers: errors that name the layer and the shapes, config round trips,
// dropout in training only, and second-order gradients through an attention block.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "layers/internal/serialization_json.h"
#include "layers/layers.h"
#include "tape/tapeflow.h"
#include "tests/testing/gradient_check.h"

namespace tf = tapeflow;
namespace L = tf::layers;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

namespace {

TEST(LayerNormalizationLayer, Errors) {
  EXPECT_THAT([] { L::LayerNormalization({.axis = {}}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("axis must name at least one axis")));
  EXPECT_THAT([] { L::LayerNormalization({.axis = {3}, .name = "ln"})(tf::zeros({2, 3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("LayerNormalization 'ln': axis 3 is out of range for input shape [2, 3]")));
  EXPECT_THAT([] { L::LayerNormalization({.axis = {1, -1}})(tf::zeros({2, 3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("is repeated")));
  L::LayerNormalization ln({.name = "ln2"});
  ln(tf::zeros({2, 3}));
  EXPECT_THAT([&] { ln(tf::zeros({2, 4})); },
              ThrowsMessage<std::invalid_argument>(
                  HasSubstr("LayerNormalization 'ln2': expected the normalized axes to have shape [3] (as built), got input shape [2, 4]")));
}

TEST(LayerNormalizationLayer, FusedPathEqualsTheComposedOps) {
  // axis -1 with center and scale runs layer_norm_affine: its output and gradients (x, gamma, beta)
  // equal layer_norm(x) * gamma + beta, float32 and float64; the other settings keep the general path.
  for (tf::DType dt : {tf::DType::kFloat32, tf::DType::kFloat64}) {
    const double tol = dt == tf::DType::kFloat32 ? 1e-5 : 1e-12;
    tf::Generator g(3);
    const tf::Tensor x = tf::cast(tf::random_normal({4, 5, 24}, g), dt), w = tf::cast(tf::random_normal({4, 5, 24}, g), dt);
    L::LayerNormalization ln({.epsilon = 1e-2, .dtype = dt});
    ln.build(x.shape());
    const std::vector<tf::Variable> vars = ln.trainable_variables();  // gamma, beta
    vars[0].assign(tf::cast(tf::random_normal({24}, g), dt));
    vars[1].assign(tf::cast(tf::random_normal({24}, g), dt));
    tf::GradientTape fused({.persistent = true}), composed({.persistent = true});
    fused.watch(x);
    composed.watch(x);
    const tf::Tensor y = ln(x);
    const tf::Tensor want = tf::layer_norm(x, 1e-2) * vars[0].read() + vars[1].read();
    EXPECT_TRUE(tf::testing::all_close(y, want, tol, tol));
    const auto gy = fused.gradient(tf::reduce_sum(y * w), {x, vars[0], vars[1]});
    const auto gw = composed.gradient(tf::reduce_sum(want * w), {x, vars[0], vars[1]});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(tf::testing::all_close(*gy[i], *gw[i], tol, tol)) << i;
  }
}

TEST(MultiHeadAttentionLayer, Errors) {
  EXPECT_THAT([] { L::MultiHeadAttention({.num_heads = 0, .key_dim = 2}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("num_heads and key_dim must be >= 1")));
  EXPECT_THAT([] { L::MultiHeadAttention({.num_heads = 2, .key_dim = 2, .dropout = 1.0}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("dropout must be in [0, 1)")));
  auto mha = std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 2, .name = "att"});
  EXPECT_THAT([&] { (*mha)(tf::zeros({2, 3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("MultiHeadAttention 'att': expected query, value and key of rank 3")));
  (*mha)(std::vector<tf::Tensor>{tf::zeros({2, 3, 4}), tf::zeros({2, 5, 4})});
  EXPECT_THAT([&] { (*mha)(std::vector<tf::Tensor>{tf::zeros({2, 3, 5}), tf::zeros({2, 5, 4})}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("expected query [batch, steps, 4] (the built query kernel is [4, 2, 2]), got shape [2, 3, 5]")));
  EXPECT_THAT([&] { mha->attend(tf::zeros({2, 3, 4}), tf::zeros({2, 5, 4}), {.key = tf::zeros({2, 6, 4})}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("expected query [B, T, dq], value [B, S, dv] and key [B, S, dk], got [2, 3, 4], [2, 5, 4], [2, 6, 4]")));
  EXPECT_THAT([&] { mha->attend(tf::zeros({2, 3, 4}), tf::zeros({2, 5, 4}), {.attention_mask = tf::ones({2, 5, 3})}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("attention_mask must be [B, T, S] = [2, 3, 5] (or [T, S]), got [2, 5, 3]")));
  EXPECT_THAT([&] { (*mha)(std::vector<tf::Tensor>{tf::zeros({2, 3, 4})}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("expects [query, value] or [query, value, key], got 1 inputs")));
}

TEST(MultiHeadAttentionLayer, DropoutOnlyWhenTraining) {
  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 3, .dropout = 0.5, .seed = 4});
  tf::Generator g(1);
  const tf::Tensor x = tf::random_normal({2, 6, 4}, g);
  const tf::Tensor a = mha(x, false), b = mha(x, false), t = mha(x, true);
  EXPECT_TRUE(tf::testing::all_close(a, b, 0, 0));
  EXPECT_FALSE(tf::testing::all_close(a, t, 1e-3, 1e-3));
}

TEST(OtherAttentionWingLayers, Errors) {
  EXPECT_THAT([] { L::Embedding({.input_dim = 0, .output_dim = 2}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("input_dim and output_dim must be >= 1")));
  EXPECT_THAT([] { L::Embedding({.input_dim = 3, .output_dim = 2, .name = "emb"})(tf::constant<std::int32_t>({1, 3}, {1, 2})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Embedding 'emb' (input_dim 3): ids of shape [1, 2]")));
  L::GlobalAveragePooling1D gap({.name = "gap"});
  EXPECT_THAT([&] { gap(tf::zeros({2, 3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("GlobalAveragePooling1D 'gap': expected inputs [batch, steps, features], got shape [2, 3]")));
  EXPECT_THAT([&] { gap.call(tf::zeros({2, 3, 4}), tf::ones({2, 4}), false); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("the mask must be [batch, steps] = [2, 3] for inputs [2, 3, 4], got mask [2, 4]")));
  EXPECT_THAT([] { L::Permute({.dims = {1, 3}}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("dims must be a permutation of 1..2, got (1, 3)")));
  EXPECT_THAT([] { L::Permute({.dims = {2, 1}, .name = "p"})(tf::zeros({2, 3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Permute 'p': expected inputs of rank 3")));
  EXPECT_THAT([] { L::PositionEmbedding({.sequence_length = 3, .name = "pos"})(tf::zeros({2, 4, 5})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("PositionEmbedding 'pos': expected inputs [batch, steps <= 3, features], got shape [2, 4, 5]")));
  EXPECT_THAT([] { tf::masked_softmax(tf::zeros({2, 3}), tf::ones({3, 3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("masked_softmax: the mask [3, 3] does not broadcast to the logits [2, 3]")));
}

TEST(AttentionWingLayers, ConfigRoundTrips) {
  std::vector<std::shared_ptr<L::Layer>> layers = {
      std::make_shared<L::LayerNormalization>(L::LayerNormalizationOptions{.axis = {1, 2}, .epsilon = 1e-6, .center = false}),
      std::make_shared<L::MultiHeadAttention>(L::MultiHeadAttentionOptions{
          .num_heads = 4, .key_dim = 16, .value_dim = 8, .dropout = 0.1, .use_bias = false, .output_shape = 32, .seed = 7}),
      std::make_shared<L::Embedding>(L::EmbeddingOptions{.input_dim = 10, .output_dim = 3, .mask_zero = true}),
      std::make_shared<L::PositionEmbedding>(L::PositionEmbeddingOptions{.sequence_length = 49}),
      std::make_shared<L::GlobalAveragePooling1D>(L::GlobalPooling1DOptions{.keepdims = true}),
      std::make_shared<L::GlobalMaxPooling1D>(),
      std::make_shared<L::Permute>(L::PermuteOptions{.dims = {2, 1}})};
  for (const auto& l : layers) {
    const nlohmann::json j = L::serialize_json(*l);
    EXPECT_EQ(L::serialize_json(*L::deserialize(j)), j) << j.dump();
  }
  EXPECT_EQ(L::serialize_json(*layers[1])["config"]["value_dim"], 8);
  nlohmann::json bad = L::serialize_json(*layers[0]);
  bad["config"]["rms_scaling"] = true;
  EXPECT_THAT([&] { L::deserialize(bad); }, ThrowsMessage<std::invalid_argument>(HasSubstr("rms_scaling")));
}

// First and second order through an attention block (self-attention, residual, LayerNormalization,
// GELU) with respect to its input, against float64 finite differences.
TEST(AttentionWingLayers, FirstAndSecondOrderThroughAnAttentionBlock) {
  auto mha = std::make_shared<L::MultiHeadAttention>(
      L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 2, .seed = 3, .dtype = tf::DType::kFloat64});
  auto ln = std::make_shared<L::LayerNormalization>(L::LayerNormalizationOptions{.dtype = tf::DType::kFloat64});
  const tf::Tensor x = tf::testing::random_f64({2, 3, 3}, 11);
  EXPECT_TRUE(tf::testing::gradcheck_both([&](const std::vector<tf::Tensor>& in) {
    return tf::gelu((*ln)((*mha)(in[0]) + in[0])) * tf::constant<double>({0.3, -1.0, 2.0}, {3});
  }, {x}));
}

// The vectorized jacobian (experimental_use_pfor, the batching rules) through an attention block
// with a causal mask agrees with the loop of gradients.
TEST(AttentionWingLayers, VectorizedJacobianMatchesLoopThroughAnAttentionBlock) {
  auto mha = std::make_shared<L::MultiHeadAttention>(
      L::MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 2, .seed = 5, .dtype = tf::DType::kFloat64});
  auto ln = std::make_shared<L::LayerNormalization>(L::LayerNormalizationOptions{.dtype = tf::DType::kFloat64});
  const tf::Tensor x = tf::testing::random_f64({2, 3, 4}, 17);
  tf::Tensor jac[2];
  for (int v = 0; v < 2; ++v) {
    tf::GradientTape tape({.persistent = true});
    tape.watch(x);
    const tf::Tensor y = tf::gelu((*ln)(mha->attend(x, x, {.use_causal_mask = true}).first + x));
    jac[v] = *tape.jacobian(y, x, {.experimental_use_pfor = v == 0});
  }
  EXPECT_EQ(jac[0].shape(), tf::Shape({2, 3, 4, 2, 3, 4}));
  EXPECT_TRUE(tf::testing::all_close(jac[0], jac[1], 1e-12, 1e-12));
  // Causal: output step 0 does not depend on input steps 1 and 2 of its example.
  EXPECT_EQ(tf::reduce_sum(tf::abs(tf::slice(jac[0], {0, 0, 0, 0, 1, 0}, {1, 1, 4, 1, 2, 4}))).item<double>(), 0.0);
}

}  // namespace
