// H5Writer: builds a new HDF5 file under a temporary name and publishes it atomically.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "models/io/atomic_file.h"
#include "models/io/h5_io.h"
#include "models/io/internal/chunk_io.h"
#include "models/io/internal/fs_util.h"
#include "models/io/internal/h5_util.h"

namespace tapeflow::io {

using internal::check_id;
using internal::check_status;
using internal::Hid;

namespace {

// Chunk dims of about target: whole trailing rows, so each chunk is contiguous in memory.
std::vector<hsize_t> chunk_dims(const std::vector<std::int64_t>& shape, std::int64_t element_size,
                                std::int64_t target) {
  target = std::min<std::int64_t>(target, std::int64_t{1} << 30);  // HDF5 caps a chunk at 4 GiB
  std::vector<hsize_t> chunk(shape.begin(), shape.end());
  for (std::size_t i = 0; i < chunk.size(); ++i) {
    std::int64_t rest = element_size;  // bytes of one slice along dim i
    for (std::size_t j = i + 1; j < chunk.size(); ++j) rest *= static_cast<std::int64_t>(chunk[j]);
    if (rest * static_cast<std::int64_t>(chunk[i]) <= target) break;
    if (rest >= target) { chunk[i] = 1; continue; }
    chunk[i] = static_cast<hsize_t>(std::max<std::int64_t>(1, target / rest));
    break;
  }
  return chunk;
}

// Element count of `shape`; std::invalid_argument for a negative dim, rank > 32 or overflow.
std::int64_t checked_elements(const std::string& where, const std::vector<std::int64_t>& shape) {
  if (shape.size() > H5S_MAX_RANK)
    throw std::invalid_argument(where + ": rank " + std::to_string(shape.size()) + " exceeds HDF5's 32");
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw std::invalid_argument(where + ": negative dimension " + std::to_string(d));
    if (d > 0 && n > (std::int64_t{1} << 56) / d)
      throw std::invalid_argument(where + ": shape too large");
    n *= d;
  }
  return n;
}

}  // namespace

struct H5Writer::Impl {
  std::string path;
  std::string tmp;
  H5WriterOptions options;
  Hid file;
  Hid group_create_props;  // link creation order tracked and indexed, for every group we make
  bool finished = false;   // committed, or a commit failed

  std::string where(const std::string& object) const { return path + ": '" + object + "'"; }

  void require_open(const char* op) const {
    if (finished) throw std::logic_error(path + ": H5Writer::" + op + " after commit()");
  }

  // Opens (creating as needed, with creation-order tracking) the group named by `parts`.
  Hid ensure_group(const std::vector<std::string>& parts) {
    Hid group(H5Gopen2(file.get(), "/", H5P_DEFAULT), H5Gclose);
    check_id(group.get(), path, "/", "cannot open the root group");
    std::string sofar;
    for (const std::string& part : parts) {
      sofar += "/" + part;
      const htri_t there = H5Lexists(group.get(), part.c_str(), H5P_DEFAULT);
      check_status(there, path, sofar, "cannot look up link");
      Hid next;
      if (there > 0) {
        H5O_info_t info;
        check_status(H5Oget_info_by_name2(group.get(), part.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT),
                     path, sofar, "cannot inspect object");
        if (info.type != H5O_TYPE_GROUP)
          throw std::invalid_argument(where(sofar) + ": exists and is not a group");
        next = Hid(H5Gopen2(group.get(), part.c_str(), H5P_DEFAULT), H5Gclose);
      } else {
        next = Hid(H5Gcreate2(group.get(), part.c_str(), H5P_DEFAULT, group_create_props.get(), H5P_DEFAULT),
                   H5Gclose);
      }
      check_id(next.get(), path, sofar, "cannot open or create group");
      group = std::move(next);
    }
    return group;
  }

  // The parent group of `object` (created as needed) and the last path component.
  std::pair<Hid, std::string> parent_of(const std::string& object) {
    std::vector<std::string> parts = internal::split_path(object);
    if (parts.empty()) throw std::invalid_argument(path + ": an object path must not be empty or '/'");
    std::string leaf = parts.back();
    parts.pop_back();
    Hid parent = ensure_group(parts);
    const htri_t there = H5Lexists(parent.get(), leaf.c_str(), H5P_DEFAULT);
    check_status(there, path, object, "cannot look up link");
    if (there > 0) throw std::invalid_argument(where(internal::normalize_path(object)) + ": already exists");
    return {std::move(parent), std::move(leaf)};
  }

