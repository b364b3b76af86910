// Flags and output that tell the truth (issue 32): outputs checked before training, integer flags
// refused outside their type, --resume without checkpoints refused, --verbose 0 quiet but for the
// result line, --help showing the chosen --model's defaults, predict refusing flags it would ignore
// and naming classes, --model stored in checkpoints, the per-epoch history in --metrics-out,
// --validation-split and --csv-log. Runs are tiny (a few hundred examples, one thread).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/apps/app_test_util.h"
#include "tests/testing/apps.h"

namespace {

namespace fs = std::filesystem;
using namespace tapeflow_app_test;
using ::testing::HasSubstr;
using ::testing::Not;

std::string binary(const std::string& app) { return std::string(TAPEFLOW_BINARY_DIR) + "/apps/" + app; }

const std::string kData = "/usr/share/datasets/fashion-mnist";

class AppTruth : public ScratchTest {
 protected:
  void SetUp() override {
    for (const auto& app : {"train_classifier", "adversarial_regularization", "gan", "predict"})
      TAPEFLOW_REQUIRE_APP(binary(app));
  }
};

std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

// 99999999999999999999 was accepted as INT64_MAX; now a usage error naming the flag and the bound.
TEST_F(AppTruth, IntegerFlagsOutsideTheirTypeAreRefused) {
  for (const std::string app : {"train_classifier", "adversarial_regularization", "gan"}) {
    SCOPED_TRACE(app);
    for (const auto& [args, words] : std::vector<std::pair<std::string, std::string>>{
             {"--batch-size 99999999999999999999", "--batch-size: must be at most 9223372036854775807"},
             {"--epochs 3000000000", "--epochs: must be at most 2147483647, got 3000000000"},
             {"--limit 1e30", "--limit: must be at most 9223372036854775807"},
             {"--threads 2.5", "--threads: expected a whole number, got 2.5"},
             {"--seed 99999999999999999999", "--seed: must be at most 18446744073709551615"}}) {
      const auto [code, out] = run_app(binary(app), "--data-dir /nonexistent/fmnist " + args);
      EXPECT_EQ(code, 2) << args << ": " << out;
      EXPECT_THAT(out, HasSubstr(words)) << args;
    }
  }
  const std::string file = scratch("some_file");
  ASSERT_EQ(run_app("/bin/sh", "-c 'echo x > " + file + "'").first, 0);
  const auto [code, out] = run_app(binary("predict"), "--model " + file + " --images " + file + " --show 1e40");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("--show: must be at most 9223372036854775807"));
}

// --save-model and --csv-log are checked before the data are read (before, --save-model /sys/ux.h5
// trained the whole run and then failed inside HDF5).
TEST_F(AppTruth, EveryOutputIsCheckedBeforeTraining) {
  const std::string file = scratch("not_a_dir");
  ASSERT_EQ(run_app("/bin/sh", "-c 'echo x > " + file + "'").first, 0);
  for (const auto& [flag, path] : std::vector<std::pair<std::string, std::string>>{
           {"--save-model", "/sys/ux.h5"},
           {"--save-model", file + "/m.h5"},
           {"--save-model", file + "/web_model"},
           {"--save-model", file},  // a TensorFlow.js directory where a file is
           {"--csv-log", "/sys/log.csv"}}) {
    const auto [code, out] = run_app(binary("train_classifier"), "--data-dir /nonexistent/fmnist " + flag + " " + path);
    EXPECT_EQ(code, 1) << out;
    EXPECT_THAT(out, HasSubstr("train_classifier: error: " + flag + ": cannot write")) << path;
    EXPECT_THAT(out, HasSubstr("'" + path + "'")) << path;
    EXPECT_THAT(out, Not(HasSubstr("Fashion-MNIST"))) << "checked before loading the data: " << out;
  }
}

// --resume into a missing or empty directory was a silent fresh start (exit 0).
TEST_F(AppTruth, ResumeWithoutACheckpointIsAnError) {
  const std::string missing = scratch("no_such_ckpt_dir"), empty = scratch("empty_ckpt_dir");
  auto [code, out] = run_app(binary("train_classifier"), "--data-dir /nonexistent/fmnist --resume --checkpoint-dir " + missing);
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("--resume: the checkpoint directory '" + missing + "' does not exist"));
  EXPECT_FALSE(fs::exists(missing)) << "a typo must not create a directory";
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  fs::create_directories(empty);
  std::tie(code, out) = run_app(binary("train_classifier"), "--limit 64 --threads 1 --resume --checkpoint-dir " + empty);
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("--resume: no readable checkpoint (ckpt-N.h5) in '" + empty + "'"));
}

