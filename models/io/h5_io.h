// Crash-safe HDF5 writing and hostile-file-proof HDF5 reading of raw typed arrays and attributes.
//
// The layer beneath save_weights / Checkpoint: it knows HDF5 files, groups, datasets and attributes,
// not tensors or models. Everything here is std + project types; the HDF5 C API stays in the .cc files.
//
// Paths:    object paths are '/'-separated from the root ("dense/dense/kernel:0"); a leading '/' is
//           optional; "" and "/" name the root group. Empty components are ignored.
// Layout:   files use the HDF5 1.10 format (libver bounds v110..v110; readable by HDF5 >= 1.10, e.g.
//           h5py 3 and Debian 12's h5dump) so every metadata block (superblock, object headers, and
//           the single-chunk / fixed-array chunk indexes) carries a checksum; the 1.8 format's v1
//           B-tree chunk index has none, and a flipped byte there silently reads as zeros. Groups
//           track link creation order. Non-empty arrays of rank >= 1 are chunked (about 1 MiB per
//           chunk, each a contiguous run of the row-major array) with the Fletcher-32 filter;
//           scalars are compact (their bytes live in the checksummed object header); empty arrays
//           are contiguous with no storage.
// Speed:    on little-endian hosts chunks are written directly (H5Dwrite_chunk) with a
//           vectorised Fletcher-32 that is bit-identical to HDF5's filter, so any HDF5 reader
//           verifies them, and read with one preadv each at the address HDF5's chunk index gives,
//           straight into the destination (H5Dataset::read_into), checksum verified; other layouts
//           (and files with a user block) go through HDF5's filter pipeline.
// DTypes:   float32 -> H5T_IEEE_F32LE, float64 -> H5T_IEEE_F64LE, int32 -> H5T_STD_I32LE,
//           int64 -> H5T_STD_I64LE, bool -> enum {FALSE = 0, TRUE = 1} over int8, exactly what
//           h5py writes for numpy bool (so h5py reads it back as bool). The reader also accepts
//           big-endian / native variants of these classes and converts them.
// Threads:  the Debian HDF5 is not thread-safe; every HDF5 call made by this layer holds one global
//           mutex, so readers and writers may be used from several threads (not one object from
//           several threads at once).
// Errors:   every failure is a std::runtime_error "<file>: <object path>: <problem>" (HDF5's innermost
//           message appended in parentheses when there is one); HDF5's own error printing is turned
//           off process-wide. Bad arguments are std::invalid_argument, use after commit() is
//           std::logic_error.
// Ref:      h5py / TF-Keras 2 `saving/legacy/hdf5_format.py` for the attribute conventions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tape/core/dtype.h"

namespace tapeflow::io {

// A dense row-major array read from a file: bytes.size() == dtype_size(dtype) * product(shape).
// Bool elements are one byte each, 0 or 1.
struct ArrayData {
  DType dtype = DType::kFloat32;    // the element type the file's type was converted to
  std::vector<std::int64_t> shape;  // dimensions ([] for a scalar)
  std::vector<std::byte> bytes;     // the elements, row-major, in host byte order
};

// Layout choices of an H5Writer.
struct H5WriterOptions {
  // Target size of one chunk of a dataset (each carries its own Fletcher-32 checksum); chunks are
  // whole trailing rows where possible.
  std::int64_t chunk_bytes = std::int64_t{1} << 20;
};

// Writes a new HDF5 file under a temporary name and atomically replaces `path` on commit().
// Facts:    the temporary file is "<path>.tmp-<pid>-<random hex>" in the same directory. commit()
//           flushes and closes it, fsyncs it, renames it over `path` and fsyncs the directory, so
//           after a crash `path` is either the old file or the complete new one. Destroying the
//           writer without commit() deletes the temporary file. Temporary files left by a killed
//           process never collide with later saves (see remove_stale_temp_files).
// Errors:   std::runtime_error naming `path` and the object if HDF5 or the file system fails;
//           std::invalid_argument for a negative dimension, a string with an embedded NUL or an
//           object that already exists; std::logic_error for any call after commit().
class H5Writer {
 public:
  // Creates the temporary file next to `path` (nothing at `path` changes before commit()).
  // Errors: std::invalid_argument for chunk_bytes < 1; std::runtime_error naming `path` if the
  // temporary file cannot be created.
  explicit H5Writer(const std::string& path, H5WriterOptions options = {});
  ~H5Writer();
  H5Writer(const H5Writer&) = delete;
  H5Writer& operator=(const H5Writer&) = delete;
  // Takes over `other`'s file; `other` may then only be destroyed or assigned to.
  H5Writer(H5Writer&&) noexcept;
  // Discards this writer's uncommitted temporary file, then takes over `other`'s file.
  H5Writer& operator=(H5Writer&&) noexcept;

