// The sequence wing's 1-D layers in whole models: Conv1D -> MaxPooling1D -> AveragePooling1D ->
// RMSNormalization -> GlobalAveragePooling1D -> Dense through to_json / model_from_json and
// save_model / load_model (.h5 and .keras) give the same predictions bit for bit, with the Keras
// weight names and summary shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/io/zip_archive.h"
#include "tests/serialization/test_models.h"

namespace tapeflow {
namespace {

using namespace testing_io;
using ::testing::HasSubstr;
namespace L = layers;

std::shared_ptr<models::Sequential> conv1d_model() {
  auto m = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<L::Layer>>{
      std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = 4, .kernel_size = 3, .padding = "causal", .dilation_rate = 2,
                                                   .activation = "relu", .seed = 1}),
      std::make_shared<L::MaxPooling1D>(L::Pooling1DOptions{.pool_size = 2}),
      std::make_shared<L::Conv1D>(L::Conv1DOptions{.filters = 5, .kernel_size = 2, .strides = 2, .padding = "same", .seed = 2}),
      std::make_shared<L::AveragePooling1D>(L::Pooling1DOptions{.pool_size = 2, .strides = 1}),
      std::make_shared<L::RMSNormalization>(L::RMSNormalizationOptions{.epsilon = 1e-5}),
      std::make_shared<L::GlobalAveragePooling1D>(),
      std::make_shared<L::Dense>(L::DenseOptions{.units = 3, .seed = 3})});
  m->build(Shape{1, 12, 2});
  return m;
}

TEST(SequenceSaveModel, Conv1DPoolingRMSNormRoundTrips) {
  auto model = conv1d_model();
  // Non-trivial RMS scales, so a lost weight shows.
  auto w = model->get_weights();
  for (auto& t : w)
    if (t.shape() == Shape{5}) t = constant<float>({0.5f, 1.5f, -1.f, 2.f, 0.25f}, {5});
  model->set_weights(w);
  const Tensor x = random_input({3, 12, 2}, 4);
  const Tensor before = model->predict(x);
  EXPECT_EQ(before.shape(), (Shape{3, 3}));
  const std::string s = model->summary();
  for (const char* row : {"(None, 12, 4)", "(None, 6, 4)", "(None, 3, 5)", "(None, 2, 5)", "(None, 5)", "Conv1D",
                          "MaxPooling1D", "AveragePooling1D", "RMSNormalization"})
    EXPECT_THAT(s, HasSubstr(row));
  for (const char* ext : {"h5", "keras"}) {
    const std::string path = temp_path(std::string("conv1d.") + ext);
    models::save_model(*model, path);
    auto loaded = models::load_model(path, {.compile = false});
    EXPECT_TRUE(same_bits(loaded->predict(x), before)) << ext;
    EXPECT_EQ(models::to_json(*loaded), models::to_json(*model)) << ext;
  }
  const io::ZipReader zip(temp_path("conv1d.keras"));
  const nlohmann::json config = nlohmann::json::parse(zip.read("config.json", 1 << 20));
  EXPECT_EQ(config["config"]["layers"][1]["class_name"], "Conv1D");
  EXPECT_EQ(config["config"]["layers"][1]["module"], "keras.layers");
  auto from_json = models::model_from_json(models::to_json(*model));
  from_json->set_weights(model->get_weights());
  EXPECT_TRUE(same_bits(from_json->predict(x), before));
  std::vector<std::string> names;
  for (const auto& v : model->variables()) names.push_back(v.name());
  EXPECT_THAT(names, ::testing::Contains(HasSubstr("rms_normalization")));
  EXPECT_THAT(names, ::testing::Contains(HasSubstr("/scale:0")));
}

}  // namespace
}  // namespace tapeflow
