// Smoke tests of the train_classifier app: --help, a missing dataset, bad flags, and a short real
// run (--limit 512 --epochs 1) whose metrics JSON is checked. The binary is found through
// TAPEFLOW_BINARY_DIR; a missing binary fails (tests/testing/apps.h); tests skip when the dataset
// is not installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "data/fashion_mnist.h"
#include "tests/testing/apps.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kBinary = std::string(TAPEFLOW_BINARY_DIR) + "/apps/train_classifier";

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tapeflow_app_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct AppRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

AppRun run(const std::string& args) {
  const std::string out = temp_path("out.txt");
  const int status = std::system((kBinary + " " + args + " > " + out + " 2>&1").c_str());
  AppRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out)};
  fs::remove(out);
  return r;
}

// The number after "key": in a flat JSON object. Fails the test if absent.
double json_value(const std::string& json, const std::string& key) {
  const auto pos = json.find("\"" + key + "\": ");
  if (pos == std::string::npos) {
    ADD_FAILURE() << "no key " << key << " in " << json;
    return -1;
  }
  return std::stod(json.substr(pos + key.size() + 4));
}

bool dataset_installed() {
  return fs::exists(std::string(tapeflow::data::kDefaultFashionMnistDir) + "/train-images-idx3-ubyte.gz") ||
         fs::exists(std::string(tapeflow::data::kDefaultFashionMnistDir) + "/train-images-idx3-ubyte");
}

class TrainClassifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TAPEFLOW_REQUIRE_APP(kBinary);
  }
};

TEST_F(TrainClassifierTest, HelpListsTheFlags) {
  const AppRun r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--data-dir", "--epochs", "--batch-size", "--optimizer", "--learning-rate", "--seed",
                           "--threads", "--limit", "--metrics-out", "--log-level"})
    EXPECT_THAT(r.output, HasSubstr(flag));
  EXPECT_THAT(r.output, HasSubstr("/usr/share/datasets/fashion-mnist"));
}

TEST_F(TrainClassifierTest, MissingDatasetNamesTheDebianPackage) {
  const AppRun r = run("--data-dir /nonexistent/tapeflow-fashion-mnist --epochs 1");
  EXPECT_EQ(r.exit_code, 1);  // a data error; 2 is for usage errors
  EXPECT_THAT(r.output, HasSubstr("dataset-fashion-mnist"));
  EXPECT_THAT(r.output, HasSubstr("/nonexistent/tapeflow-fashion-mnist"));
  EXPECT_THAT(r.output, Not(HasSubstr("terminate called")));
}

TEST_F(TrainClassifierTest, BadFlagsAreRejected) {
  EXPECT_NE(run("--optimizer lbfgs").exit_code, 0);
  EXPECT_NE(run("--batch-size 0").exit_code, 0);
  EXPECT_NE(run("--epochs -1").exit_code, 0);
  EXPECT_NE(run("--no-such-flag").exit_code, 0);
}

TEST_F(TrainClassifierTest, ShortRunWritesMetricsAndRepeatsForASeed) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string json_a = temp_path("a.json"), json_b = temp_path("b.json");
  const std::string args = "--limit 512 --epochs 1 --threads 1 --seed 3 --log-level warn --metrics-out ";
  const AppRun a = run(args + json_a);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::string ma = read_file(json_a);
  const double acc = json_value(ma, "test_accuracy");
  EXPECT_GT(acc, 0.3);  // 4 steps of Adam on 512 examples already beat chance (0.1) by far
  EXPECT_LE(acc, 1.0);
  EXPECT_GT(json_value(ma, "test_loss"), 0.0);
  EXPECT_EQ(json_value(ma, "epochs"), 1.0);
  EXPECT_EQ(json_value(ma, "limit"), 512.0);
  EXPECT_EQ(json_value(ma, "threads"), 1.0);
  ASSERT_EQ(run(args + json_b).exit_code, 0);
  const std::string mb = read_file(json_b);
  EXPECT_EQ(json_value(ma, "test_loss"), json_value(mb, "test_loss"));  // same seed, same threads
  EXPECT_EQ(json_value(ma, "train_loss"), json_value(mb, "train_loss"));
  fs::remove(json_a);
  fs::remove(json_b);
}

TEST_F(TrainClassifierTest, UnwritableMetricsFileIsAnError) {
  if (!dataset_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const AppRun r = run("--limit 256 --epochs 1 --log-level warn --metrics-out /nonexistent-dir/m.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("train_classifier: error: --metrics-out: cannot write '/nonexistent-dir/m.json'"));
}

}  // namespace
