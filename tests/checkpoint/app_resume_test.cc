// train_classifier --checkpoint-dir / --resume on a small slice of Fashion-MNIST.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>

#include "data/fashion_mnist.h"
#include "tests/models_io/io_test_util.h"
#include "tests/testing/apps.h"

namespace tapeflow::models {
namespace {

using io::testing::ScratchDir;

std::pair<int, std::string> run(const std::string& args) {
  const std::string cmd = std::string(TAPEFLOW_BINARY_DIR) + "/apps/train_classifier " + args + " 2>&1";
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class AppResume : public ScratchDir {};

TEST_F(AppResume, SavesEveryEpochAndResumes) {
  TAPEFLOW_REQUIRE_APP(std::string(TAPEFLOW_BINARY_DIR) + "/apps/train_classifier");
  if (!std::filesystem::exists(data::kDefaultFashionMnistDir)) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string common = "--limit 600 --batch-size 100 --threads 1 --checkpoint-dir '" + file("ck") + "'";
  auto [code, out] = run("--epochs 1 " + common);
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(std::filesystem::exists(file("ck/ckpt-1.h5")));
  std::tie(code, out) = run("--epochs 2 --resume " + common);
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("Resumed from " + file("ck/ckpt-1.h5") + " after epoch 1"));
  EXPECT_THAT(out, ::testing::HasSubstr("Epoch 2/2"));
  EXPECT_THAT(out, ::testing::Not(::testing::HasSubstr("Epoch 1/2")));
  EXPECT_TRUE(std::filesystem::exists(file("ck/ckpt-2.h5")));
  std::tie(code, out) = run("--epochs 2 --resume " + common);
  EXPECT_EQ(code, 2);  // a usage error: --epochs asks for no more training
  EXPECT_THAT(out, ::testing::HasSubstr("the checkpoint already has 2 of 2 epochs"));
}

}  // namespace
}  // namespace tapeflow::models
