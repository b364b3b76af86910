// The apps never report something other than what was asked: one exit-code convention with
// one-line usage errors, output locations checked at start-up, training flags stored in checkpoints
// and compared on reuse and --resume, resume from the files without the index, a bit-identical
// classifier resume, TerminateOnNaN, Ctrl-C, and the baseline's input-gradient norm. Runs are tiny
// (a few hundred examples, one thread).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "tests/apps/app_test_util.h"
#include "tests/testing/apps.h"

namespace {

namespace fs = std::filesystem;
using namespace tapeflow_app_test;
using ::testing::HasSubstr;
using ::testing::Not;

std::string binary(const std::string& app) { return std::string(TAPEFLOW_BINARY_DIR) + "/apps/" + app; }

const std::vector<std::string> kTrainingApps = {"train_classifier", "adversarial_regularization", "gan"};

class AppHardening : public ScratchTest {
 protected:
  void SetUp() override {
    for (const auto& app : {"train_classifier", "adversarial_regularization", "gan", "predict", "seed_examples"})
      TAPEFLOW_REQUIRE_APP(binary(app));
  }
};

// Usage errors: exit 2 and one line in words naming the flag, before any data is read.
TEST_F(AppHardening, UsageErrorsExitTwoWithOneLineNamingTheFlag) {
  for (const auto& app : kTrainingApps) {
    SCOPED_TRACE(app);
    // A missing --data-dir proves the flag was rejected by the parser, before loading the data.
    for (const auto& [args, words] : std::vector<std::pair<std::string, std::string>>{
             {"--epochs 0", "--epochs: must be at least 1, got 0"},
             {"--batch-size -5", "--batch-size: must be at least 1, got -5"},
             {"--learning-rate 0", "--learning-rate: must be positive, got 0"},
             {"--threads -1", "--threads: must be at least 0, got -1"},
             {"--verbose 7", "--verbose: must be between 0 and 2, got 7"},
             {"--no-such-flag", "--no-such-flag"}}) {
      const auto [code, out] = run_app(binary(app), "--data-dir /nonexistent/fmnist " + args);
      EXPECT_EQ(code, 2) << args << ": " << out;
      EXPECT_THAT(out, HasSubstr(app + ": usage error: ")) << args;
      EXPECT_THAT(out, HasSubstr(words)) << args;
      EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;
      EXPECT_THAT(out, Not(HasSubstr("179769")));  // no 309-digit DBL_MAX
    }
  }
}

TEST_F(AppHardening, HelpListsTheExitCodesAndDataErrorsExitOne) {
  for (const std::string app : {"train_classifier", "adversarial_regularization", "gan", "seed_examples", "predict"}) {
    SCOPED_TRACE(app);
    const auto [code, out] = run_app(binary(app), "--help");
    EXPECT_EQ(code, 0);
    EXPECT_THAT(out, HasSubstr("Exit codes: 0 success; 1 data, file or checkpoint error"));
    EXPECT_THAT(out, HasSubstr("130 interrupted by Ctrl-C"));
  }
  EXPECT_EQ(run_app(binary("seed_examples"), "--bogus").first, 2);
  for (const auto& app : kTrainingApps) {
    const std::string extra = app == "gan" ? " --samples-dir " + scratch("samples_" + app) : "";
    const auto [code, out] = run_app(binary(app), "--data-dir /nonexistent/fmnist" + extra);
    EXPECT_EQ(code, 1) << out;
    EXPECT_THAT(out, HasSubstr(app + ": error: cannot load Fashion-MNIST from '/nonexistent/fmnist'"));
  }
}

// predict follows the same convention: a bad flag exits 2 naming it, a damaged model file exits 1 naming it.
TEST_F(AppHardening, PredictUsesTheSameExitCodes) {
  const std::string images = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  const std::string bad = scratch("damaged_model.h5");
  { std::ofstream(bad) << std::string(100, 'x'); }
  auto [code, out] = run_app(binary("predict"), "--model " + bad + " --images " + images + " --batch-size 0");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("predict: usage error: --batch-size: must be at least 1, got 0"));
  std::tie(code, out) = run_app(binary("predict"), "--model " + bad + " --images " + images);
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, ::testing::AllOf(HasSubstr("predict: error: "), HasSubstr(bad)));
}

