// Helpers of the app smoke tests, defined in adversarial_test.cc (same test_apps executable).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace tapeflow_app_test {
std::string temp_path(const std::string& name);
std::string slurp(const std::string& path);
// Runs `binary args` with stdout and stderr captured; returns the exit code (-1 if killed) and output.
std::pair<int, std::string> run_app(const std::string& binary, const std::string& args);
std::string json_field(const std::string& json, const std::string& key, std::size_t from);
void expect_well_formed(const std::string& json);
bool dataset_installed();
}  // namespace tapeflow_app_test
