// IdxArray::num_elements on headers whose dims hold a 0 after huge dims: 0, without overflowing.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "data/idx.h"

namespace {

TEST(IdxOverflow, ZeroDimensionAfterHugeDimsIsEmpty) {
  tapeflow::data::IdxArray a;
  a.dims = {4294967295, 4294967295, 4294967295, 0};
  EXPECT_EQ(a.num_elements(), 0);
  a.dims = {0, 4294967295, 4294967295, 4294967295};
  EXPECT_EQ(a.num_elements(), 0);
  a.dims = {4294967295, 4294967295, 4294967295};
  EXPECT_THROW(a.num_elements(), std::overflow_error);
  a.dims = {60000, 28, 28};
  EXPECT_EQ(a.num_elements(), 60000 * 28 * 28);
}

// The same header read from a file: an empty array, and num_elements() on it is 0.
TEST(IdxOverflow, ReaderAcceptsTheEmptyHeaderWithoutOverflow) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tapeflow_idx_overflow_" + std::to_string(::getpid()) + ".idx")).string();
  {
    std::ofstream out(path, std::ios::binary);
    const unsigned char header[] = {0, 0, 0x08, 4,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0,    0,    0,    0};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
  }
  const tapeflow::data::IdxArray a = tapeflow::data::read_idx(path);
  EXPECT_EQ(a.num_elements(), 0);
  EXPECT_TRUE(a.bytes.empty());
  std::filesystem::remove(path);
}

}  // namespace
