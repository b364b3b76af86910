// Smoke tests of the adversarial_regularization app: --help, a missing dataset, bad flags, and a
// short real run (--limit 300 --epochs 1) whose metrics JSON is checked and repeats for a seed.
// The binary is found through TAPEFLOW_BINARY_DIR; a missing binary fails the tests in a build with
// the apps (skips without them: tests/testing/apps.h); tests skip when the dataset is not installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "data/fashion_mnist.h"
#include "tests/testing/apps.h"

// Helpers shared with gan_test.cc (same test_apps executable; declared there).
namespace tapeflow_app_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tapeflow_apps6_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `binary args` with stdout and stderr captured; returns {exit code, output}.
std::pair<int, std::string> run_app(const std::string& binary, const std::string& args) {
  const std::string out = temp_path("out.txt");
  const int status = std::system((binary + " " + args + " > " + out + " 2>&1").c_str());
  std::pair<int, std::string> r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out)};
  fs::remove(out);
  return r;
}

// The text after "key": (from `from` on), up to the next ',' or '}' at depth 0.
std::string json_field(const std::string& json, const std::string& key, std::size_t from = 0) {
  const auto pos = json.find("\"" + key + "\": ", from);
  if (pos == std::string::npos) {
    ADD_FAILURE() << "no key " << key << " in " << json;
    return "";
  }
  std::size_t i = pos + key.size() + 4, depth = 0;
  const std::size_t begin = i;
  for (; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '[' || c == '{') ++depth;
    if ((c == ']' || c == '}') && depth-- == 0) break;
    if (c == ',' && depth == 0) break;
  }
  return json.substr(begin, i - begin);
}

// Brackets balance and no NaN/inf sneaked in: a cheap "it parses" check without a JSON library.
void expect_well_formed(const std::string& json) {
  int depth = 0;
  for (char c : json) {
    depth += (c == '{' || c == '[') - (c == '}' || c == ']');
    ASSERT_GE(depth, 0) << json;
  }
  EXPECT_EQ(depth, 0) << json;
  EXPECT_THAT(json, Not(HasSubstr("nan")));
  EXPECT_THAT(json, Not(HasSubstr("null")));
  EXPECT_EQ(json.front(), '{');
}

bool dataset_installed() {
  const std::string dir = tapeflow::data::kDefaultFashionMnistDir;
  return fs::exists(dir + "/train-images-idx3-ubyte.gz") || fs::exists(dir + "/train-images-idx3-ubyte");
}

}  // namespace tapeflow_app_test

namespace {

using namespace tapeflow_app_test;

const std::string kBinary = std::string(TAPEFLOW_BINARY_DIR) + "/apps/adversarial_regularization";

struct AppRun {
  int exit_code = -1;
  std::string output;
};

AppRun run(const std::string& args) {
  auto [code, output] = run_app(kBinary, args);
  return {code, output};
}

class AdversarialAppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TAPEFLOW_REQUIRE_APP(kBinary);
  }
};

TEST_F(AdversarialAppTest, HelpListsTheFlags) {
  const AppRun r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--data-dir", "--epochs", "--lambda", "--epsilons", "--pgd-steps", "--seed", "--threads",
                           "--limit", "--metrics-out", "--hidden", "--checkpoint-dir"})
    EXPECT_THAT(r.output, HasSubstr(flag));
}

TEST_F(AdversarialAppTest, MissingDatasetIsAClearError) {
  const AppRun r = run("--data-dir /nonexistent/tapeflow-fmnist");
  EXPECT_EQ(r.exit_code, 1);  // a data error; 2 is for usage errors
  EXPECT_THAT(r.output, HasSubstr("cannot load Fashion-MNIST from '/nonexistent/tapeflow-fmnist'"));
  EXPECT_THAT(r.output, HasSubstr("dataset-fashion-mnist"));
}

TEST_F(AdversarialAppTest, BadFlagsAreRejected) {
  EXPECT_NE(run("--lambda -1").exit_code, 0);
  EXPECT_NE(run("--epsilons 0.1,2").exit_code, 0);
  EXPECT_NE(run("--epochs 0").exit_code, 0);
  EXPECT_NE(run("--pgd-steps -3").exit_code, 0);
  EXPECT_NE(run("--no-such-flag").exit_code, 0);
}

