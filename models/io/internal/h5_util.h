// HDF5 C API helpers shared by the reader and the writer: the global lock, RAII ids, error text,
// dtype <-> HDF5 type mapping and path handling. Not public API (includes hdf5.h).
#pragma once

#include <hdf5.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tape/core/dtype.h"

namespace tapeflow::io::internal {

// Locks the process-wide HDF5 mutex (the Debian build is not thread-safe). The first call also
// turns off HDF5's automatic error printing, its dynamic filter-plugin loading and (if it is the
// process's first HDF5 call) its library shutdown at exit, which crashes after a failed H5Fclose.
std::unique_lock<std::mutex> lock_hdf5();

// Owns one HDF5 identifier and closes it with the matching H5?close on scope exit.
class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Hid() { reset(); }
  Hid(Hid&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) { reset(); id_ = o.id_; closer_ = o.closer_; o.id_ = H5I_INVALID_HID; }
    return *this;
  }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now; returns false if the close failed (e.g. a deferred write error).
  bool close() { bool ok = !valid() || closer_(id_) >= 0; id_ = H5I_INVALID_HID; return ok; }
  void reset() { if (valid()) closer_(id_); id_ = H5I_INVALID_HID; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Makes a file-access property list for our files: the plain POSIX driver, strong close, and no
// HDF5 file locking (published files are never modified, so locks only add failure modes, e.g. on
// file systems without flock). Returns an invalid Hid on failure.
Hid make_file_access_props();

// Takes HDF5's innermost error description off the current error stack (and clears it).
std::string take_hdf5_error();

// Throws std::runtime_error "<file>: '<object>': <problem> (HDF5: <innermost message>)".
// `object` may be empty (then the quoted part is left out).
[[noreturn]] void fail(const std::string& file, const std::string& object, const std::string& problem);

// Returns `id` if it is valid, else fail(file, object, problem). Wrap the result in a Hid.
hid_t check_id(hid_t id, const std::string& file, const std::string& object, const std::string& problem);
// fail(...) if `status` is negative.
void check_status(herr_t status, const std::string& file, const std::string& object, const std::string& problem);

// Splits "/a//b/" into {"a", "b"}; "" and "/" give {}.
std::vector<std::string> split_path(const std::string& path);
// "/a/b" for any spelling of the same path ("/" for the root).
std::string normalize_path(const std::string& path);

// The little-endian file type for `dtype` (an enum {FALSE, TRUE} over int8 for bool).
Hid file_type_for(DType dtype);
// The native in-memory type for `dtype` (for bool: the same enum over the native int8).
Hid memory_type_for(DType dtype);
// The DType an HDF5 dataset type maps to, or nullopt if it is not one this layer reads.
std::optional<DType> dtype_from_file_type(hid_t type);
// A short human name of an HDF5 type class ("integer", "string", ...).
std::string type_class_name(hid_t type);

}  // namespace tapeflow::io::internal
