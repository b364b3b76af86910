// A full disk during a save (simulated in a fresh child process with RLIMIT_FSIZE, which makes
// write() fail with EFBIG as ENOSPC would): the save throws naming the file, the old file stays,
// no temporary file is left, and the process exits normally instead of dying with SIGSEGV in
// HDF5's exit-time shutdown after the failed H5Fclose. Also when H5Fcreate itself fails.
// The child is tests/checkpoint_child (--disk-full), so HDF5 starts fresh in it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "tests/models_io/io_test_util.h"

namespace tapeflow::models {
namespace {

using io::testing::ScratchDir;
using DiskFull = ScratchDir;

std::pair<int, std::string> run_child(const std::string& args) {
  const std::string cmd = std::string(TAPEFLOW_BINARY_DIR) + "/tests/checkpoint_child --disk-full " + args + " 2>&1";
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  return {::pclose(pipe), out};
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exit code " + std::to_string(WEXITSTATUS(status));
}

TEST_F(DiskFull, FailedSaveKeepsTheOldFileAndTheProcessExitsCleanly) {
  // 1 MiB limit, 8 MiB save: fails while writing chunks, in the flush or in the close.
  const auto [status, out] = run_child(dir_.string() + " 1048576 2048");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status) << "\n" << out;
  EXPECT_THAT(out, testing::HasSubstr("save failed as expected: " + file("ckpt.h5")));
  EXPECT_EQ(entries(), std::vector<std::string>{"ckpt.h5"});
}

TEST_F(DiskFull, FailedCreateLeavesNoTemporaryFile) {
  // Not a byte may be written: H5Fcreate itself fails, after creating the file.
  const auto [status, out] = run_child(dir_.string() + " 0 16");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status) << "\n" << out;
  EXPECT_THAT(out, testing::HasSubstr("cannot create temporary file"));
  EXPECT_EQ(entries(), std::vector<std::string>{"ckpt.h5"});
}

}  // namespace
}  // namespace tapeflow::models