  // Opens `object` for attaching an attribute, deleting any attribute `name` already there.
  Hid open_for_attribute(const std::string& object, const std::string& name) {
    const std::string norm = internal::normalize_path(object);
    Hid obj(H5Oopen(file.get(), norm.c_str(), H5P_DEFAULT), H5Oclose);
    check_id(obj.get(), path, norm, "no such object to attach attribute '" + name + "' to");
    const htri_t there = H5Aexists(obj.get(), name.c_str());
    check_status(there, path, norm, "cannot look up attribute '" + name + "'");
    if (there > 0) check_status(H5Adelete(obj.get(), name.c_str()), path, norm, "cannot replace attribute '" + name + "'");
    return obj;
  }

  void write_attribute(const std::string& object, const std::string& name, hid_t file_type, hid_t space,
                       hid_t memory_type, const void* data) {
    const std::string norm = internal::normalize_path(object);
    Hid obj = open_for_attribute(object, name);
    Hid attr(H5Acreate2(obj.get(), name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    check_id(attr.get(), path, norm, "cannot create attribute '" + name + "'");
    check_status(H5Awrite(attr.get(), memory_type, data), path, norm, "cannot write attribute '" + name + "'");
  }

  void discard() {
    file.reset();
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
  }
};

H5Writer::H5Writer(const std::string& path, H5WriterOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.chunk_bytes < 1)
    throw std::invalid_argument(path + ": H5Writer: chunk_bytes must be positive, got " + std::to_string(options.chunk_bytes));
  auto lock = internal::lock_hdf5();
  impl_->path = path;
  impl_->options = options;
  impl_->tmp = make_temp_path(path);
  const unsigned order = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;
  Hid fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  Hid fapl = internal::make_file_access_props();
  impl_->group_create_props = Hid(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
  if (!fcpl.valid() || !fapl.valid() || !impl_->group_create_props.valid() ||
      H5Pset_link_creation_order(fcpl.get(), order) < 0 ||
      H5Pset_link_creation_order(impl_->group_create_props.get(), order) < 0 ||
      H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V110, H5F_LIBVER_V110) < 0)
    internal::fail(path, "", "cannot set up HDF5 file properties");
  impl_->file = Hid(H5Fcreate(impl_->tmp.c_str(), H5F_ACC_EXCL, fcpl.get(), fapl.get()), H5Fclose);
  if (!impl_->file.valid()) {  // e.g. a full disk: H5Fcreate may have made the file before failing
    const std::string detail = internal::take_hdf5_error();
    std::error_code ec;
    std::filesystem::remove(impl_->tmp, ec);
    throw std::runtime_error(path + ": cannot create temporary file '" + impl_->tmp + "'" +
                             (detail.empty() ? "" : " (HDF5: " + detail + ")"));
  }
}

H5Writer::~H5Writer() {
  if (!impl_ || impl_->finished) return;
  auto lock = internal::lock_hdf5();
  impl_->discard();
}

H5Writer::H5Writer(H5Writer&&) noexcept = default;

H5Writer& H5Writer::operator=(H5Writer&& other) noexcept {
  if (this != &other) {
    H5Writer doomed(std::move(*this));  // discards our temporary file if uncommitted
    impl_ = std::move(other.impl_);
  }
  return *this;
}

const std::string& H5Writer::path() const { return impl_->path; }

void H5Writer::create_group(const std::string& group_path) {
  auto lock = internal::lock_hdf5();
  impl_->require_open("create_group");
  impl_->ensure_group(internal::split_path(group_path));
}

void H5Writer::write_dataset(const std::string& path, DType dtype, const std::vector<std::int64_t>& shape,
                             const void* data) {
  auto lock = internal::lock_hdf5();
  Impl& w = *impl_;
  w.require_open("write_dataset");
  const std::string norm = internal::normalize_path(path);
  const std::int64_t elements = checked_elements(w.where(norm), shape);
  if (elements > 0 && data == nullptr) throw std::invalid_argument(w.where(norm) + ": data is null");
  auto [parent, leaf] = w.parent_of(path);

  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Hid space(shape.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
            H5Sclose);
  check_id(space.get(), w.path, norm, "cannot create dataspace");
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  check_id(dcpl.get(), w.path, norm, "cannot create dataset properties");
  herr_t status = H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  std::vector<hsize_t> chunk;
  if (shape.empty()) {
    status = std::min(status, H5Pset_layout(dcpl.get(), H5D_COMPACT));  // bytes live in the checksummed header
  } else if (elements > 0) {
    chunk = chunk_dims(shape, static_cast<std::int64_t>(dtype_size(dtype)), w.options.chunk_bytes);
    status = std::min(status, H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()));
    status = std::min(status, H5Pset_fletcher32(dcpl.get()));
  }
  check_status(status, w.path, norm, "cannot set dataset layout");
  Hid file_type = internal::file_type_for(dtype);
  Hid memory_type = internal::memory_type_for(dtype);
  Hid dataset(H5Dcreate2(parent.get(), leaf.c_str(), file_type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
              H5Dclose);
  check_id(dataset.get(), w.path, norm, "cannot create dataset");
  // Our chunks are contiguous runs: write them directly (own checksum, no pipeline copies) when the
  // in-memory bytes are already the file's (little-endian hosts).
  if (!chunk.empty() && internal::is_run_chunking(shape, chunk) && H5Tequal(file_type.get(), memory_type.get()) > 0)
    internal::write_run_chunks(dataset.get(), shape, chunk, dtype_size(dtype), static_cast<const std::byte*>(data),
                               w.path, norm);
  else if (elements > 0)
    check_status(H5Dwrite(dataset.get(), memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), w.path, norm,
                 "cannot write dataset");
}

void H5Writer::write_attribute(const std::string& object_path, const std::string& name,
                               const std::vector<std::string>& strings) {
  auto lock = internal::lock_hdf5();
  Impl& w = *impl_;
  w.require_open("write_attribute");
  std::size_t width = 1;
  for (const std::string& s : strings) {
    if (s.find('\0') != std::string::npos)
      throw std::invalid_argument(w.where(internal::normalize_path(object_path)) + ": attribute '" + name +
                                  "': string contains a NUL byte");
    width = std::max(width, s.size());
  }
  std::vector<char> buffer(std::max<std::size_t>(1, strings.size() * width), '\0');  // HDF5 wants non-null
  for (std::size_t i = 0; i < strings.size(); ++i) std::memcpy(buffer.data() + i * width, strings[i].data(), strings[i].size());
  Hid type(H5Tcopy(H5T_C_S1), H5Tclose);
  const hsize_t count = strings.size();
  Hid space(H5Screate_simple(1, &count, nullptr), H5Sclose);
  if (!type.valid() || !space.valid() || H5Tset_size(type.get(), width) < 0 ||
      H5Tset_strpad(type.get(), H5T_STR_NULLPAD) < 0 || H5Tset_cset(type.get(), H5T_CSET_ASCII) < 0)
    internal::fail(w.path, internal::normalize_path(object_path), "cannot build string type for '" + name + "'");
  w.write_attribute(object_path, name, type.get(), space.get(), type.get(), buffer.data());
}

void H5Writer::write_attribute(const std::string& object_path, const std::string& name, const std::string& value) {
  auto lock = internal::lock_hdf5();
  Impl& w = *impl_;
  w.require_open("write_attribute");
  if (value.find('\0') != std::string::npos)
    throw std::invalid_argument(w.where(internal::normalize_path(object_path)) + ": attribute '" + name +
                                "': string contains a NUL byte");
  // Fixed-length (what h5py writes for bytes, and Keras for model_config): a variable-length string
  // would live in the global heap, which HDF5 cannot read safely from an untrusted file.
  Hid type(H5Tcopy(H5T_C_S1), H5Tclose);
  Hid space(H5Screate(H5S_SCALAR), H5Sclose);
  if (!type.valid() || !space.valid() || H5Tset_size(type.get(), std::max<std::size_t>(1, value.size())) < 0 ||
      H5Tset_strpad(type.get(), H5T_STR_NULLPAD) < 0 || H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0)
    internal::fail(w.path, internal::normalize_path(object_path), "cannot build string type for '" + name + "'");
  std::string padded = value;
  if (padded.empty()) padded.push_back('\0');
  w.write_attribute(object_path, name, type.get(), space.get(), type.get(), padded.data());
}

void H5Writer::write_attribute(const std::string& object_path, const std::string& name, std::int64_t value) {
  auto lock = internal::lock_hdf5();
  Impl& w = *impl_;
  w.require_open("write_attribute");
  Hid space(H5Screate(H5S_SCALAR), H5Sclose);
  check_id(space.get(), w.path, internal::normalize_path(object_path), "cannot create dataspace");
  w.write_attribute(object_path, name, H5T_STD_I64LE, space.get(), H5T_NATIVE_INT64, &value);
}

void H5Writer::commit() {
  auto lock = internal::lock_hdf5();
  Impl& w = *impl_;
  w.require_open("commit");
  w.finished = true;
  try {
    check_status(H5Fflush(w.file.get(), H5F_SCOPE_GLOBAL), w.path, "", "cannot flush '" + w.tmp + "'");
    if (!w.file.close()) internal::fail(w.path, "", "cannot close '" + w.tmp + "'");
    internal::publish_temp_file(w.tmp, w.path);
  } catch (...) {
    w.discard();
    throw;
  }
}

}  // namespace tapeflow::io
