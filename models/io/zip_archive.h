// Zip archives (what a Keras 3 `.keras` file is) through libzip: written whole and atomically,
// read member by member with every size bounded before anything is allocated.
//
// Facts:    write_zip_atomic builds the archive in memory (members stored uncompressed, as Keras's
//           saving_lib writes them), then atomic_write_file publishes it (temporary file, fsync,
//           rename): `path` is the old file or the complete new one, never half a zip.
//           ZipReader opens with libzip's consistency checks (ZIP_CHECKCONS); read() verifies
//           the member's CRC-32 as libzip reads it.
// Errors:   std::runtime_error "<path>: ..." naming the problem: "not a zip archive (...)" for
//           a truncated, damaged or foreign file, "missing member 'config.json'", "member 'x'
//           declares N bytes (more than the limit of M)", "member 'x' is damaged (CRC error ...)".
// Ref:      keras/src/saving/saving_lib.py (_save_model_to_fileobj, _safe_zip_read), libzip 1.7
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::io {

// (member name, bytes) in archive order.
using ZipMembers = std::vector<std::pair<std::string, std::string>>;

// Writes `members` (in order, stored uncompressed) as the zip archive `path`, atomically.
// Errors: std::runtime_error "<path>: cannot write the zip archive: ..." (naming the member when
// one cannot be added) or from atomic_write_file for I/O.
void write_zip_atomic(const std::string& path, const ZipMembers& members);

// Reads members of an existing zip archive (see the file comment for the checks).
class ZipReader {
 public:
  // Opens `path` read-only with consistency checks.
  // Errors: std::runtime_error "<path>: does not exist", "<path>: not a zip archive, or a truncated or
  // damaged one (libzip: ...)" or "<path>: cannot open the zip archive (libzip: ...)".
  explicit ZipReader(const std::string& path);
  ~ZipReader();
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  // True if the archive has a member of exactly this name ("config.json").
  bool has(const std::string& member) const;
  // The member's bytes. Errors: runtime_error if missing, larger than max_bytes, or damaged.
  std::string read(const std::string& member, std::int64_t max_bytes) const;
  // The archive's path as given to the constructor.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tapeflow::io
