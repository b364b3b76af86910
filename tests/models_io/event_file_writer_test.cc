// TensorBoard event files: CRC-32C against its published test vectors, record framing against
// bytes TensorBoard's own Python RecordWriter made, and the files the writer leaves (read back here
// record by record; their protos are read by TensorBoard itself in tests/interop/tensorboard_check.py).
#include "models/io/event_file_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/tfrecords.h"

namespace tapeflow::io {
namespace {

namespace fs = std::filesystem;
using tapeflow::testing::event_files;
using tapeflow::testing::read_tfrecords;

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

class EventFileWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tapeflow_events_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST(Crc32c, KnownVectors) {
  // The check value of CRC-32C and RFC 3720's (iSCSI) test vectors, B.4.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(Crc32c, RecordsAsTensorBoardsRecordWriterMakesThem) {
  // tensorboard.summary.writer.record_writer.RecordWriter(BytesIO()).write(b"hello"), TensorBoard 2.21.
  EXPECT_EQ(tfrecord("hello"), from_hex("0500000000000000eab2043e68656c6c6fbb1f1c19"));
  // ... and of Event(wall_time=1.5, step=7, summary {value {tag: "epoch_loss" simple_value: 0.25}}).
  const std::string event = from_hex("09000000000000f83f10072a130a110a0a65706f63685f6c6f7373150000803e");
  EXPECT_EQ(tfrecord(event),
            from_hex("200000000000000029eda950") + event + from_hex("43afa828"));
}

TEST_F(EventFileWriterTest, WritesFramedEventsStartingWithTheFileVersion) {
  std::string path;
  {
    EventFileWriter w(dir_.string());
    path = w.path();
    w.add_scalar("epoch_loss", 0.5, 0);
    w.add_histogram("dense/kernel/histogram", std::vector<double>{1, 2, 2, 3}, 0);
    w.add_histogram("constant/histogram", std::vector<double>{4, 4}, 1);
    const std::vector<std::uint8_t> pixels{0, 64, 128, 255, 255, 0};
    w.add_image("w/image", encode_png(pixels, 2, 3, 1), 2, 3, 1, 0);
    w.flush();
    EXPECT_EQ(read_tfrecords(path).size(), 5u);  // flush() wrote everything
    w.add_scalar("epoch_loss", 0.25, 1);
  }  // the destructor flushes
  EXPECT_EQ(fs::path(path).parent_path(), dir_);
  EXPECT_TRUE(fs::path(path).filename().string().starts_with("events.out.tfevents."));
  const auto records = read_tfrecords(path);
  ASSERT_EQ(records.size(), 6u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_NE(records[1].find("epoch_loss"), std::string::npos);
  EXPECT_NE(records[4].find("\x89PNG"), std::string::npos);
}

TEST_F(EventFileWriterTest, TwoWritersInOneDirectoryMakeTwoFiles) {
  EventFileWriter a(dir_.string()), b(dir_.string());
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(event_files(dir_).size(), 2u);
}

TEST_F(EventFileWriterTest, UnwritableLogDirIsNamed) {
  fs::create_directories(dir_);
  const fs::path blocker = dir_ / "file";
  std::ofstream(blocker) << "x";
  try {
    EventFileWriter w((blocker / "logs").string());
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((blocker / "logs").string()), std::string::npos) << e.what();
  }
  try {  // a directory nobody can make, root included
    EventFileWriter w("/proc/tapeflow_no_such_dir/logs");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/tapeflow_no_such_dir/logs"), std::string::npos) << e.what();
  }
}

TEST_F(EventFileWriterTest, BadHistogramsAndImagesAreRefused) {
  EventFileWriter w(dir_.string());
  EXPECT_THROW(w.add_histogram("empty", std::vector<double>{}, 0), std::invalid_argument);
  try {
    w.add_histogram("w/histogram", std::vector<double>{1.0, std::nan("")}, 0);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("w/histogram"), std::string::npos) << e.what();
  }
  const std::vector<std::uint8_t> pixels(6);
  EXPECT_THROW(encode_png(pixels, 2, 2, 1), std::invalid_argument);
  EXPECT_THROW(encode_png(pixels, 1, 1, 5), std::invalid_argument);
  EXPECT_THROW(encode_png(pixels, 0, 6, 1), std::invalid_argument);
  EXPECT_EQ(encode_png(pixels, 2, 3, 1).substr(1, 3), "PNG");
}

}  // namespace
}  // namespace tapeflow::io