// An unwritable --checkpoint-dir, --metrics-out or --tensorboard-dir is reported at start-up, naming the flag (the
// missing --data-dir shows it is checked before the data is loaded, let alone trained on).
TEST_F(AppHardening, UnwritableOutputsAreFoundAtStartUpNamingTheFlag) {
  const std::string file = scratch("plain_file");
  { std::ofstream(file) << "x"; }
  for (const auto& app : kTrainingApps) {
    SCOPED_TRACE(app);
    const std::string extra = app == "gan" ? " --samples-dir " + scratch("samples_" + app) : "";
    auto [code, out] = run_app(binary(app), "--data-dir /nonexistent/fmnist --checkpoint-dir " + file + "/ck" + extra);
    EXPECT_EQ(code, 1) << out;
    EXPECT_THAT(out, HasSubstr(app + ": error: --checkpoint-dir: cannot create '" + file + "/ck'"));
    std::tie(code, out) = run_app(binary(app), "--data-dir /nonexistent/fmnist --metrics-out " + file + "/m.json" + extra);
    EXPECT_EQ(code, 1) << out;
    EXPECT_THAT(out, HasSubstr(app + ": error: --metrics-out: cannot write '" + file + "/m.json'"));
    std::tie(code, out) = run_app(binary(app), "--data-dir /nonexistent/fmnist --tensorboard-dir " + file + "/tb" + extra);
    EXPECT_EQ(code, 1) << out;
    EXPECT_THAT(out, HasSubstr(app + ": error: --tensorboard-dir: cannot create '" + file + "/tb'"));
  }
  EXPECT_FALSE(fs::exists("m.json"));
}

// The classifier resumed after epoch 2 of 4 ends exactly where the uninterrupted run ends: the
// epoch counter in the checkpoint is the data-order state (fit shuffles epoch e as pass e).
// A constant learning rate keeps the 2-epoch first leg on the 4-epoch schedule.
TEST_F(AppHardening, ClassifierResumeIsBitIdentical) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string ck = scratch("tc_ck"), full = scratch("tc_full.json"), resumed = scratch("tc_resumed.json");
  const std::string args = "--limit 384 --batch-size 64 --threads 1 --seed 9 --lr-schedule constant --log-level warn ";
  ASSERT_EQ(run_app(binary("train_classifier"), args + "--epochs 4 --metrics-out " + full).first, 0);
  ASSERT_EQ(run_app(binary("train_classifier"), args + "--epochs 2 --checkpoint-dir " + ck).first, 0);
  const auto [code, out] =
      run_app(binary("train_classifier"), args + "--epochs 4 --resume --checkpoint-dir " + ck + " --metrics-out " + resumed);
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("was written with other flags, continuing with --epochs 4 (stored: 2)"));
  const std::string jf = slurp(full), jr = slurp(resumed);
  for (const char* key : {"test_loss", "test_accuracy", "train_loss", "train_accuracy"})
    EXPECT_EQ(json_field(jf, key, 0), json_field(jr, key, 0)) << key;
}

