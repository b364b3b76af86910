// train_classifier --model lstm (tiny runs on --limit subsets): the recipe's defaults in --help, the
// model's shapes in the summary, a bit-identical --resume, --save-model and predict on the saved file.
// Skip when the binaries were not built or the dataset is not installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/apps/app_test_util.h"
#include "tests/testing/apps.h"

namespace {

namespace fs = std::filesystem;
using namespace tapeflow_app_test;
using ::testing::HasSubstr;

const std::string kApps = std::string(TAPEFLOW_BINARY_DIR) + "/apps/";

class LstmAppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* app : {"train_classifier", "predict"}) TAPEFLOW_REQUIRE_APP(kApps + app);
  }
};

TEST_F(LstmAppTest, HelpShowsTheRecipeDefaults) {
  const std::string help = run_app(kApps + "train_classifier", "--help").second;
  EXPECT_THAT(help, HasSubstr("lstm: the 28 rows as 28 steps of 28 pixels -> LSTM 128 -> Dense 10 (defaults: 10 epochs, "
                              "learning rate 0.001, constant schedule)"));
}

TEST_F(LstmAppTest, TrainsResumesBitForBitSavesAndPredicts) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string full = temp_path("lstm_full.json"), resumed = temp_path("lstm_resumed.json");
  const std::string ckpt = temp_path("lstm_ckpt"), saved = temp_path("lstm_model.h5");
  const std::string args = "--model lstm --limit 192 --batch-size 64 --threads 1 --seed 3";
  const auto [code, out] = run_app(kApps + "train_classifier", args + " --epochs 2 --metrics-out " + full +
                                                                   " --save-model " + saved);
  ASSERT_EQ(code, 0) << out;
  for (const char* s : {"(None, 28, 28)", "lstm", "(None, 128)", "81,674"}) EXPECT_THAT(out, HasSubstr(s));
  ASSERT_EQ(run_app(kApps + "train_classifier", args + " --log-level warn --epochs 1 --checkpoint-dir " + ckpt).first, 0);
  const auto [code_r, out_r] = run_app(kApps + "train_classifier", args + " --epochs 2 --resume --checkpoint-dir " +
                                                                       ckpt + " --metrics-out " + resumed);
  ASSERT_EQ(code_r, 0) << out_r;
  const std::string a = slurp(full), b = slurp(resumed);
  expect_well_formed(a);
  EXPECT_EQ(json_field(a, "model", 0), "\"lstm\"");
  for (const char* key : {"test_loss", "test_accuracy", "train_loss"})
    EXPECT_EQ(json_field(a, key, 0), json_field(b, key, 0)) << key << ": the resumed run must repeat";
  const std::string data = "/usr/share/datasets/fashion-mnist/";
  const auto [code_p, out_p] = run_app(kApps + "predict", "--model " + saved + " --images " + data +
                                                              "t10k-images-idx3-ubyte.gz --labels " + data +
                                                              "t10k-labels-idx1-ubyte.gz --limit 192");
  ASSERT_EQ(code_p, 0) << out_p;
  EXPECT_THAT(out_p, HasSubstr("accuracy"));
  fs::remove(full);
  fs::remove(resumed);
  fs::remove_all(ckpt);
  fs::remove(saved);
}

}  // namespace
