// HDF5 files saved by tf_keras 2.21 (Keras 2 on TensorFlow 2.21: model.save("m.h5")), committed as
// fixtures in tests/interop/fixtures/tf_keras/ by tests/interop/make_tf_keras_files.py (TensorFlow is
// not a CI dependency: this test only reads the files). Each loads in tapeflow, predicts tf_keras's
// recorded predictions to 1e-5 (float32), comes with the optimizer state tf_keras saved (iterations,
// slots) and trains on (fit) with a loss that falls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/internal/saving_common.h"
#include "models/models.h"
#include "optimizers/optimizers.h"

namespace tapeflow::models {
namespace {

std::string fixture(const std::string& name) {
  return std::string(TAPEFLOW_SOURCE_DIR) + "/tests/interop/fixtures/tf_keras/" + name;
}

template <class T>
std::vector<T> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

class TfKerasFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(TfKerasFiles, LoadPredictTheSameAndTrainOnFromTheSavedOptimizerState) {
  const std::string kind = GetParam();
  std::ifstream meta_in(fixture(kind + ".json"));
  ASSERT_TRUE(meta_in) << fixture(kind + ".json");
  const nlohmann::json meta = nlohmann::json::parse(meta_in);
  const std::vector<std::int64_t> x_shape = meta["x_shape"].get<std::vector<std::int64_t>>();
  // Float inputs, or int32 token ids (x_dtype, written for the sequence kinds).
  const bool ids = meta.value("x_dtype", std::string("float32")) == "int32";
  const Tensor x = ids ? constant(read_raw<std::int32_t>(fixture(kind + ".x")), Shape(x_shape))
                       : constant(read_raw<float>(fixture(kind + ".x")), Shape(x_shape));
  std::vector<std::int64_t> labels;
  for (std::int32_t v : read_raw<std::int32_t>(fixture(kind + ".y"))) labels.push_back(v);
  ASSERT_EQ(static_cast<std::int64_t>(labels.size()), x_shape[0]);
  const Tensor y = constant(labels, Shape{x_shape[0]});
  const std::vector<float> expected = read_raw<float>(fixture(kind + ".pred"));

  auto model = load_model(fixture(kind + ".h5"));
  const Tensor pred = model->predict(x);
  ASSERT_EQ(pred.num_elements(), static_cast<std::int64_t>(expected.size()));
  double max_diff = 0;
  for (std::size_t i = 0; i < expected.size(); ++i)
    max_diff = std::max(max_diff, std::abs(static_cast<double>(pred.data<float>()[i]) - expected[i]));
  EXPECT_LE(max_diff, 1e-5) << kind << ": tapeflow's predict vs tf_keras's";
  std::printf("%s: max abs diff vs tf_keras predict %.3g\n", kind.c_str(), max_diff);

  // The optimizer state tf_keras saved: its iterations, and slots that are not all zero.
  ASSERT_NE(model->optimizer(), nullptr) << kind << ": loaded without an optimizer";
  EXPECT_EQ(model->optimizer()->iterations(), meta["iterations"].get<std::int64_t>());
  double slot_abs = 0;
  std::size_t slot_count = 0;
  for (const auto& v : model->optimizer()->variables()) {
    if (v.name().find("iterations") != std::string::npos) continue;
    const Tensor t = v.value();
    ASSERT_EQ(t.dtype(), DType::kFloat32) << v.name();
    for (std::int64_t i = 0; i < t.num_elements(); ++i) slot_abs += std::abs(t.data<float>()[i]);
    ++slot_count;
  }
  EXPECT_GT(slot_count, 0u) << kind << ": no optimizer slots restored";
  EXPECT_GT(slot_abs, 0.0) << kind << ": optimizer slots restored as zeros";

  const History h = model->fit(x, y, {.batch_size = 16, .epochs = 4, .verbose = 0, .shuffle = false});
  const std::vector<double> losses = h["loss"];
  ASSERT_EQ(losses.size(), 4u);
  for (std::size_t e = 1; e < losses.size(); ++e) EXPECT_LT(losses[e], losses[e - 1]) << kind << " epoch " << e;
  EXPECT_EQ(model->optimizer()->iterations(), meta["iterations"].get<std::int64_t>() + 4 * (x_shape[0] / 16));
}

INSTANTIATE_TEST_SUITE_P(Kinds, TfKerasFiles, ::testing::Values("mlp", "cnn", "functional", "lstm_text", "rnn_states", "transformer"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace tapeflow::models

namespace tapeflow::models {
namespace {

// The tf_keras 2.11+ training_config pieces read above, and what is still refused.
TEST(TfKerasTrainingConfig, ReadsCustomOptimizersAndWrappedMetricsAndRefusesOtherMetricObjects) {
  const nlohmann::json opt = {{"class_name", "Custom>Adam"}, {"config", {{"learning_rate", 0.003}}}};
  const nlohmann::json loss = "sparse_categorical_crossentropy";
  const nlohmann::json wrapped = nlohmann::json::parse(
      R"([[{"class_name":"MeanMetricWrapper","config":{"fn":"sparse_categorical_accuracy","name":"accuracy"}}]])");
  const CompileOptions c = internal::compile_options(opt, loss, wrapped);
  EXPECT_EQ(c.optimizer->class_name(), "Adam");
  EXPECT_EQ(c.metrics.size(), 1u);
  const nlohmann::json other = nlohmann::json::parse(R"([{"class_name":"AUC","config":{"name":"auc"}}])");
  try {
    internal::compile_options(opt, loss, other);
    FAIL() << "an AUC metric object was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("MeanMetricWrapper"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("AUC"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tapeflow::models
