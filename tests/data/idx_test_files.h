// Writes small IDX files (plain or gzip) into a temporary directory for the data tests.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tapeflow::data::testing {

// An IDX file image: magic 00 00 `type` ndims, big-endian dims, then `payload` as given.
inline std::vector<std::uint8_t> idx_bytes(std::uint8_t type, const std::vector<std::uint32_t>& dims,
                                           const std::vector<std::uint8_t>& payload) {
  std::vector<std::uint8_t> b = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<std::uint8_t>(d >> shift));
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("tapeflow_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `bytes` to dir/name, gzip-compressed (zlib "wb") if `gzip`; returns the full path.
  std::string write(const std::string& name, const std::vector<std::uint8_t>& bytes, bool gzip) const {
    const std::string p = (path_ / name).string();
    if (gzip) {
      gzFile f = gzopen(p.c_str(), "wb");
      if (!f || gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) != static_cast<int>(bytes.size()))
        throw std::runtime_error("TempDir::write: gzwrite failed for " + p);
      gzclose(f);
    } else {
      std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
    }
    return p;
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace tapeflow::data::testing
