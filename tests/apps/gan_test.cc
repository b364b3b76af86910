// Smoke tests of the gan app: --help, a missing dataset, bad flags, and a short real run
// (--limit 256 --epochs 1) whose PNG grid (header, size) and metrics JSON are checked and whose
// losses repeat for a seed; --checkpoint-dir/--resume continue bit for bit. A missing binary fails
// (tests/testing/apps.h); tests skip when the dataset is not installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>

#include "tests/apps/app_test_util.h"
#include "tests/testing/apps.h"

namespace {

namespace fs = std::filesystem;
using namespace tapeflow_app_test;
using ::testing::HasSubstr;

const std::string kBinary = std::string(TAPEFLOW_BINARY_DIR) + "/apps/gan";

class GanAppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TAPEFLOW_REQUIRE_APP(kBinary);
  }
};

std::uint32_t big_endian32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

TEST_F(GanAppTest, HelpListsTheFlags) {
  const auto [code, out] = run_app(kBinary, "--help");
  EXPECT_EQ(code, 0);
  for (const char* flag : {"--data-dir", "--epochs", "--r1-gamma", "--samples-dir", "--score-samples", "--seed",
                           "--threads", "--limit", "--metrics-out", "--grid"})
    EXPECT_THAT(out, HasSubstr(flag));
}

TEST_F(GanAppTest, MissingDatasetIsAClearError) {
  const std::string dir = temp_path("gan_missing");
  const auto [code, out] = run_app(kBinary, "--data-dir /nonexistent/tapeflow-fmnist --samples-dir " + dir);
  EXPECT_EQ(code, 1);  // a data error; 2 is for usage errors
  EXPECT_THAT(out, HasSubstr("gan: error: cannot load Fashion-MNIST from '/nonexistent/tapeflow-fmnist'"));
  EXPECT_THAT(out, HasSubstr("dataset-fashion-mnist"));
  fs::remove_all(dir);
}

TEST_F(GanAppTest, BadFlagsAreRejected) {
  EXPECT_NE(run_app(kBinary, "--r1-gamma -1").first, 0);
  EXPECT_NE(run_app(kBinary, "--grid 0").first, 0);
  EXPECT_NE(run_app(kBinary, "--beta-1 1.5").first, 0);
  EXPECT_NE(run_app(kBinary, "--epochs 0").first, 0);
  EXPECT_NE(run_app(kBinary, "--no-such-flag").first, 0);
  const auto [code, out] = run_app(kBinary, "--samples-dir /proc/tapeflow-no");
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("gan: error: --samples-dir: cannot create '/proc/tapeflow-no'"));
}

TEST_F(GanAppTest, ShortRunWritesAGridAndScoresAndRepeatsForASeed) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = temp_path("gan_samples"), a = temp_path("gan_a.json"), b = temp_path("gan_b.json");
  const std::string args = "--limit 256 --epochs 1 --batch-size 64 --grid 4 --score-samples 200 "
                           "--classifier-epochs 1 --score-every 1 --r1-gamma 1 --threads 1 --seed 9 --log-level warn --samples-dir " +
                           dir + " --metrics-out ";
  const auto [code, out] = run_app(kBinary, args + a);
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("uniform noise"));
  const std::string png = slurp(dir + "/epoch_001.png");
  ASSERT_GT(png.size(), 33u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  // 4 x 4 images of 28 pixels with a 2-pixel border, zoomed 2x: (4 * 30 + 2) * 2 = 244.
  EXPECT_EQ(big_endian32(png, 16), 244u);
  EXPECT_EQ(big_endian32(png, 20), 244u);
  const std::string ja = slurp(a);
  expect_well_formed(ja);
  EXPECT_EQ(json_field(ja, "train_examples", 0), "256");
  EXPECT_EQ(json_field(ja, "score_samples", 0), "200");
  EXPECT_GT(std::stod(json_field(ja, "r1_penalty", 0)), 0.0);
  EXPECT_THAT(json_field(ja, "grid", 0), HasSubstr("epoch_001.png"));
  EXPECT_THAT(json_field(ja, "score", ja.find("\"epoch\": 1")), HasSubstr("inception_score"));  // --score-every 1
  for (const char* score : {"score_gan", "score_noise", "score_real"}) {
    const std::size_t at = ja.find(std::string("\"") + score + "\"");
    ASSERT_NE(at, std::string::npos) << score;
    const double conf = std::stod(json_field(ja, "mean_confidence", at));
    EXPECT_GE(conf, 0.1) << score;  // a max-softmax is at least 1/10
    EXPECT_LE(conf, 1.0) << score;
    const double entropy = std::stod(json_field(ja, "class_entropy", at));
    EXPECT_GE(entropy, 0.0) << score;
    EXPECT_LE(entropy, 2.3026) << score;  // ln 10
    const double is = std::stod(json_field(ja, "inception_score", at));
    EXPECT_GE(is, 1.0 - 1e-9) << score;  // exp of a non-negative KL
    EXPECT_LE(is, 10.0 + 1e-9) << score;
  }
  // Fréchet distances to the test images' features: 0 for the test images themselves (the same
  // set), small for training images, larger for uniform noise than for training images.
  auto fid = [&](const char* score) {
    return std::stod(json_field(ja, "frechet_distance", ja.find(std::string("\"") + score + "\"")));
  };
  EXPECT_NEAR(fid("score_real"), 0.0, 1e-6);
  EXPECT_GT(fid("score_real_train"), 0.0);
  EXPECT_GT(fid("score_noise"), fid("score_real_train"));
  EXPECT_GT(fid("score_gan"), 0.0);
  const auto [code_b, out_b] = run_app(kBinary, args + b);
  ASSERT_EQ(code_b, 0) << out_b;
  const std::string jb = slurp(b);
  for (const char* key : {"d_loss", "g_loss", "r1_penalty", "score_gan"})
    EXPECT_EQ(json_field(ja, key, 0), json_field(jb, key, 0)) << key << ": same seed and threads must repeat";
  fs::remove_all(dir);
  fs::remove(a);
  fs::remove(b);
}

