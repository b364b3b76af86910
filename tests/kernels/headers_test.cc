// Public kernel headers include only the standard library and project headers
// (Eigen and oneTBB stay in .cc files and tape/kernels/internal/).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

TEST(KernelHeaders, IncludeNoEigenOrTbb) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(TAPEFLOW_SOURCE_DIR) / "tape";
  std::vector<fs::path> headers = {root / "core" / "random.h"};
  for (const auto& entry : fs::directory_iterator(root / "kernels"))
    if (entry.path().extension() == ".h") headers.push_back(entry.path());
  ASSERT_GE(headers.size(), 7u);
  for (const auto& h : headers) {
    std::ifstream f(h);
    ASSERT_TRUE(f) << h;
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind("#include", 0) != 0) continue;
      const bool ok = line.find('<') != std::string::npos ? line.find('/') == std::string::npos
                                                          : line.find("\"tape/") != std::string::npos;
      EXPECT_TRUE(ok) << h << ": " << line;
    }
  }
}

}  // namespace
