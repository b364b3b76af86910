#include "data/idx.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/data/idx_test_files.h"

namespace tapeflow::data {
namespace {

using ::testing::HasSubstr;
using testing::idx_bytes;
using testing::TempDir;

// Expects read_idx(path) to throw std::runtime_error whose message holds path and each of `parts`.
void expect_read_error(const std::string& path, const std::vector<std::string>& parts) {
  try {
    read_idx(path);
    ADD_FAILURE() << "read_idx(" << path << ") did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}

// Every test runs on a plain file and on the same bytes gzipped.
class IdxTest : public ::testing::TestWithParam<bool> {
 protected:
  std::string write(const std::vector<std::uint8_t>& bytes) {
    return dir_.write(GetParam() ? "a.idx.gz" : "a.idx", bytes, GetParam());
  }
  TempDir dir_;
};

TEST_P(IdxTest, ReadsUInt8WithFourDims) {
  std::vector<std::uint8_t> v(2 * 3 * 1 * 2);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(250 + i);
  const IdxArray a = read_idx(write(idx_bytes(0x08, {2, 3, 1, 2}, v)));
  EXPECT_EQ(a.type, IdxType::kUInt8);
  EXPECT_EQ(a.dims, (std::vector<std::int64_t>{2, 3, 1, 2}));
  EXPECT_EQ(a.num_elements(), 12);
  EXPECT_EQ(a.bytes, v);  // 250..255 then wraps to 0..5
  EXPECT_EQ(describe(a), "uint8 [2, 3, 1, 2]");
}

TEST_P(IdxTest, ConvertsEachTypeFromBigEndian) {
  const IdxArray i8 = read_idx(write(idx_bytes(0x09, {3}, {0x80, 0xff, 0x05})));
  EXPECT_THAT(std::vector<std::int8_t>(i8.as<std::int8_t>(), i8.as<std::int8_t>() + 3),
              ::testing::ElementsAre(-128, -1, 5));
  const IdxArray i16 = read_idx(write(idx_bytes(0x0B, {2}, {0x01, 0x02, 0xff, 0xfe})));
  EXPECT_EQ(i16.as<std::int16_t>()[0], 0x0102);
  EXPECT_EQ(i16.as<std::int16_t>()[1], -2);
  const IdxArray i32 = read_idx(write(idx_bytes(0x0C, {2}, {1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe})));
  EXPECT_EQ(i32.as<std::int32_t>()[0], 0x01020304);
  EXPECT_EQ(i32.as<std::int32_t>()[1], -2);
  // 1.5f = 0x3fc00000, -2.0f = 0xc0000000.
  const IdxArray f32 = read_idx(write(idx_bytes(0x0D, {2, 1}, {0x3f, 0xc0, 0, 0, 0xc0, 0, 0, 0})));
  EXPECT_EQ(f32.as<float>()[0], 1.5f);
  EXPECT_EQ(f32.as<float>()[1], -2.0f);
  // 1.5 = 0x3ff8000000000000, -0.25 = 0xbfd0000000000000.
  const IdxArray f64 =
      read_idx(write(idx_bytes(0x0E, {1, 2}, {0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0xbf, 0xd0, 0, 0, 0, 0, 0, 0})));
  EXPECT_EQ(f64.type, IdxType::kFloat64);
  EXPECT_EQ(f64.as<double>()[0], 1.5);
  EXPECT_EQ(f64.as<double>()[1], -0.25);
  EXPECT_THROW(f64.as<float>(), std::logic_error);
}

TEST_P(IdxTest, ReadsEmptyArrayWithZeroDimension) {
  const IdxArray a = read_idx(write(idx_bytes(0x0C, {0, 5}, {})));
  EXPECT_EQ(a.dims, (std::vector<std::int64_t>{0, 5}));
  EXPECT_TRUE(a.bytes.empty());
}

TEST_P(IdxTest, RejectsMalformedHeaders) {
  expect_read_error(write({0x01, 0x00, 0x08, 0x01, 0, 0, 0, 1, 7}), {"bad magic number 0x01000801"});
  expect_read_error(write(idx_bytes(0x0A, {1}, {7})), {"unknown type code 0x0a"});
  expect_read_error(write(idx_bytes(0x08, {}, {7})), {"number of dimensions 0"});
  expect_read_error(write(idx_bytes(0x08, {1, 1, 1, 1, 1}, {7})), {"number of dimensions 5"});
  expect_read_error(write({0, 0, 8}), {"truncated header: expected 4 bytes, got 3"});
  expect_read_error(write({0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1}), {"truncated header: expected 12 bytes, got 8"});
}

TEST_P(IdxTest, RejectsHugeDimsBeforeAllocating) {
  const std::uint32_t m = 0xffffffff;
  expect_read_error(write(idx_bytes(0x0E, {m, m, m, m}, {1, 2})), {"float64 [", "exceeds the limit"});
  expect_read_error(write(idx_bytes(0x0E, {65536, 65536, 8}, {1, 2})), {"exceeds the limit of 17179869184"});
  // 8 GiB announced, 10 bytes present: reported as truncated without allocating 8 GiB.
  expect_read_error(write(idx_bytes(0x08, {1u << 30, 8}, std::vector<std::uint8_t>(10))),
                    {"truncated payload", "needs 8589934592 bytes, got 10"});
}

TEST_P(IdxTest, RejectsWrongPayloadLength) {
  expect_read_error(write(idx_bytes(0x0B, {3}, {0, 1, 0, 2})),
                    {"truncated payload: int16 [3] needs 6 bytes, got 4"});
  expect_read_error(write(idx_bytes(0x08, {2}, {1, 2, 3, 4})), {"2 trailing bytes after the payload"});
  expect_read_error(write(idx_bytes(0x08, {3, 0}, {1, 2, 3})),
                    {"uint8 [3, 0] has a zero dimension but 3 bytes of data follow"});
}

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, IdxTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Gzip" : "Plain"; });

TEST(ReadIdx, ReportsMissingFile) {
  TempDir dir;
  expect_read_error(dir.path() + "/absent.idx", {"cannot open", "No such file"});
}

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(ReadIdx, ReportsCorruptGzipStreams) {
  TempDir dir;
  const std::string good = dir.write("good.gz", idx_bytes(0x08, {64}, std::vector<std::uint8_t>(64, 3)), true);
  std::vector<std::uint8_t> gz = read_all(good);
  ASSERT_GT(gz.size(), 20u);
  ASSERT_EQ(gz[0], 0x1f);
  ASSERT_EQ(gz[1], 0x8b);

  std::vector<std::uint8_t> bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0xff;  // the CRC-32 in the gzip trailer
  expect_read_error(dir.write("crc.gz", bad_crc, false), {"corrupt gzip stream: incorrect data check"});

  std::vector<std::uint8_t> cut(gz.begin(), gz.begin() + 14);  // header plus a few deflate bytes
  expect_read_error(dir.write("cut.gz", cut, false), {"corrupt gzip stream: unexpected end of file"});

  std::vector<std::uint8_t> garbage = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff, 0xff};
  expect_read_error(dir.write("garbage.idx", garbage, false), {"corrupt gzip stream: invalid"});
}

}  // namespace
}  // namespace tapeflow::data