// One sample cannot have a covariance: the distance is left out, the run still succeeds.
TEST_F(GanAppTest, OneScoreSampleGivesNoFrechetDistance) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = temp_path("gan_one_sample"), json = temp_path("gan_one_sample.json");
  const auto [code, out] = run_app(kBinary, "--limit 128 --epochs 1 --batch-size 64 --grid 2 --score-samples 1 "
                                            "--classifier-epochs 1 --threads 1 --log-level warn --samples-dir " +
                                                dir + " --metrics-out " + json);
  ASSERT_EQ(code, 0) << out;
  const std::string j = slurp(json);
  expect_well_formed(j);
  const std::size_t gan = j.find("\"score_gan\""), noise = j.find("\"score_noise\"");
  ASSERT_NE(gan, std::string::npos);
  EXPECT_EQ(j.substr(gan, noise - gan).find("frechet_distance"), std::string::npos) << j;
  EXPECT_NEAR(std::stod(json_field(j, "frechet_distance", j.find("\"score_real\""))), 0.0, 1e-6);  // 128 test images
  fs::remove_all(dir);
  fs::remove(json);
}

TEST_F(GanAppTest, ResumeFromACheckpointRepeatsTheUninterruptedRun) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string samples = temp_path("gan_resume_samples"), ckpt = temp_path("gan_ckpt");
  const std::string full = temp_path("gan_full.json"), resumed = temp_path("gan_resumed.json");
  const std::string args = "--limit 256 --batch-size 64 --grid 2 --score-samples 100 --classifier-epochs 1 "
                           "--threads 1 --seed 4 --samples-dir " + samples;
  ASSERT_EQ(run_app(kBinary, args + " --log-level warn --epochs 2 --metrics-out " + full).first, 0);
  ASSERT_EQ(run_app(kBinary, args + " --log-level warn --epochs 1 --checkpoint-dir " + ckpt).first, 0);
  EXPECT_TRUE(fs::exists(ckpt + "/ckpt-1.h5"));
  const auto [code, out] = run_app(kBinary, args + " --epochs 2 --resume --checkpoint-dir " + ckpt +
                                                " --metrics-out " + resumed);
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("resumed from " + ckpt + "/ckpt-1.h5 after epoch 1"));
  const std::string jf = slurp(full), jr = slurp(resumed);
  const std::size_t at_f = jf.find("\"epoch\": 2"), at_r = jr.find("\"epoch\": 2");
  ASSERT_NE(at_f, std::string::npos);
  ASSERT_NE(at_r, std::string::npos);
  EXPECT_EQ(jr.find("\"epoch\": 1,"), std::string::npos) << "the resumed run must not train epoch 1 again";
  for (const char* key : {"d_loss", "g_loss", "d_real", "d_fake"})
    EXPECT_EQ(json_field(jf, key, at_f), json_field(jr, key, at_r)) << key;
  EXPECT_NE(run_app(kBinary, "--resume").first, 0);  // --resume needs --checkpoint-dir
  // --score-only scores the newest checkpoint (after epoch 2) without training: the resumed run's
  // final scores again, and no epoch rows.
  const std::string scored = temp_path("gan_scored.json");
  const auto [code_s, out_s] = run_app(kBinary, args + " --log-level warn --resume --score-only --checkpoint-dir " +
                                                    ckpt + " --metrics-out " + scored);
  ASSERT_EQ(code_s, 0) << out_s;
  const std::string js = slurp(scored);
  EXPECT_EQ(js.find("\"epoch\":"), std::string::npos) << "--score-only must not train";
  for (const char* key : {"score_gan", "score_noise", "score_real"})
    EXPECT_EQ(json_field(js, key, 0), json_field(jr, key, 0)) << key;
  EXPECT_EQ(json_field(js, "frechet_distance", js.find("\"score_gan\"")),
            json_field(jr, "frechet_distance", jr.find("\"score_gan\"")));
  const std::string empty = temp_path("gan_no_ckpt");
  const auto [code_e, out_e] = run_app(kBinary, "--resume --score-only --checkpoint-dir " + empty);
  EXPECT_EQ(code_e, 2) << out_e;
  EXPECT_THAT(out_e, HasSubstr("--score-only: no checkpoint in '" + empty + "' to score"));
  EXPECT_NE(run_app(kBinary, "--score-only").first, 0);  // --score-only needs --resume
  fs::remove_all(empty);
  fs::remove(scored);
  fs::remove_all(samples);
  fs::remove_all(ckpt);
  fs::remove(full);
  fs::remove(resumed);
}

}  // namespace