// --verbose 0: nothing but the result line (was 21 lines); --log-level off no longer hides it.
TEST_F(AppTruth, VerboseZeroPrintsOnlyTheResultLine) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  for (const std::string quiet : {"--verbose 0", "--log-level off --verbose 2"}) {
    const auto [code, out] = run_app(binary("train_classifier"), "--limit 128 --epochs 1 --threads 1 " + quiet);
    ASSERT_EQ(code, 0) << out;
    if (quiet == "--verbose 0") {
      EXPECT_EQ(lines(out), 1u) << out;
    }
    EXPECT_THAT(out, ::testing::ContainsRegex("Test loss: [0-9.]+ - test accuracy: [0-9.]+\n")) << quiet;
  }
}

// --help shows the defaults of the --model given with it (it showed the MLP's 8 epochs and 0.002 for cnn).
TEST_F(AppTruth, HelpShowsTheChosenModelsDefaults) {
  auto [code, out] = run_app(binary("train_classifier"), "--model cnn --help");
  ASSERT_EQ(code, 0);
  EXPECT_THAT(out, ::testing::ContainsRegex("--epochs [^\n]*=30( |\n)"));  // CLI11: "--epochs INT:... >= 1=30"
  EXPECT_THAT(out, ::testing::ContainsRegex("--learning-rate [^\n]*=0.003( |\n)"));
  std::tie(code, out) = run_app(binary("train_classifier"), "--help");
  EXPECT_THAT(out, ::testing::ContainsRegex("--epochs [^\n]*=8( |\n)"));
  EXPECT_THAT(out, ::testing::ContainsRegex("--learning-rate [^\n]*=0.002( |\n)"));
  EXPECT_THAT(out, HasSubstr("cnn: Conv2D 32 3x3"));
  EXPECT_THAT(out, HasSubstr("(defaults: 30 epochs, learning rate 0.003, cosine schedule)"));
}

// A CNN checkpoint resumed with --model mlp: refused naming --model (was an optimizer-weight count error).
TEST_F(AppTruth, CheckpointsStoreTheModel) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string ck = scratch("tc_model");
  ASSERT_EQ(run_app(binary("train_classifier"), "--limit 64 --epochs 1 --threads 1 --verbose 0 --checkpoint-dir " + ck).first, 0);
  const auto [code, out] =
      run_app(binary("train_classifier"), "--model cnn --limit 64 --epochs 2 --threads 1 --resume --checkpoint-dir " + ck);
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("was trained with other flags: --model cnn (stored: mlp)"));
}

// --metrics-out holds Keras's History (one value per epoch: loss, accuracy, val_*, learning_rate);
// --validation-split adds val_loss / val_accuracy; --csv-log writes one row per epoch.
TEST_F(AppTruth, MetricsHoldThePerEpochHistory) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string json = scratch("history.json"), csv = scratch("log.csv");
  const auto [code, out] = run_app(binary("train_classifier"), "--limit 200 --epochs 3 --threads 1 --verbose 2 "
                                                               "--validation-split 0.2 --metrics-out " + json +
                                                               " --csv-log " + csv);
  ASSERT_EQ(code, 0) << out;
  const std::string j = slurp(json);
  expect_well_formed(j);
  for (const char* key : {"\"loss\": [", "\"accuracy\": [", "\"val_loss\": [", "\"val_accuracy\": [", "\"learning_rate\": ["}) {
    const auto at = j.find(key);
    ASSERT_NE(at, std::string::npos) << key << " in " << j;
    const std::string list = j.substr(at, j.find(']', at) - at);
    EXPECT_EQ(std::count(list.begin(), list.end(), ','), 2) << key << ": three epochs: " << list;
  }
  EXPECT_THAT(out, HasSubstr("val_accuracy"));
  const std::string c = slurp(csv);
  EXPECT_EQ(lines(c), 4u) << c;  // header + 3 epochs
  EXPECT_THAT(c, HasSubstr("val_loss"));
  // Keras's range for validation_split is [0, 1).
  EXPECT_EQ(run_app(binary("train_classifier"), "--data-dir /nonexistent/fmnist --validation-split 1").first, 2);
}