TEST_F(AdversarialAppTest, ShortRunWritesTheTableAndRepeatsForASeed) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string a = temp_path("a.json"), b = temp_path("b.json");
  const std::string args =
      "--limit 300 --epochs 1 --threads 1 --seed 5 --epsilons 0.05,0.1 --pgd-steps 2 --log-level warn --metrics-out ";
  const AppRun ra = run(args + a);
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  EXPECT_THAT(ra.output, HasSubstr("FGSM 0.05"));
  EXPECT_THAT(ra.output, HasSubstr("regularized (λ=5)"));
  const std::string ja = slurp(a);
  expect_well_formed(ja);
  EXPECT_EQ(json_field(ja, "epsilons"), "[0.05, 0.1]");
  EXPECT_EQ(json_field(ja, "test_examples"), "300");
  for (const char* model : {"baseline", "regularized"}) {
    const std::size_t at = ja.find(std::string("\"") + model + "\": {");
    ASSERT_NE(at, std::string::npos) << model;
    const double clean = std::stod(json_field(ja, "clean_accuracy", at));
    EXPECT_GT(clean, 0.2) << model;  // 3 Adam steps on 300 examples already beat chance
    EXPECT_LE(clean, 1.0) << model;
    const std::string fgsm = json_field(ja, "fgsm_accuracy", at);
    EXPECT_EQ(std::count(fgsm.begin(), fgsm.end(), ','), 1) << fgsm;  // one accuracy per epsilon
    EXPECT_NE(json_field(ja, "pgd_accuracy", at), "[]");
  }
  EXPECT_GT(std::stod(json_field(ja, "final_input_gradient_norm", ja.find("\"regularized\""))), 0.0);
  ASSERT_EQ(run(args + b).exit_code, 0);
  const std::string jb = slurp(b);
  for (const char* key : {"fgsm_accuracy", "pgd_accuracy", "final_loss", "final_input_gradient_norm"})
    EXPECT_EQ(json_field(ja, key, ja.find("\"regularized\"")), json_field(jb, key, jb.find("\"regularized\"")))
        << key << ": same seed and threads must repeat";
  fs::remove(a);
  fs::remove(b);
}

TEST_F(AdversarialAppTest, CheckpointDirSavesThenRestoresBothModels) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = temp_path("adv_ckpt"), a = temp_path("ck_a.json"), b = temp_path("ck_b.json");
  const std::string args = "--limit 200 --epochs 1 --threads 1 --epsilons 0.1 --checkpoint-dir " + dir + " --metrics-out ";
  const AppRun first = run(args + a);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(fs::exists(dir + "/baseline.h5"));
  EXPECT_TRUE(fs::exists(dir + "/regularized.h5"));
  const AppRun second = run(args + b);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_THAT(second.output, HasSubstr("[regularized] restored from " + dir + "/regularized.h5"));
  const std::string ja = slurp(a), jb = slurp(b);
  for (const char* model : {"\"baseline\"", "\"regularized\""}) {
    EXPECT_EQ(json_field(ja, "restored", ja.find(model)), "false");
    EXPECT_EQ(json_field(jb, "restored", jb.find(model)), "true");
    EXPECT_EQ(json_field(ja, "fgsm_accuracy", ja.find(model)), json_field(jb, "fgsm_accuracy", jb.find(model)));
    EXPECT_EQ(json_field(ja, "clean_accuracy", ja.find(model)), json_field(jb, "clean_accuracy", jb.find(model)));
  }
  fs::remove_all(dir);
  fs::remove(a);
  fs::remove(b);
}

// --model lstm: the input-gradient penalty differentiates twice through the recurrence (LSTM 128
// on the 28 rows); its checkpoints store --model, so resuming them as another model is refused.
TEST_F(AdversarialAppTest, LstmShortRunAndItsCheckpointsKeepTheModel) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = temp_path("adv_lstm_ckpt"), a = temp_path("lstm.json");
  const std::string args = "--limit 256 --epochs 1 --threads 1 --epsilons 0.05 --log-level warn --checkpoint-dir " + dir;
  const AppRun r = run("--model lstm " + args + " --metrics-out " + a);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string j = slurp(a);
  expect_well_formed(j);
  EXPECT_EQ(json_field(j, "model"), "\"lstm\"");
  for (const char* model : {"baseline", "regularized"}) {
    const std::size_t at = j.find(std::string("\"") + model + "\": {");
    ASSERT_NE(at, std::string::npos) << model;
    const double clean = std::stod(json_field(j, "clean_accuracy", at));
    EXPECT_GT(clean, 0.1) << model;
    EXPECT_LE(clean, 1.0) << model;
    const double fgsm = std::stod(json_field(j, "fgsm_accuracy", at).substr(1));
    EXPECT_LE(fgsm, clean) << model;
  }
  EXPECT_GT(std::stod(json_field(j, "final_input_gradient_norm", j.find("\"regularized\""))), 0.0);
  const AppRun as_mlp = run("--model mlp " + args);
  EXPECT_NE(as_mlp.exit_code, 0);
  EXPECT_THAT(as_mlp.output, HasSubstr("--model mlp (stored: lstm)"));
  fs::remove_all(dir);
  fs::remove(a);
}

TEST_F(AdversarialAppTest, UnwritableMetricsFileFailsBeforeTraining) {
  const AppRun r = run("--limit 100 --metrics-out /nonexistent-dir/m.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("adversarial_regularization: error: --metrics-out: cannot write '/nonexistent-dir/m.json'"));
}

}  // namespace
