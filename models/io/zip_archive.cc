#include "models/io/zip_archive.h"

#include <zip.h>

#include <stdexcept>

#include "models/io/atomic_file.h"

namespace tapeflow::io {
namespace {

std::string zip_message(zip_error_t* e) {
  std::string s = zip_error_strerror(e);
  zip_error_fini(e);
  return s;
}

}  // namespace

void write_zip_atomic(const std::string& path, const ZipMembers& members) {
  auto fail = [&](const std::string& what) { throw std::runtime_error(path + ": cannot write the zip archive: " + what); };
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &error);
  if (buffer == nullptr) fail(zip_message(&error));
  zip_source_keep(buffer);  // outlives the archive: its bytes are read after zip_close
  struct Free {
    zip_source_t* s;
    ~Free() { zip_source_free(s); }
  } free_buffer{buffer};
  zip_t* archive = zip_open_from_source(buffer, ZIP_TRUNCATE, &error);
  if (archive == nullptr) fail(zip_message(&error));
  for (const auto& [name, bytes] : members) {
    zip_source_t* source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
    const zip_int64_t index = source == nullptr ? -1 : zip_file_add(archive, name.c_str(), source, ZIP_FL_ENC_UTF_8);
    if (index < 0 || zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) < 0) {
      if (source != nullptr && index < 0) zip_source_free(source);
      const std::string what = zip_strerror(archive);
      zip_discard(archive);
      fail("member '" + name + "': " + what);
    }
  }
  if (zip_close(archive) < 0) {
    const std::string what = zip_strerror(archive);
    zip_discard(archive);
    fail(what);
  }
  std::string bytes;
  if (zip_source_open(buffer) < 0) fail(zip_error_strerror(zip_source_error(buffer)));
  zip_source_seek(buffer, 0, SEEK_END);
  const zip_int64_t size = zip_source_tell(buffer);
  zip_source_seek(buffer, 0, SEEK_SET);
  if (size < 0) fail("cannot size the archive");
  bytes.resize(static_cast<std::size_t>(size));
  const zip_int64_t got = zip_source_read(buffer, bytes.data(), static_cast<zip_uint64_t>(size));
  zip_source_close(buffer);
  if (got != size) fail("cannot read the archive back");
  atomic_write_file(path, bytes);
}

struct ZipReader::Impl {
  zip_t* archive = nullptr;
};

ZipReader::ZipReader(const std::string& path) : path_(path), impl_(std::make_unique<Impl>()) {
  int code = 0;
  impl_->archive = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (impl_->archive == nullptr) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    const std::string what = zip_message(&error);
    if (code == ZIP_ER_NOENT) throw std::runtime_error(path + ": does not exist");
    if (code == ZIP_ER_NOZIP || code == ZIP_ER_INCONS)
      throw std::runtime_error(path + ": not a zip archive, or a truncated or damaged one (libzip: " + what + ")");
    throw std::runtime_error(path + ": cannot open the zip archive (libzip: " + what + ")");
  }
}

ZipReader::~ZipReader() {
  if (impl_ && impl_->archive != nullptr) zip_discard(impl_->archive);
}

bool ZipReader::has(const std::string& member) const { return zip_name_locate(impl_->archive, member.c_str(), 0) >= 0; }

std::string ZipReader::read(const std::string& member, std::int64_t max_bytes) const {
  const zip_int64_t index = zip_name_locate(impl_->archive, member.c_str(), 0);
  if (index < 0) throw std::runtime_error(path_ + ": missing member '" + member + "'");
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(impl_->archive, static_cast<zip_uint64_t>(index), 0, &st) < 0 || !(st.valid & ZIP_STAT_SIZE))
    throw std::runtime_error(path_ + ": member '" + member + "': cannot read its size (" +
                             zip_strerror(impl_->archive) + ")");
  if (st.size > static_cast<zip_uint64_t>(max_bytes))
    throw std::runtime_error(path_ + ": member '" + member + "' declares " + std::to_string(st.size) +
                             " bytes (more than the limit of " + std::to_string(max_bytes) + ")");
  zip_file_t* file = zip_fopen_index(impl_->archive, static_cast<zip_uint64_t>(index), 0);
  if (file == nullptr)
    throw std::runtime_error(path_ + ": member '" + member + "' cannot be opened (" + zip_strerror(impl_->archive) + ")");
  std::string bytes(static_cast<std::size_t>(st.size), '\0');
  std::size_t done = 0;
  std::string error;
  while (done < bytes.size()) {
    const zip_int64_t got = zip_fread(file, bytes.data() + done, bytes.size() - done);
    if (got < 0) {
      error = zip_file_strerror(file);
      break;
    }
    if (got == 0) {
      error = "ends after " + std::to_string(done) + " bytes";
      break;
    }
    done += static_cast<std::size_t>(got);
  }
  if (error.empty()) {  // at the end: libzip checks the CRC when the data runs out
    char extra;
    if (zip_fread(file, &extra, 1) < 0) error = zip_file_strerror(file);
  }
  zip_fclose(file);
  if (!error.empty()) throw std::runtime_error(path_ + ": member '" + member + "' is damaged (libzip: " + error + ")");
  return bytes;
}

}  // namespace tapeflow::io