// predict: --metrics-out without --labels was silently ignored; predictions name the class.
TEST_F(AppTruth, PredictRefusesIgnoredFlagsAndNamesClasses) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string model = scratch("p.h5"), json = scratch("p.json"), ck = scratch("p_ck");
  ASSERT_EQ(run_app(binary("train_classifier"), "--limit 128 --epochs 1 --threads 1 --verbose 0 --save-model " + model +
                                                    " --checkpoint-dir " + ck).first, 0);
  const std::string images = kData + "/t10k-images-idx3-ubyte.gz";
  auto [code, out] = run_app(binary("predict"), "--model " + model + " --images " + images + " --metrics-out " + json);
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("--metrics-out requires --labels"));
  EXPECT_FALSE(fs::exists(json));
  std::tie(code, out) = run_app(binary("predict"), "--model " + model + " --images " + images + " --limit 20 --show 3");
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::ContainsRegex("0: class [0-9] (T-shirt/top|Trouser|Pullover|Dress|Coat|Sandal|Shirt|"
                                            "Sneaker|Bag|Ankle boot) \\((0\\.[0-9]{4}|1\\.0000)\\)"));
  // A training checkpoint serves too (the architecture from its stored --model): the same
  // predictions as the model saved at the end of the same run.
  const std::string labels = " --labels " + kData + "/t10k-labels-idx1-ubyte.gz --limit 200 --show 0";
  const auto [saved_code, saved] = run_app(binary("predict"), "--model " + model + " --images " + images + labels);
  const auto [ckpt_code, from_ckpt] = run_app(binary("predict"), "--model " + ck + "/ckpt-1.h5 --images " + images + labels);
  ASSERT_EQ(saved_code, 0) << saved;
  ASSERT_EQ(ckpt_code, 0) << from_ckpt;
  const auto accuracy_line = [](const std::string& out) { return out.substr(out.find("accuracy: ")); };
  EXPECT_EQ(accuracy_line(from_ckpt), accuracy_line(saved));
}

// predict serves the sequence and attention models too: a --model lstm and a --model vit run's
// checkpoint (ckpt-N.h5, the architecture rebuilt from its stored --model) and its --save-model file
// give the same predictions, with class names.
TEST_F(AppTruth, PredictServesLstmAndVitCheckpointsAndSavedModels) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string images = kData + "/t10k-images-idx3-ubyte.gz";
  const std::string labels = " --labels " + kData + "/t10k-labels-idx1-ubyte.gz --limit 50 --show 2";
  for (const std::string arch : {"lstm", "vit"}) {
    SCOPED_TRACE(arch);
    const std::string model = scratch(arch + ".h5"), ck = scratch(arch + "_ck");
    const auto [train_code, train_out] =
        run_app(binary("train_classifier"), "--model " + arch + " --limit 64 --epochs 1 --threads 1 --verbose 0 "
                                            "--save-model " + model + " --checkpoint-dir " + ck);
    ASSERT_EQ(train_code, 0) << train_out;
    const auto [saved_code, saved] = run_app(binary("predict"), "--model " + model + " --images " + images + labels);
    const auto [ckpt_code, from_ckpt] =
        run_app(binary("predict"), "--model " + ck + "/ckpt-1.h5 --images " + images + labels);
    ASSERT_EQ(saved_code, 0) << saved;
    ASSERT_EQ(ckpt_code, 0) << from_ckpt;
    EXPECT_THAT(saved, ::testing::ContainsRegex("0: class [0-9] (T-shirt/top|Trouser|Pullover|Dress|Coat|Sandal|"
                                                "Shirt|Sneaker|Bag|Ankle boot) \\("));
    // The summary line and the shown predictions (class and probability) agree.
    const auto served = [](const std::string& out) {
      std::string kept, line;
      for (std::istringstream in(out); std::getline(in, line);)
        if (line.find(": class ") != std::string::npos || line.find("accuracy: ") != std::string::npos) kept += line + "\n";
      return kept;
    };
    EXPECT_THAT(served(saved), HasSubstr("accuracy: "));
    EXPECT_EQ(served(from_ckpt), served(saved));
  }
}

}  // namespace
