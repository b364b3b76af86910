// The 1-D convolution, pooling and RMS normalization layers: errors that name the layer and the
// shapes, config round trips (Keras 3's list spelling read too), RMSNormalization over a
// non-trailing axis, and first and second order gradients through Conv1D -> pooling -> RMSNormalization.
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

TEST(Conv1DLayer, Errors) {
  EXPECT_THAT([] { L::Conv1D({.filters = 0, .kernel_size = 2}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("filters must be positive, got 0")));
  EXPECT_THAT([] { L::Conv1D({.filters = 2, .kernel_size = 2, .padding = "full"}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("padding must be \"valid\", \"same\" or \"causal\", got \"full\"")));
  EXPECT_THAT([] { L::Conv1D({.filters = 2, .kernel_size = 2, .strides = 2, .dilation_rate = 2}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("strides > 1 not supported in conjunction with dilation_rate > 1")));
  L::Conv1D conv({.filters = 2, .kernel_size = 3, .dilation_rate = 2, .name = "c1"});
  EXPECT_THAT([&] { conv(tf::zeros({2, 5})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Conv1D 'c1': expected inputs [batch, steps, channels], got shape [2, 5]")));
  EXPECT_THAT([&] { conv(tf::zeros({2, 4, 3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Conv1D 'c1': input shape [2, 4, 3] is too short for kernel_size 3 (dilation_rate 2)")));
  EXPECT_EQ(conv(tf::zeros({2, 5, 3})).shape(), (tf::Shape{2, 1, 2}));
  EXPECT_THAT([&] { conv(tf::zeros({2, 5, 4})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("Conv1D 'c1': expected inputs with 3 channels (last axis) as the layer was built for, got shape [2, 5, 4] (kernel [3, 3, 2])")));
}

TEST(Conv1DLayer, OutputLengthsAndCausality) {
  for (const auto& [padding, strides, expected] : std::vector<std::tuple<std::string, std::int64_t, std::int64_t>>{
           {"valid", 1, 5}, {"valid", 2, 3}, {"same", 1, 7}, {"same", 3, 3}, {"causal", 1, 7}, {"causal", 2, 4}}) {
    L::Conv1D c({.filters = 1, .kernel_size = 3, .strides = strides, .padding = padding});
    EXPECT_EQ(c(tf::zeros({1, 7, 2})).shape(), (tf::Shape{1, expected, 1})) << padding << " " << strides;
    EXPECT_EQ(c.compute_output_shape({1, 7, 2}), (tf::Shape{1, expected, 1}));
  }
  // Causal: output[t] depends on inputs[:t + 1] only.
  L::Conv1D c({.filters = 2, .kernel_size = 3, .padding = "causal", .dilation_rate = 2, .seed = 1,
               .dtype = tf::DType::kFloat64});
  tf::Tensor x = tf::testing::random_f64({1, 8, 2}, 3);
  tf::GradientTape tape;
  tape.watch(x);
  const tf::Tensor y = c(x);
  const auto g = tape.gradient(tf::reduce_sum(tf::slice(y, {0, 4, 0}, {1, 1, 2})), x);
  const std::vector<double> gv = g->to_vector<double>();
  for (std::size_t i = 5 * 2; i < gv.size(); ++i) EXPECT_EQ(gv[i], 0.0) << i;
  EXPECT_NE(gv[4 * 2], 0.0);
}

TEST(Pooling1DLayers, ErrorsAndShapes) {
  EXPECT_THAT([] { L::MaxPooling1D({.pool_size = 0}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("pool_size and strides must be positive, got pool_size 0")));
  EXPECT_THAT([] { L::AveragePooling1D({.padding = "causal"}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("padding must be \"valid\" or \"same\", got \"causal\"")));
  EXPECT_THAT([] { L::MaxPooling1D({.pool_size = 4, .name = "mp"})(tf::zeros({2, 3, 1})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("MaxPooling1D 'mp': input shape [2, 3, 1] is too short for pool_size 4")));
  EXPECT_THAT([] { L::AveragePooling1D({.name = "ap"})(tf::zeros({2, 3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("AveragePooling1D 'ap': expected inputs [batch, steps, features], got shape [2, 3]")));
  EXPECT_EQ(L::MaxPooling1D({.pool_size = 2, .padding = "same"})(tf::zeros({2, 5, 3})).shape(), (tf::Shape{2, 3, 3}));
  EXPECT_EQ(L::AveragePooling1D({.pool_size = 3, .strides = 1})(tf::zeros({2, 5, 3})).shape(), (tf::Shape{2, 3, 3}));
}

TEST(RMSNormalizationLayer, ErrorsAndANonTrailingAxis) {
  EXPECT_THAT([] { L::RMSNormalization({.axis = {}}); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("axis must name at least one axis")));
  EXPECT_THAT([] { L::RMSNormalization({.axis = {2}, .name = "rms"})(tf::zeros({2, 3})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr("RMSNormalization 'rms': axis 2 is out of range for input shape [2, 3]")));
  L::RMSNormalization rms({.name = "rms2"});
  rms(tf::zeros({2, 3}));
  EXPECT_THAT([&] { rms(tf::zeros({2, 4})); },
              ThrowsMessage<std::invalid_argument>(HasSubstr(
                  "RMSNormalization 'rms2': expected the normalized axes to have shape [3] (as built), got input shape [2, 4]")));
  // axis 1 of [2, 3, 4]: the scale [3] multiplies along axis 1 (Keras 3.15 itself fails to broadcast
  // a non-trailing scale; this is ops.rms_normalization's definition).
  L::RMSNormalization mid({.axis = {1}, .epsilon = 0.0, .dtype = tf::DType::kFloat64});
  const tf::Tensor x = tf::testing::random_f64({2, 3, 4}, 5);
  mid(x);
  mid.set_weights({tf::constant<double>({1.0, 2.0, -1.0}, {3})});
  const tf::Tensor expected = x * tf::rsqrt(tf::reduce_mean(tf::square(x), 1, true)) *
                              tf::constant<double>({1.0, 2.0, -1.0}, {1, 3, 1});
  EXPECT_TRUE(tf::testing::all_close(mid(x), expected, 1e-15, 1e-15));
}

TEST(SequenceWingLayers, ConfigRoundTrips) {
  std::vector<std::shared_ptr<L::Layer>> layers = {
      std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = 4, .kernel_size = 3, .padding = "causal", .dilation_rate = 2,
                                                   .activation = "relu", .use_bias = false, .seed = 3}),
      std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = 2, .kernel_size = 5, .strides = 2, .padding = "same"}),
      std::make_shared<L::MaxPooling1D>(L::Pooling1DOptions{.pool_size = 3, .strides = 1, .padding = "same"}),
      std::make_shared<L::AveragePooling1D>(),
      std::make_shared<L::RMSNormalization>(L::RMSNormalizationOptions{.axis = {1, 2}, .epsilon = 1e-3}),
      std::make_shared<L::RMSNormalization>()};
  for (const auto& l : layers) {
    const nlohmann::json j = L::serialize_json(*l);
    EXPECT_EQ(L::serialize_json(*L::deserialize(j)), j) << j.dump();
  }
  const nlohmann::json c = L::serialize_json(*layers[0])["config"];
  EXPECT_EQ(c["kernel_size"], nlohmann::json::parse("[3]"));
  EXPECT_EQ(c["padding"], "causal");
  // One integer reads as Keras's 1-element list; a longer list is refused naming the field.
  nlohmann::json j = L::serialize_json(*layers[2]);
  j["config"]["pool_size"] = 3;
  EXPECT_EQ(L::serialize_json(*L::deserialize(j)), L::serialize_json(*layers[2]));
  j["config"]["pool_size"] = {3, 3};
  EXPECT_THAT([&] { L::deserialize(j); }, ThrowsMessage<std::invalid_argument>(HasSubstr("pool_size")));
  nlohmann::json bad = L::serialize_json(*layers[1]);
  bad["config"]["padding"] = "full";
  EXPECT_THAT([&] { L::deserialize(bad); }, ThrowsMessage<std::invalid_argument>(HasSubstr("padding")));
}

// First and second order through Conv1D (causal, dilated) -> MaxPooling1D -> AveragePooling1D ->
// RMSNormalization with respect to the input, against float64 finite differences.
TEST(SequenceWingLayers, FirstAndSecondOrderThroughConvPoolNorm) {
  const auto f64 = tf::DType::kFloat64;
  auto conv = std::make_shared<L::Conv1D>(L::Conv1DOptions{
      .filters = 3, .kernel_size = 2, .padding = "causal", .dilation_rate = 2, .activation = "tanh", .seed = 2, .dtype = f64});
  auto mp = std::make_shared<L::MaxPooling1D>(L::Pooling1DOptions{.pool_size = 2, .strides = 1, .dtype = f64});
  auto ap = std::make_shared<L::AveragePooling1D>(L::Pooling1DOptions{.pool_size = 2, .padding = "same", .dtype = f64});
  auto rms = std::make_shared<L::RMSNormalization>(L::RMSNormalizationOptions{.dtype = f64});
  const tf::Tensor x = tf::testing::random_f64({2, 6, 2}, 13);
  EXPECT_TRUE(tf::testing::gradcheck_both([&](const std::vector<tf::Tensor>& in) {
    return (*rms)((*ap)((*mp)((*conv)(in[0])))) * tf::constant<double>({0.3, -1.0, 2.0}, {3});
  }, {x}));
}

}  // namespace
