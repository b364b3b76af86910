// Smoke tests of the convolutional app modes (tiny: a few steps on --limit subsets):
// train_classifier --model cnn, gan --arch dcgan (grid, scores, bit-identical resume including the
// discriminator's Dropout masks) and adversarial_regularization --model cnn (double backward
// through convolutions). Skip when the binaries were not built or the dataset is not installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

#include "tests/apps/app_test_util.h"
#include "tests/testing/apps.h"

namespace {

namespace fs = std::filesystem;
using namespace tapeflow_app_test;
using ::testing::HasSubstr;

const std::string kApps = std::string(TAPEFLOW_BINARY_DIR) + "/apps/";

class ConvAppsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* app : {"train_classifier", "gan", "adversarial_regularization"})
      TAPEFLOW_REQUIRE_APP(kApps + app);
  }
};

TEST_F(ConvAppsTest, FlagsAreListedAndCheckedWithoutTheDataset) {
  EXPECT_THAT(run_app(kApps + "train_classifier", "--help").second, HasSubstr("--model"));
  EXPECT_THAT(run_app(kApps + "gan", "--help").second, HasSubstr("--arch"));
  EXPECT_THAT(run_app(kApps + "adversarial_regularization", "--help").second, HasSubstr("--model"));
  for (auto [app, flag] : {std::pair{"train_classifier", "--model resnet"}, std::pair{"gan", "--arch wgan"},
                           std::pair{"adversarial_regularization", "--model rnn"}}) {
    const auto [code, out] = run_app(kApps + app, flag);
    EXPECT_NE(code, 0) << app;
    EXPECT_THAT(out, HasSubstr(std::string(flag).substr(0, std::string(flag).find(' ')))) << app;
  }
}

TEST_F(ConvAppsTest, TrainClassifierCnnRunsAndShowsTheConvShapes) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string m = temp_path("cnn.json");
  const auto [code, out] =
      run_app(kApps + "train_classifier", "--model cnn --limit 256 --epochs 1 --batch-size 64 --threads 1 --metrics-out " + m);
  ASSERT_EQ(code, 0) << out;
  for (const char* shape : {"(None, 28, 28, 1)", "(None, 26, 26, 32)", "(None, 13, 13, 32)", "(None, 11, 11, 64)",
                            "(None, 5, 5, 64)", "(None, 1600)", "34,826"})
    EXPECT_THAT(out, HasSubstr(shape));
  const std::string j = slurp(m);
  expect_well_formed(j);
  EXPECT_EQ(json_field(j, "model", 0), "\"cnn\"");
  const double acc = std::stod(json_field(j, "test_accuracy", 0));
  EXPECT_GE(acc, 0.0);
  EXPECT_LE(acc, 1.0);
  fs::remove(m);
}

TEST_F(ConvAppsTest, DcganRunsScoresAndResumesBitForBit) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = temp_path("dcgan_samples"), ckpt = temp_path("dcgan_ckpt");
  const std::string full = temp_path("dcgan_full.json"), resumed = temp_path("dcgan_resumed.json");
  const std::string args = "--arch dcgan --limit 96 --batch-size 32 --grid 2 --score-samples 64 --classifier-epochs 1 "
                           "--threads 1 --seed 4 --samples-dir " + dir;
  const auto [code, out] = run_app(kApps + "gan", args + " --epochs 2 --metrics-out " + full);
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("conv2d_transpose"));
  EXPECT_THAT(out, HasSubstr("(None, 28, 28, 1)"));
  EXPECT_TRUE(fs::exists(dir + "/epoch_002.png"));
  ASSERT_EQ(run_app(kApps + "gan", args + " --log-level warn --epochs 1 --checkpoint-dir " + ckpt).first, 0);
  const auto [code_r, out_r] =
      run_app(kApps + "gan", args + " --epochs 2 --resume --checkpoint-dir " + ckpt + " --metrics-out " + resumed);
  ASSERT_EQ(code_r, 0) << out_r;
  const std::string a = slurp(full), b = slurp(resumed);
  expect_well_formed(a);
  const std::size_t ea = a.find("\"epoch\": 2"), eb = b.find("\"epoch\": 2");
  ASSERT_NE(ea, std::string::npos);
  ASSERT_NE(eb, std::string::npos);
  for (const char* key : {"d_loss", "g_loss", "d_real", "d_fake"})
    EXPECT_EQ(json_field(a, key, ea), json_field(b, key, eb)) << key << ": the resumed epoch 2 must repeat";
  EXPECT_EQ(json_field(a, "score_gan", 0), json_field(b, "score_gan", 0));
  fs::remove_all(dir);
  fs::remove_all(ckpt);
  fs::remove(full);
  fs::remove(resumed);
}

TEST_F(ConvAppsTest, AdversarialCnnTrainsBothModelsAndPrintsTheTable) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string m = temp_path("adv_cnn.json");
  const auto [code, out] =
      run_app(kApps + "adversarial_regularization", "--model cnn --limit 128 --epochs 1 --batch-size 64 --threads 1 "
                                                    "--epsilons 0.1 --pgd-steps 1 --metrics-out " + m);
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("regularized"));
  EXPECT_THAT(out, HasSubstr("FGSM 0.1"));
  const std::string j = slurp(m);
  expect_well_formed(j);
  EXPECT_GT(std::stod(json_field(j, "final_input_gradient_norm", j.find("\"regularized\""))), 0.0);
  fs::remove(m);
}

}  // namespace
