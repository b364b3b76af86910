// export_tfjs / load_tfjs in C++: the model.json layout, 4 MiB shards, round trips and hostile
// manifests. (TensorFlow.js itself checks the same files in the tfjs.* CTests.)
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/internal/config_json.h"
#include "layers/internal/serialization_json.h"
#include "tests/serialization/test_models.h"

namespace tapeflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using nlohmann::json;
using namespace testing_io;
namespace fs = std::filesystem;

json read_json(const fs::path& p) { return json::parse(std::ifstream(p)); }
void write_json(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(); }

TEST(TfjsTest, ExportWritesTheLayersModelFormat) {
  auto model = mlp();
  const fs::path dir = temp_path("tfjs_mlp");
  fs::remove_all(dir);
  models::export_tfjs(*model, dir.string());
  const json j = read_json(dir / "model.json");
  EXPECT_EQ(j["format"], "layers-model");
  EXPECT_EQ(j["modelTopology"]["class_name"], "Sequential");
  EXPECT_EQ(j["modelTopology"]["config"], json_of(model->get_config()));
  ASSERT_EQ(j["weightsManifest"].size(), 1u);
  EXPECT_EQ(j["weightsManifest"][0]["paths"], json::parse(R"(["group1-shard1of1.bin"])"));
  const json& w = j["weightsManifest"][0]["weights"];
  ASSERT_EQ(w.size(), model->variables().size());
  EXPECT_EQ(w[0]["name"], model->variables()[0].name().substr(0, model->variables()[0].name().size() - 2));
  EXPECT_EQ(w[0]["shape"], json::parse("[6, 8]"));
  EXPECT_EQ(w[0]["dtype"], "float32");
  std::int64_t total = 0;
  for (const Variable& v : model->variables()) total += v.shape().num_elements() * 4;
  EXPECT_EQ(static_cast<std::int64_t>(fs::file_size(dir / "group1-shard1of1.bin")), total);
  auto back = models::load_tfjs(dir.string());
  const Tensor x = random_input({4, 6}, 8);
  EXPECT_TRUE(same_bits(back->predict(x), model->predict(x)));
  EXPECT_EQ(json_of(back->get_config()), json_of(model->get_config()));
}

TEST(TfjsTest, LargeWeightsAreSplitIntoFourMebibyteShards) {
  auto wide = std::make_shared<models::Sequential>(
      std::vector<std::shared_ptr<layers::Layer>>{std::make_shared<layers::Dense>(1100), std::make_shared<layers::Dense>(2)});
  wide->build(Shape{1, 1000});
  const fs::path dir = temp_path("tfjs_wide");
  fs::remove_all(dir);
  models::export_tfjs(*wide, dir.string());
  const std::uintmax_t total = (1000 * 1100 + 1100 + 1100 * 2 + 2) * 4;
  EXPECT_EQ(fs::file_size(dir / "group1-shard1of2.bin"), models::kTfjsShardBytes);
  EXPECT_EQ(fs::file_size(dir / "group1-shard2of2.bin"), total - models::kTfjsShardBytes);
  auto back = models::load_tfjs((dir / "model.json").string());
  const Tensor x = random_input({2, 1000}, 9);
  EXPECT_TRUE(same_bits(back->predict(x), wide->predict(x)));
}

TEST(TfjsTest, FunctionalModelsRoundTrip) {
  auto model = skip_two_inputs();
  const fs::path dir = temp_path("tfjs_functional");
  fs::remove_all(dir);
  models::export_tfjs(*model, dir.string());
  EXPECT_EQ(read_json(dir / "model.json")["modelTopology"]["class_name"], "Functional");
  auto back = models::load_tfjs(dir.string());
  auto* f = dynamic_cast<models::Functional*>(back.get());
  ASSERT_NE(f, nullptr);
  const Tensor a = random_input({3, 4}, 1), b = random_input({3, 3}, 2);
  EXPECT_TRUE(same_bits(f->predict(std::vector<Tensor>{a, b}), model->predict(std::vector<Tensor>{a, b})));
}

TEST(TfjsTest, HostileManifestsFailClearly) {
  auto model = mlp();
  const fs::path dir = temp_path("tfjs_hostile");
  auto fresh = [&] {
    fs::remove_all(dir);
    models::export_tfjs(*model, dir.string());
    return read_json(dir / "model.json");
  };
  auto err = [&] {
    try {
      models::load_tfjs(dir.string());
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json j = fresh();
  j["weightsManifest"][0]["weights"][0]["shape"] = json::parse("[8, 6]");
  write_json(dir / "model.json", j);
  EXPECT_THAT(err(), AllOf(HasSubstr("weight 'dense"), HasSubstr("shape in file [8, 6], model expects [6, 8]")));
  j = fresh();
  j["weightsManifest"][0]["weights"].erase(1);
  write_json(dir / "model.json", j);
  EXPECT_THAT(err(), HasSubstr("no weight"));
  j = fresh();
  j["weightsManifest"][0]["weights"][0]["dtype"] = "float16";
  write_json(dir / "model.json", j);
  EXPECT_THAT(err(), HasSubstr("dtype 'float16'"));
  j = fresh();
  j["weightsManifest"][0]["paths"][0] = "../../etc/passwd";
  write_json(dir / "model.json", j);
  EXPECT_THAT(err(), HasSubstr("leaves the model directory"));
  fresh();
  fs::resize_file(dir / "group1-shard1of1.bin", 100);
  EXPECT_THAT(err(), HasSubstr("but the shards hold 100"));
  j = fresh();
  j["modelTopology"]["config"]["layers"][1]["class_name"] = "Conv7D";
  write_json(dir / "model.json", j);
  EXPECT_THAT(err(), AllOf(HasSubstr("modelTopology"), HasSubstr("Conv7D")));
  std::ofstream(dir / "model.json") << "{";
  EXPECT_THAT(err(), HasSubstr("invalid JSON"));
  fs::remove(dir / "model.json");
  EXPECT_THAT(err(), HasSubstr("cannot open"));
  // float64 models cannot go to TensorFlow.js.
  models::Sequential f64({std::make_shared<layers::Dense>(layers::DenseOptions{.units = 2, .dtype = DType::kFloat64})});
  f64.build(Shape{1, 2});
  EXPECT_THROW(models::export_tfjs(f64, temp_path("tfjs_f64")), std::invalid_argument);
}

}  // namespace
}  // namespace tapeflow
