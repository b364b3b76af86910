// Nothing below distribute/ knows MPI: no file in tape/, layers/, optimizers/, data/ or models/
// includes <mpi.h> or a distribute/ header (the arrow models <- distribute points one way).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

TEST(DistributeLayering, NothingBelowDistributeIncludesMpiOrDistribute) {
  int files = 0;
  for (const char* dir : {"tape", "layers", "optimizers", "data", "models"}) {
    const fs::path root = fs::path(TAPEFLOW_SOURCE_DIR) / dir;
    ASSERT_TRUE(fs::exists(root)) << root;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".h" && ext != ".cc") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        if (line.rfind("#include", 0) != 0) continue;
        EXPECT_EQ(line.find("mpi.h"), std::string::npos) << entry.path() << ":" << n << ": " << line;
        EXPECT_EQ(line.find("\"distribute/"), std::string::npos) << entry.path() << ":" << n << ": " << line;
      }
    }
  }
  EXPECT_GT(files, 50);
}

}  // namespace
