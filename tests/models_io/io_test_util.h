// Shared fixture for the models/io tests: a fresh scratch directory per test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

namespace tapeflow::io::testing {

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() /
           ("tapeflow_io_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  // Names in the scratch dir other than `keep` (used to spot leftover temporary files).
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::filesystem::path dir_;
};

// Expects `statement` to throw std::runtime_error whose message contains every one of `parts`.
#define EXPECT_RUNTIME_ERROR(statement, ...)                                              \
  do {                                                                                    \
    try {                                                                                 \
      statement;                                                                          \
      ADD_FAILURE() << "expected std::runtime_error from " #statement;                    \
    } catch (const std::runtime_error& e) {                                               \
      for (const std::string& part : std::vector<std::string>{__VA_ARGS__})               \
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)                    \
            << "message '" << e.what() << "' lacks '" << part << "'";                     \
    }                                                                                     \
  } while (0)

}  // namespace tapeflow::io::testing