  // Creates a group and any missing parents; a no-op if the group already exists.
  void create_group(const std::string& group_path);
  // Writes a dataset of `shape` (row-major, dtype_size(dtype) * product(shape) bytes at `data`;
  // `data` may be null when the product is 0). Missing parent groups are created.
  // Shapes:   [] is a scalar; any dimension may be 0.
  void write_dataset(const std::string& path, DType dtype, const std::vector<std::int64_t>& shape,
                     const void* data);
  // Writes (or replaces) a 1-D attribute of fixed-length, NUL-padded ASCII strings sized to the
  // longest one: what h5py writes for Keras's `layer_names` / `weight_names`. An empty list is a
  // 1-D attribute of 0 elements.
  void write_attribute(const std::string& object_path, const std::string& name,
                       const std::vector<std::string>& strings);
  // Writes (or replaces) a scalar fixed-length, NUL-padded UTF-8 string attribute (h5py's
  // `attrs[k] = b"..."`, as Keras writes `model_config`); never variable-length (see H5Reader).
  void write_attribute(const std::string& object_path, const std::string& name, const std::string& value);
  // Writes (or replaces) a scalar int64 attribute.
  void write_attribute(const std::string& object_path, const std::string& name, std::int64_t value);
  // Makes the file durable and visible at `path`. Errors: std::runtime_error; the temporary file is
  // removed and `path` is untouched on failure.
  void commit();
  // The path the file will have after commit().
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Limits the reader enforces before it allocates anything.
struct H5ReaderOptions {
  // Largest dataset (in bytes, after conversion to the in-memory type) read_dataset accepts.
  std::int64_t max_dataset_bytes = std::int64_t{8} << 30;
  // Largest attribute payload (in bytes) the attribute readers accept.
  std::int64_t max_attribute_bytes = std::int64_t{64} << 20;
};

class H5Reader;

// A dataset opened by H5Reader::open_dataset: its dtype and shape, known (and checked against the
// reader's limits and the file size) before anything is allocated, and a read straight into the
// caller's memory. Opening once and reading in place avoids the repeated path lookups of
// dataset_shape / dataset_dtype / read_dataset and read_dataset's intermediate buffer.
// Facts:    valid while the H5Reader that opened it lives; not usable from several threads at once.
// Errors:   read_into throws what read_dataset throws (checksum mismatch, missing chunk, ...), and
//           std::invalid_argument if `bytes` != nbytes() or `out` is null for a non-empty dataset.
class H5Dataset {
 public:
  ~H5Dataset();
  H5Dataset(const H5Dataset&) = delete;
  H5Dataset& operator=(const H5Dataset&) = delete;
  // Takes over `other`'s open dataset; `other` may then only be destroyed or assigned to.
  H5Dataset(H5Dataset&&) noexcept;
  // Closes this dataset, then takes over `other`'s.
  H5Dataset& operator=(H5Dataset&&) noexcept;

  // The element type read_into produces (the file's type mapped as under DTypes above).
  DType dtype() const;
  // The dataset's dimensions ([] for a scalar).
  const std::vector<std::int64_t>& shape() const;
  // dtype_size(dtype()) * product(shape()): what read_into writes.
  std::size_t nbytes() const;
  // Reads the whole dataset (row-major) into `out`, which holds exactly `bytes` == nbytes() bytes;
  // checksums are verified and bool elements checked to be 0 or 1. `out` may be partly written
  // when this throws.
  void read_into(void* out, std::size_t bytes) const;

