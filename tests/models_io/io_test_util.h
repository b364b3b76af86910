// Shared fixture for the models/io tests: a fresh scratch directory per test, and a check that a
// test leaves no HDF5 file, group, dataset, named type or attribute open (HDF5 1.10 has no public
// count of open dataspaces or property lists).
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>

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
    open_ids_ = count_open_ids();
  }
  void TearDown() override {
    EXPECT_EQ(count_open_ids(), open_ids_) << "HDF5 files or objects left open";
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

  static ssize_t count_open_ids() { return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); }

  std::filesystem::path dir_;
  ssize_t open_ids_ = 0;
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
