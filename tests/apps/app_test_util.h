// Helpers of the app smoke tests, defined in adversarial_test.cc (same test_apps executable).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow_app_test {
std::string temp_path(const std::string& name);
std::string slurp(const std::string& path);
// Runs `binary args` with stdout and stderr captured; returns the exit code (-1 if killed) and output.
std::pair<int, std::string> run_app(const std::string& binary, const std::string& args);
std::string json_field(const std::string& json, const std::string& key, std::size_t from);
void expect_well_formed(const std::string& json);
bool dataset_installed();

// A test whose scratch(name) paths (temp_path) are removed, with their contents, when it ends.
class ScratchTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const auto& p : cleanup_) std::filesystem::remove_all(p);
  }
  std::string scratch(const std::string& name) {
    cleanup_.push_back(temp_path(name));
    return cleanup_.back();
  }

 private:
  std::vector<std::string> cleanup_;
};
}  // namespace tapeflow_app_test
