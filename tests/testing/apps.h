// Tests that run an app binary (apps/<name>) check it exists first. In a build that builds the apps
// (TAPEFLOW_BUILD_APPS=ON, as CI does; tests/CMakeLists.txt defines TAPEFLOW_APPS_BUILT=1) a missing
// binary FAILS the test: CI must never pass by skipping. Only a build configured without the apps
// skips these tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#ifndef TAPEFLOW_APPS_BUILT
#error "TAPEFLOW_APPS_BUILT must be defined (0 or 1) by tests/CMakeLists.txt"
#endif

namespace tapeflow::testing {
inline constexpr bool kAppsBuilt = TAPEFLOW_APPS_BUILT != 0;
}  // namespace tapeflow::testing

// Fails (apps are part of this build) or skips (they are not) the current test when the binary at
// `path` does not exist. Use in a test body or a fixture's SetUp().
#define TAPEFLOW_REQUIRE_APP(path)                                                                \
  do {                                                                                            \
    const std::string tapeflow_app_path_ = (path);                                                \
    if (!std::filesystem::exists(tapeflow_app_path_)) {                                           \
      if (::tapeflow::testing::kAppsBuilt) {                                                      \
        FAIL() << tapeflow_app_path_ << " is missing, but this build builds the apps";            \
      } else {                                                                                    \
        GTEST_SKIP() << tapeflow_app_path_ << " is not built (configured with TAPEFLOW_BUILD_APPS=OFF)"; \
      }                                                                                           \
    }                                                                                             \
  } while (0)