// Flags stored in the checkpoint: a resume with another --batch-size is refused naming it; a fresh
// run into a directory that holds checkpoints is refused; without the index the newest file is
// found and a new save never overwrites it.
TEST_F(AppHardening, ClassifierCheckpointsKeepTheirFlagsAndFiles) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string ck = scratch("tc_flags");
  const std::string args = "--limit 256 --threads 1 --checkpoint-dir " + ck;
  ASSERT_EQ(run_app(binary("train_classifier"), args + " --batch-size 64 --epochs 1").first, 0);
  auto [code, out] = run_app(binary("train_classifier"), args + " --epochs 2 --resume --batch-size 32");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr(ck + "/ckpt-1.h5 was trained with other flags: --batch-size 32 (stored: 64)"));
  std::tie(code, out) = run_app(binary("train_classifier"), args + " --batch-size 64 --epochs 2");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("--checkpoint-dir '" + ck + "' already holds checkpoints"));
  EXPECT_THAT(out, HasSubstr("pass --resume"));

  fs::remove(ck + "/checkpoint");  // the index is gone; the file is still there
  std::tie(code, out) = run_app(binary("train_classifier"), args + " --batch-size 64 --epochs 2 --resume");
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("Resumed from " + ck + "/ckpt-1.h5 after epoch 1"));
  EXPECT_THAT(out, Not(HasSubstr("starting from scratch")));
  EXPECT_TRUE(fs::exists(ck + "/ckpt-2.h5"));
  std::tie(code, out) = run_app(binary("train_classifier"), args + " --batch-size 64 --epochs 2 --resume");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("the checkpoint already has 2 of 2 epochs"));
}

// A diverged run stops at the first non-finite loss with exit code 3, and saves nothing diverged.
TEST_F(AppHardening, DivergedTrainingExitsThree) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string ck = scratch("tc_nan");
  const auto [code, out] = run_app(binary("train_classifier"),
                                   "--limit 256 --batch-size 32 --threads 1 --optimizer sgd --learning-rate 1e38 "
                                   "--lr-schedule constant --epochs 3 --checkpoint-dir " + ck);
  EXPECT_EQ(code, 3) << out;
  EXPECT_THAT(out, HasSubstr("train_classifier: error: training diverged: loss "));
  EXPECT_THAT(out, HasSubstr("at epoch 1, batch "));
  EXPECT_FALSE(fs::exists(ck + "/ckpt-1.h5"));
}

// Ctrl-C: the run stops, says which checkpoint was kept, exits 130; that checkpoint resumes.
TEST_F(AppHardening, CtrlCNamesTheCheckpointKept) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string ck = scratch("tc_int"), log = scratch("tc_int.log");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string cmd = binary("train_classifier") +
                            " --limit 2048 --batch-size 64 --threads 1 --epochs 500 --log-level warn --checkpoint-dir " +
                            ck + " > " + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(ck + "/ckpt-1.h5") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string out = slurp(log);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 130) << out;
  EXPECT_THAT(out, HasSubstr("train_classifier: interrupted (Ctrl-C) during epoch "));
  EXPECT_THAT(out, HasSubstr("kept " + ck + "/ckpt-"));
  EXPECT_THAT(out, HasSubstr("continue with --resume"));
}

// adversarial_regularization reuses a model only if it was trained with the same flags; the
// baseline's input-gradient norm is measured, not reported as 0.
TEST_F(AppHardening, AdversarialReuseChecksTheFlagsAndReportsTheBaselineNorm) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string ck = scratch("adv_flags"), json = scratch("adv.json");
  const std::string args = "--limit 200 --threads 1 --epsilons 0.1 --log-level warn --checkpoint-dir " + ck;
  auto [code, out] = run_app(binary("adversarial_regularization"), args + " --epochs 1 --metrics-out " + json);
  ASSERT_EQ(code, 0) << out;
  const std::string j = slurp(json);
  EXPECT_GT(std::stod(json_field(j, "final_input_gradient_norm", j.find("\"baseline\""))), 0.0);
  std::tie(code, out) = run_app(binary("adversarial_regularization"), args + " --epochs 1 --lambda 0.5");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr(ck + "/regularized.h5 was trained with other flags: --lambda 0.5 (stored: 5)"));
  std::tie(code, out) = run_app(binary("adversarial_regularization"), args + " --epochs 2");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr(ck + "/baseline.h5 was trained with other flags: --epochs 2 (stored: 1)"));
}

}  // namespace
