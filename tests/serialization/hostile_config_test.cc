// Hostile model configs in every format we read (JSON text, .h5 model_config, TF.js model.json):
// nesting deeper than kMaxConfigDepth is refused naming the file and the depth (it crashed with
// SIGSEGV: recursion in deserialization, JSON copies and dump()), and config numbers are checked
// before they are converted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "layers/internal/serialization_json.h"
#include "models/config.h"
#include "tape/core/internal/config_json.h"
#include "models/io/h5_io.h"
#include "models/io/zip_archive.h"
#include "models/saving_model.h"
#include "models/tfjs.h"
#include "tests/serialization/test_models.h"

namespace tapeflow::models {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_io::temp_path;

// n Sequentials, each holding the next; the innermost holds a Dense of 2 units on inputs of 3.
// JSON depth 3 n + 3 (the Dense's object, its config, its batch_input_shape list).
std::string nested_sequentials(int n, const std::string& units = "2") {
  std::string s;
  for (int i = 0; i < n; ++i) s += R"({"class_name": "Sequential", "config": {"name": "s)" + std::to_string(i) + R"(", "layers": [)";
  s += R"({"class_name": "Dense", "config": {"name": "d", "units": )" + units + R"(, "batch_input_shape": [null, 3]}})";
  for (int i = 0; i < n; ++i) s += "]}}";
  return s;
}

std::string nested_arrays(int n) { return std::string(static_cast<std::size_t>(n), '[') + std::string(static_cast<std::size_t>(n), ']'); }

std::string write_h5(const std::string& name, const std::string& model_config) {
  const std::string path = temp_path(name + ".h5");
  io::H5Writer writer(path);
  writer.write_attribute("", "model_config", model_config);
  writer.commit();
  return path;
}

std::string write_tfjs(const std::string& name, const std::string& topology) {
  const fs::path dir = temp_path(name);
  fs::create_directories(dir);
  std::ofstream(dir / "model.json") << R"({"format": "layers-model", "modelTopology": )" + topology +
                                          R"(, "weightsManifest": []})";
  return (dir / "model.json").string();
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

TEST(HostileConfig, ModelsNestedAsDeepAsTheLimitAllowsStillLoad) {
  const int n = (kMaxConfigDepth - 3) / 3;  // 169 Sequentials: depth 510
  auto model = model_from_json(nested_sequentials(n));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->name(), "s0");
  EXPECT_THAT(error_of([&] { model_from_json(nested_sequentials(n + 1)); }),
              HasSubstr("nested 513 levels deep; tapeflow reads at most 512"));
}

TEST(HostileConfig, DeepJsonTextIsRefusedNamingTheDepth) {
  EXPECT_THAT(error_of([] { model_from_json(nested_arrays(100000)); }),
              HasSubstr("model_from_json: the JSON is nested 100000 levels deep; tapeflow reads at most 512"));
  EXPECT_THAT(error_of([] { model_from_json(nested_sequentials(20000)); }), HasSubstr("nested 60003 levels deep"));
  // Built in memory, not parsed: model_from_config checks it too (and never recurses over it).
  nlohmann::json deep = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) deep = nlohmann::json::array({std::move(deep)});
  EXPECT_THAT(error_of([&] { model_from_config(to_config(std::move(deep))); }), HasSubstr("model_from_config: the JSON is nested 100001"));
}

TEST(HostileConfig, DeepH5ModelConfigsAreRefusedNamingTheFile) {
  for (const auto& [name, text] : {std::pair{"deep_sequentials", nested_sequentials(20000)},
                                   std::pair{"deep_arrays", nested_arrays(100000)}}) {
    SCOPED_TRACE(name);
    const std::string path = write_h5(name, text);
    EXPECT_THAT(error_of([&] { load_model(path); }),
                AllOf(HasSubstr(path), HasSubstr("attribute 'model_config'"), HasSubstr("levels deep")));
  }
}

TEST(HostileConfig, DeepTfjsTopologiesAreRefusedNamingTheFile) {
  const std::string path = write_tfjs("deep_tfjs", nested_sequentials(10000));
  EXPECT_THAT(error_of([&] { load_tfjs(path); }), AllOf(HasSubstr(path), HasSubstr("nested 30004 levels deep")));
  const std::string arrays = write_tfjs("deep_tfjs_arrays", nested_arrays(100000));
  EXPECT_THAT(error_of([&] { load_tfjs(arrays); }), AllOf(HasSubstr(arrays), HasSubstr("levels deep")));
}

TEST(HostileConfig, DeepKerasConfigsAreRefusedNamingTheFile) {
  const std::string path = temp_path("deep.keras");
  io::write_zip_atomic(path, {{"metadata.json", R"({"keras_version": "3.15.1"})"},
                              {"config.json", nested_sequentials(20000)},
                              {"model.weights.h5", ""}});
  EXPECT_THAT(error_of([&] { load_model(path); }),
              AllOf(HasSubstr(path), HasSubstr("config.json: the JSON is nested 60003 levels deep")));
}

TEST(HostileConfig, ConfigNumbersAreCheckedBeforeConversion) {
  // A float far outside int64 (converting it was undefined behaviour).
  EXPECT_THAT(error_of([] { model_from_json(nested_sequentials(1, "1e120")); }),
              AllOf(HasSubstr("'units'"), HasSubstr("expected an integer, got 1e+120")));
  EXPECT_THAT(error_of([] { model_from_json(nested_sequentials(1, "2.5")); }), HasSubstr("got 2.5"));
  // Above INT64_MAX: reported as written, not wrapped to -1.
  EXPECT_THAT(error_of([] { model_from_json(nested_sequentials(1, "18446744073709551615")); }),
              HasSubstr("got 18446744073709551615"));
  EXPECT_THAT(error_of([] { model_from_json(nested_sequentials(1, "9223372036854775808")); }),
              HasSubstr("got 9223372036854775808"));
  // Integral floats within range still read as Keras writes them.
  EXPECT_NE(model_from_json(nested_sequentials(1, "2.0")), nullptr);
}

TEST(HostileConfig, AWeightTooLargeForMemoryNamesTheLayerAndTheFile) {
  const std::string text = nested_sequentials(1, "8589934592");
  EXPECT_THAT(error_of([&] { model_from_json(text); }),
              AllOf(HasSubstr("'d'"), HasSubstr("kernel"), HasSubstr("[3, 8589934592]"), HasSubstr("does not fit in memory")));
  const std::string path = write_h5("huge_units", text);
  EXPECT_THAT(error_of([&] { load_model(path); }), AllOf(HasSubstr(path), HasSubstr("does not fit in memory")));
  const std::string tfjs = write_tfjs("huge_units_tfjs", text);
  EXPECT_THAT(error_of([&] { load_tfjs(tfjs); }), AllOf(HasSubstr(tfjs), HasSubstr("does not fit in memory")));
}

}  // namespace
}  // namespace tapeflow::models
