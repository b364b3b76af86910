#include "tests/testing/tfrecords.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>

#include "models/io/event_file_writer.h"

namespace tapeflow::testing {
namespace {
std::uint64_t get_le(const std::string& s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}
}  // namespace

std::vector<std::string> read_tfrecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    if (at + 12 > bytes.size()) {
      ADD_FAILURE() << path << ": truncated record header at " << at;
      break;
    }
    const std::uint64_t n = get_le(bytes, at, 8);
    if (get_le(bytes, at + 8, 4) != io::masked_crc32c(std::string_view(bytes).substr(at, 8))) {
      ADD_FAILURE() << path << ": bad length CRC at " << at;
      break;
    }
    if (n > bytes.size() - at - 12 || bytes.size() - at - 12 - n < 4) {
      ADD_FAILURE() << path << ": truncated record at " << at;
      break;
    }
    std::string payload = bytes.substr(at + 12, n);
    if (get_le(bytes, at + 12 + n, 4) != io::masked_crc32c(payload)) {
      ADD_FAILURE() << path << ": bad payload CRC at " << at;
      break;
    }
    out.push_back(std::move(payload));
    at += 16 + n;
  }
  return out;
}

std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().starts_with("events.out.tfevents.")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tapeflow::testing
