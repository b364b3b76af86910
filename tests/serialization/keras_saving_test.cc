// The Keras 3 .keras format: round trips (bit-identical predictions, optimizer state, continued
// training), saving_lib's layout, and damaged or foreign files failing with the file and the
// problem named, never a crash or a partial file.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "optimizers/internal/serialization_json.h"
#include "models/internal/config_json.h"
#include "layers/internal/serialization_json.h"
#include "models/io/h5_io.h"
#include "models/io/zip_archive.h"
#include "models/keras_saving.h"
#include "tests/serialization/test_models.h"

namespace tapeflow {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using nlohmann::json;
using namespace testing_io;

std::string load_error(const std::string& path) {
  try {
    models::load_model(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A trained, compiled MLP saved to `path`; returns it.
std::shared_ptr<models::Sequential> saved_mlp(const std::string& path) {
  auto model = mlp();
  compile_adam(*model);
  const Tensor x = random_input({32, 6}, 1);
  std::vector<std::int64_t> y(32);
  for (int i = 0; i < 32; ++i) y[i] = i % 3;
  model->fit(x, constant(y, Shape{32}), {.batch_size = 8, .epochs = 1, .verbose = 0});
  models::save_model(*model, path);
  return model;
}

TEST(KerasFormatTest, RoundTripAndSavingLibLayout) {
  const std::string path = temp_path("round.keras");
  auto model = saved_mlp(path);
  const Tensor x = random_input({5, 6}, 2);
  auto loaded = models::load_model(path);
  EXPECT_TRUE(same_bits(loaded->predict(x), model->predict(x)));
  ASSERT_TRUE(loaded->compiled());
  EXPECT_EQ(loaded->optimizer()->iterations(), model->optimizer()->iterations());
  EXPECT_EQ(optimizers::serialize_json(*loaded->optimizer()), optimizers::serialize_json(*model->optimizer()));
  const auto slots_a = optimizers::keras_weights(*model->optimizer(), model->trainable_variables());
  const auto slots_b = optimizers::keras_weights(*loaded->optimizer(), loaded->trainable_variables());
  ASSERT_EQ(slots_a.size(), slots_b.size());
  for (std::size_t i = 0; i < slots_a.size(); ++i) EXPECT_TRUE(same_bits(slots_a[i].second.value(), slots_b[i].second.value()));

  const io::ZipReader zip(path);
  const json metadata = json::parse(zip.read("metadata.json", 1 << 20));
  EXPECT_EQ(metadata["keras_version"], models::kKeras3Version);
  const json config = json::parse(zip.read("config.json", 1 << 20));
  EXPECT_EQ(config["module"], "keras");
  EXPECT_EQ(config["class_name"], "Sequential");
  EXPECT_EQ(config["config"]["layers"][0]["config"]["batch_shape"], json::parse("[null, 6]"));
  EXPECT_EQ(config["config"]["layers"][1]["module"], "keras.layers");
  EXPECT_EQ(config["compile_config"]["optimizer"]["class_name"], "Adam");
  EXPECT_FALSE(config["compile_config"]["optimizer"]["config"].contains("is_legacy_optimizer"));
  const std::string weights = temp_path("round_weights.h5");
  write_bytes(weights, zip.read("model.weights.h5", 1 << 24));
  io::H5Reader r(weights);
  EXPECT_EQ(r.dataset_shape("layers/dense/vars/0"), (std::vector<std::int64_t>{6, 8}));
  EXPECT_EQ(r.dataset_shape("layers/batch_normalization/vars/3"), (std::vector<std::int64_t>{8}));
  EXPECT_TRUE(r.is_group("layers/dropout/vars"));
  EXPECT_EQ(r.dataset_shape("layers/dense_1/vars/1"), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(r.read_string_attribute("layers/dense_1/vars", "name"), model->layers()[3]->name());
  // Adam with a schedule: iteration, then m, v per variable (no learning_rate variable).
  EXPECT_EQ(r.list_group("optimizer/vars").size(), 1 + 2 * model->trainable_variables().size());
  EXPECT_EQ(r.dataset_dtype("optimizer/vars/0"), DType::kInt64);
  // No temporary files left beside the target.
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(e.path().string().find("round.keras.tmp"), std::string::npos) << e.path();
}

TEST(KerasFormatTest, NestedAndFunctionalModelsRoundTrip) {
  auto inner = mlp(4);
  auto outer = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::Dense>(4), inner, std::make_shared<layers::Dense>(2)});
  outer->build(Shape{1, 5});
  const std::string path = temp_path("nested.keras");
  models::save_model(*outer, path);
  const Tensor x = random_input({3, 5}, 3);
  EXPECT_TRUE(same_bits(models::load_model(path)->predict(x), outer->predict(x)));
  {
    const io::ZipReader zip(path);
    const std::string weights = temp_path("nested_weights.h5");
    write_bytes(weights, zip.read("model.weights.h5", 1 << 24));
    EXPECT_TRUE(io::H5Reader(weights).is_dataset("layers/sequential/layers/batch_normalization/vars/0"));
    EXPECT_TRUE(io::H5Reader(weights).is_dataset("layers/dense_1/vars/0"));
  }
  auto f = skip_two_inputs();
  models::save_model(*f, temp_path("functional.keras"));
  const Tensor a = random_input({3, 4}, 4), b = random_input({3, 3}, 5);
  auto g = std::dynamic_pointer_cast<models::Functional>(models::load_model(temp_path("functional.keras")));
  ASSERT_TRUE(g);
  EXPECT_TRUE(same_bits(g->predict(std::vector<Tensor>{a, b}), f->predict(std::vector<Tensor>{a, b})));
}

TEST(KerasFormatTest, CorruptTruncatedAndForeignZipsNameTheFile) {
  const std::string good = temp_path("good.keras");
  saved_mlp(good);
  const std::string bytes = read_bytes(good);
  const std::string bad = temp_path("bad.keras");
  write_bytes(bad, "this is not a zip archive at all");
  EXPECT_THAT(load_error(bad), AllOf(HasSubstr(bad), HasSubstr("not a zip archive")));
  write_bytes(bad, bytes.substr(0, bytes.size() / 2));
  EXPECT_THAT(load_error(bad), AllOf(HasSubstr(bad), HasSubstr("truncated")));
  write_bytes(bad, bytes.substr(0, bytes.size() - 10));  // the end-of-central-directory record cut
  EXPECT_THAT(load_error(bad), AllOf(HasSubstr(bad), HasSubstr("not a zip archive")));
  // A flipped byte inside config.json's stored data: libzip's CRC check catches it.
  std::string flipped = bytes;
  const std::size_t at = flipped.find("\"Sequential\"");
  ASSERT_NE(at, std::string::npos);
  flipped[at + 3] ^= 0x20;
  write_bytes(bad, flipped);
  EXPECT_THAT(load_error(bad), AllOf(HasSubstr(bad), HasSubstr("member 'config.json' is damaged"), HasSubstr("CRC")));
  EXPECT_THAT(load_error(temp_path("absent.keras")), HasSubstr("does not exist"));
}

// Rewrites the members of the good file through `edit` into a new .keras file.
std::string edited(const std::string& good, const std::string& name,
                   const std::function<void(io::ZipMembers&)>& edit) {
  const io::ZipReader zip(good);
  io::ZipMembers members;
  for (const char* m : {"metadata.json", "config.json", "model.weights.h5"}) members.emplace_back(m, zip.read(m, 1 << 24));
  edit(members);
  const std::string path = temp_path(name);
  io::write_zip_atomic(path, members);
  return path;
}

TEST(KerasFormatTest, MissingMembersUnknownClassesAndKeysNameTheFileAndTheProblem) {
  const std::string good = temp_path("members.keras");
  saved_mlp(good);
  auto drop = [](const std::string& member) {
    return [member](io::ZipMembers& m) { std::erase_if(m, [&](const auto& p) { return p.first == member; }); };
  };
  for (const char* member : {"config.json", "model.weights.h5", "metadata.json"}) {
    const std::string p = edited(good, std::string("missing_") + member + ".keras", drop(member));
    EXPECT_THAT(load_error(p), AllOf(HasSubstr(p), HasSubstr(std::string("missing member '") + member + "'")));
  }
  auto config_edit = [](const std::function<void(json&)>& f) {
    return [f](io::ZipMembers& m) {
      json c = json::parse(m[1].second);
      f(c);
      m[1].second = c.dump();
    };
  };
  std::string p = edited(good, "unknown_class.keras", config_edit([](json& c) {
    c["config"]["layers"][2]["class_name"] = "Frobnicate";
  }));
  EXPECT_THAT(load_error(p), AllOf(HasSubstr(p), HasSubstr("config.json"), HasSubstr("unknown layer class 'Frobnicate'")));
  p = edited(good, "unknown_key.keras", config_edit([](json& c) { c["config"]["layers"][1]["config"]["frobs"] = 3; }));
  EXPECT_THAT(load_error(p), AllOf(HasSubstr(p), HasSubstr("config.json"), HasSubstr("Dense '"),
                                   HasSubstr("unknown config key 'frobs'")));
  // A Keras 3 key tapeflow has no feature for: fine at its default, refused otherwise.
  p = edited(good, "keras3_key.keras", config_edit([](json& c) { c["config"]["layers"][2]["config"]["synchronized"] = false; }));
  EXPECT_EQ(load_error(p), "no error");
  p = edited(good, "keras3_key_on.keras", config_edit([](json& c) { c["config"]["layers"][2]["config"]["renorm"] = true; }));
  EXPECT_THAT(load_error(p), AllOf(HasSubstr(p), HasSubstr("BatchNormalization '"), HasSubstr("unknown config key 'renorm'")));
  p = edited(good, "not_json.keras", [](io::ZipMembers& m) { m[1].second = "{\"class_name\": "; });
  EXPECT_THAT(load_error(p), AllOf(HasSubstr(p), HasSubstr("config.json is not valid JSON")));
  p = edited(good, "optimizer_field.keras", config_edit([](json& c) {
    c["compile_config"]["optimizer"]["config"]["gradient_accumulation_steps"] = 4;
  }));
  EXPECT_THAT(load_error(p), AllOf(HasSubstr(p), HasSubstr("compile_config"), HasSubstr("gradient_accumulation_steps")));
  // Weights that do not fit the config.
  p = edited(good, "units.keras", config_edit([](json& c) { c["config"]["layers"][1]["config"]["units"] = 9; }));
  EXPECT_THAT(load_error(p), AllOf(HasSubstr(p), HasSubstr("model.weights.h5"), HasSubstr("layers/dense/vars/0"),
                                   HasSubstr("shape in file [6, 8]")));
  p = edited(good, "no_weights.keras", [](io::ZipMembers& m) { m[2].second = "not hdf5"; });
  EXPECT_THAT(load_error(p), HasSubstr("not an HDF5 file"));
}

TEST(KerasFormatTest, FailedSavesLeaveNoFile) {
  const std::string dir = temp_path("no_such_dir");
  fs::remove_all(dir);
  auto model = mlp();
  EXPECT_THROW(models::save_model(*model, dir + "/m.keras"), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir));
  // Over an existing file, a model without a config changes nothing.
  const std::string path = temp_path("kept.keras");
  models::save_model(*model, path);
  const std::string before = read_bytes(path);
  class Sub : public models::Model {
   public:
    Sub() : Model("sub") {}
    Tensor call(const Tensor& x, bool) override { return x; }
  };
  Sub s;
  EXPECT_THROW(models::save_model(s, path), std::logic_error);
  EXPECT_EQ(read_bytes(path), before);
}

}  // namespace
}  // namespace tapeflow