 private:
  friend class H5Reader;
  struct Impl;
  explicit H5Dataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Opens an existing HDF5 file read-only and reads datasets and attributes defensively.
// Facts:    links are followed only inside the file: external links, external-storage datasets,
//           virtual datasets, and filters other than deflate / shuffle / Fletcher-32 are refused
//           (and dynamically loaded filter plugins are disabled). Checksums present in the file are
//           verified. A dataset's declared size is checked against max_dataset_bytes and against
//           the file size (allowing zlib's best ratio when it is deflated) before any allocation.
// Errors:   std::runtime_error "<path>: does not exist" / "is not a regular file" /
//           "not an HDF5 file" / "cannot open HDF5 file (...)" from the constructor, and
//           "<path>: '<object>': <problem>" from the accessors (missing object or attribute,
//           wrong type, dangling soft link, external link refused, checksum mismatch, ...).
class H5Reader {
 public:
  // Opens `path` read-only. Errors: std::runtime_error "<path>: does not exist" / "is not a regular
  // file" / "not an HDF5 file" / "cannot open HDF5 file (...)".
  explicit H5Reader(const std::string& path, H5ReaderOptions options = {});
  ~H5Reader();
  H5Reader(const H5Reader&) = delete;
  H5Reader& operator=(const H5Reader&) = delete;
  // Takes over `other`'s open file; `other` may then only be destroyed or assigned to.
  H5Reader(H5Reader&&) noexcept;
  // Closes this reader's file, then takes over `other`'s.
  H5Reader& operator=(H5Reader&&) noexcept;

  // True if `object_path` names a group or dataset reachable through hard or soft links inside the
  // file (a dangling soft link gives false). Errors: runtime_error if the path crosses an external link.
  bool exists(const std::string& object_path) const;
  // True if `object_path` is a group / a dataset (false if missing).
  bool is_group(const std::string& object_path) const;
  // True if `object_path` is a dataset (false if missing or a group).
  bool is_dataset(const std::string& object_path) const;
  // Member names of a group, in creation order when the group tracks it, else sorted by name.
  std::vector<std::string> list_group(const std::string& group_path) const;
  // Reads a whole dataset. Errors: runtime_error for a missing dataset, an unsupported type, a
  // declared size beyond the limits, external/virtual storage, or a checksum mismatch.
  ArrayData read_dataset(const std::string& path) const;
  // Opens a dataset for reading into caller memory (see H5Dataset). Errors: runtime_error as
  // read_dataset for everything knowable before reading (missing, unsupported type, absurd size,
  // external / virtual storage, refused filters).
  H5Dataset open_dataset(const std::string& path) const;
  // Opens `path` if it names a dataset (when is_dataset is true), else std::nullopt: one lookup
  // where is_dataset + open_dataset take two. Errors: as open_dataset, for a dataset that exists.
  std::optional<H5Dataset> find_dataset(const std::string& path) const;
  // The dimensions of the dataset at `path` ([] for a scalar), without reading it.
  // Errors: runtime_error as open_dataset.
  std::vector<std::int64_t> dataset_shape(const std::string& path) const;
  // The element type the dataset at `path` reads as, without reading it.
  // Errors: runtime_error as open_dataset.
  DType dataset_dtype(const std::string& path) const;

  // True if the group or dataset `object_path` has an attribute `name`.
  // Errors: runtime_error naming the object if it does not exist.
  bool has_attribute(const std::string& object_path, const std::string& name) const;
  // Reads a string attribute of rank 0 or 1 (an HDF5 null dataspace, or an empty numeric array as
  // h5py writes an empty list, is an empty list). Fixed-length strings: trailing NULs / pad spaces
  // are stripped. Variable-length strings (h5py writes every str attribute so, hence Keras's
  // model_config, training_config, layer_names, weight_names) are read only after every element's
  // global-heap object has been checked against the file's bytes (internal/vlen_check.h: HDF5
  // 1.10's heap reader loops forever or reads out of bounds on a damaged heap), with their total
  // size within max_attribute_bytes; HDF5's buffers are freed with H5Treclaim. A damaged heap, or a
  // variable-length attribute kept in dense storage, is a runtime_error naming the attribute.
  std::vector<std::string> read_string_array_attribute(const std::string& object_path,
                                                       const std::string& name) const;
  // Reads a string attribute holding exactly one string (scalar or 1-element).
  std::string read_string_attribute(const std::string& object_path, const std::string& name) const;
  // Reads a scalar (or 1-element) integer attribute of any integer width.
  std::int64_t read_int_attribute(const std::string& object_path, const std::string& name) const;

  // The file's path as given to the constructor (the prefix of every error message).
  const std::string& path() const;

 private:
  friend class H5Dataset;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tapeflow::io
