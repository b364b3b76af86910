// H5Reader: opens untrusted HDF5 files and reads datasets and attributes with every size checked.
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "models/io/h5_io.h"
#include "models/io/internal/chunk_io.h"
#include "models/io/internal/h5_util.h"
#include "models/io/internal/vlen_check.h"

namespace tapeflow::io {

using internal::check_id;
using internal::check_status;
using internal::fail;
using internal::Hid;

namespace {

namespace fs = std::filesystem;

// Best compression ratio zlib can reach (deflate's 258-byte matches in 2-bit codes), with slack.
constexpr std::int64_t kMaxDeflateRatio = 1100;
// Soft links followed in a row before we call it a cycle (HDF5's own default limit).
constexpr int kMaxSoftLinks = 16;
// Chunk buffers this small are always allowed, whatever the file size.
constexpr std::int64_t kSmallChunkBytes = std::int64_t{1} << 20;

herr_t refuse_external_link(const char*, const char*, const char*, const char*, unsigned*, hid_t, void*) {
  return -1;
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

// a * b, or -1 if it would exceed 2^62.
std::int64_t mul_or_neg(std::int64_t a, std::int64_t b) {
  if (a < 0 || b < 0) return -1;
  if (b != 0 && a > (std::int64_t{1} << 62) / b) return -1;
  return a * b;
}

struct DatasetInfo {
  DType dtype;
  std::vector<std::int64_t> shape;
  std::int64_t elements = 0;
  std::vector<hsize_t> run_chunk;  // set when the chunks can be read directly (see chunk_io.h)
};

}  // namespace

struct H5Reader::Impl {
  std::string path;
  H5ReaderOptions options;
  std::int64_t file_size = 0;
  Hid lapl;  // link access: external links refused
  Hid file;
  internal::RawFile raw;  // fd >= 0 when run chunks can be read straight from the file

  [[noreturn]] void error(const std::string& object, const std::string& problem) const { fail(path, object, problem); }

  // Walks `object` link by link and returns an equivalent path made of hard links only (so HDF5
  // never traverses a link itself), or "" if it does not resolve. Soft links are followed by
  // hand, up to kMaxSoftLinks deep; external and user-defined links are refused.
  // `*dangling` is set when a soft link was followed to a missing target.
  std::string resolve(const std::string& object, bool* dangling = nullptr, int depth = 0) const {
    const std::vector<std::string> parts = internal::split_path(object);
    std::string sofar;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (parts[i] == ".") continue;
      const std::string next = sofar + "/" + parts[i];
      H5L_info_t info;
      if (H5Lget_info(file.get(), next.c_str(), &info, lapl.get()) < 0) {  // missing, or worse: find out
        internal::take_hdf5_error();
        const htri_t there = H5Lexists(file.get(), next.c_str(), lapl.get());
        if (there < 0 && !sofar.empty() && !is_group_path(sofar)) return "";  // "dataset/child" does not exist
        if (there < 0) error(next, "cannot look up link");
        if (there == 0) {
          if (dangling != nullptr) *dangling = depth > 0;
          return "";
        }
        error(next, "cannot inspect link");
      }
      if (info.type == H5L_TYPE_EXTERNAL) error(next, "is an external link to another file (refused)");
      if (info.type == H5L_TYPE_HARD) {
        sofar = next;
        continue;
      }
      if (info.type != H5L_TYPE_SOFT) error(next, "is a user-defined link (refused)");
      if (depth >= kMaxSoftLinks) error(next, "soft links nest too deeply (a cycle?)");
      if (info.u.val_size == 0 || info.u.val_size > 65536) error(next, "soft link has an absurd target length");
      std::string target(info.u.val_size, '\0');
      if (H5Lget_val(file.get(), next.c_str(), target.data(), target.size(), lapl.get()) < 0)
        error(next, "cannot read soft link target");
      target.resize(target.find('\0') == std::string::npos ? target.size() : target.find('\0'));
      std::string rest = target.rfind('/', 0) == 0 ? target : sofar + "/" + target;
      for (std::size_t j = i + 1; j < parts.size(); ++j) rest += "/" + parts[j];
      try {
        return resolve(rest, dangling, depth + 1);
      } catch (const std::runtime_error& e) {
        if (depth > 0) throw;
        throw std::runtime_error(std::string(e.what()) + " (reached through soft link '" + next + "')");
      }
    }
    return sofar.empty() ? "/" : sofar;
  }

  // Opens `object` and checks it is of `type`; `kind` names the type in messages.
  Hid open(const std::string& object, H5O_type_t type, const char* kind) const {
    bool dangling = false;
    const std::string norm = resolve(object, &dangling);
    if (norm.empty())
      error(internal::normalize_path(object), dangling ? std::string("is a dangling soft link") : std::string("no such ") + kind);
    Hid obj(H5Oopen(file.get(), norm.c_str(), lapl.get()), H5Oclose);
    check_id(obj.get(), path, norm, std::string("cannot open ") + kind);
    H5O_info_t info;
    check_status(H5Oget_info2(obj.get(), &info, H5O_INFO_BASIC), path, norm, "cannot inspect object");
    if (type != H5O_TYPE_UNKNOWN && info.type != type) error(norm, std::string("is not a ") + kind);
    return obj;
  }

  // True if the hard-link path `norm` is a group (false also if HDF5 cannot tell).
  bool is_group_path(const std::string& norm) const {
    H5O_info_t info;
    const bool group = H5Oget_info_by_name2(file.get(), norm.c_str(), &info, H5O_INFO_BASIC, lapl.get()) >= 0 &&
                       info.type == H5O_TYPE_GROUP;
    internal::take_hdf5_error();
    return group;
  }

  H5O_type_t type_of(const std::string& object) const {
    const std::string norm = resolve(object);
    if (norm.empty()) return H5O_TYPE_UNKNOWN;
    H5O_info_t info;
    check_status(H5Oget_info_by_name2(file.get(), norm.c_str(), &info, H5O_INFO_BASIC, lapl.get()), path, norm,
                 "cannot inspect object");
    return info.type;
  }

  // Checks storage, filters, type and declared size of an open dataset before anything is read.
  DatasetInfo inspect(hid_t dataset, const std::string& norm) const {
    Hid dcpl(H5Dget_create_plist(dataset), H5Pclose);
    check_id(dcpl.get(), path, norm, "cannot read dataset properties");
    const int external = H5Pget_external_count(dcpl.get());
    if (external != 0) error(norm, "uses external raw-data files (refused)");
    const H5D_layout_t layout = H5Pget_layout(dcpl.get());
    if (layout == H5D_VIRTUAL) error(norm, "is a virtual dataset mapping other files (refused)");
    if (layout < 0) error(norm, "cannot read dataset layout");
    bool deflated = false, fletcher_only = false;
    const int nfilters = H5Pget_nfilters(dcpl.get());
    if (nfilters < 0) error(norm, "cannot read filter pipeline");
    for (int i = 0; i < nfilters; ++i) {
      unsigned flags = 0, config = 0;
      std::size_t nvalues = 0;
      const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, nullptr, 0,
                                             nullptr, &config);
      fletcher_only = nfilters == 1 && id == H5Z_FILTER_FLETCHER32;
      if (id == H5Z_FILTER_DEFLATE) deflated = true;
      else if (id != H5Z_FILTER_FLETCHER32 && id != H5Z_FILTER_SHUFFLE)
        error(norm, "uses unsupported filter " + std::to_string(id) + " (only deflate, shuffle, Fletcher-32 are read)");
    }

    Hid type(H5Dget_type(dataset), H5Tclose);
    check_id(type.get(), path, norm, "cannot read datatype");
    const std::optional<DType> dtype = internal::dtype_from_file_type(type.get());
    if (!dtype)
      error(norm, "unsupported datatype (" + internal::type_class_name(type.get()) + " of " +
                      std::to_string(H5Tget_size(type.get())) + " bytes)");
    DatasetInfo out{*dtype, {}, 1, {}};
    Hid space(H5Dget_space(dataset), H5Sclose);
    check_id(space.get(), path, norm, "cannot read dataspace");
    const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
    if (space_class == H5S_SIMPLE) {
      const int rank = H5Sget_simple_extent_ndims(space.get());
      if (rank < 0 || rank > H5S_MAX_RANK) error(norm, "invalid rank " + std::to_string(rank));
      std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
      if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) error(norm, "cannot read dimensions");
      for (hsize_t d : dims) {
        if (d > static_cast<hsize_t>(std::numeric_limits<std::int64_t>::max()))
          error(norm, "declared dimension " + std::to_string(d) + " is absurd");
        out.shape.push_back(static_cast<std::int64_t>(d));
        out.elements = mul_or_neg(out.elements, out.shape.back());
      }
    } else if (space_class != H5S_SCALAR) {
      error(norm, "has a null or unknown dataspace");
    }
    const std::int64_t memory_bytes = mul_or_neg(out.elements, static_cast<std::int64_t>(dtype_size(out.dtype)));
    const std::int64_t stored_bytes = mul_or_neg(out.elements, static_cast<std::int64_t>(H5Tget_size(type.get())));
    const std::int64_t allowance = mul_or_neg(file_size, deflated ? kMaxDeflateRatio : 1);
    if (memory_bytes < 0 || stored_bytes < 0 || memory_bytes > options.max_dataset_bytes)
      error(norm, "declared size " + describe(out.shape) + " exceeds the limit of " +
                      std::to_string(options.max_dataset_bytes) + " bytes");
    if (stored_bytes > allowance)
      error(norm, "declared size " + describe(out.shape) + " (" + std::to_string(stored_bytes) +
                      " bytes) cannot fit in a file of " + std::to_string(file_size) + " bytes");
    if (layout == H5D_CHUNKED) {
      std::vector<hsize_t> chunk(H5S_MAX_RANK);
      const int rank = H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, chunk.data());
      if (rank < 0) error(norm, "cannot read chunk dimensions");
      std::int64_t chunk_bytes = static_cast<std::int64_t>(H5Tget_size(type.get()));
      for (int i = 0; i < rank; ++i)
        chunk_bytes = mul_or_neg(chunk_bytes, chunk[i] > (hsize_t{1} << 40) ? -1 : static_cast<std::int64_t>(chunk[i]));
      if (chunk_bytes < 0 || chunk_bytes > std::max(kSmallChunkBytes, std::min(allowance, options.max_dataset_bytes)))
        error(norm, "declared chunk size is absurd for a file of " + std::to_string(file_size) + " bytes");
      chunk.resize(static_cast<std::size_t>(rank));
      Hid memory_type = internal::memory_type_for(out.dtype);
      if (fletcher_only && internal::is_run_chunking(out.shape, chunk) &&
          H5Tequal(type.get(), memory_type.get()) > 0)
        out.run_chunk = chunk;
    }
    return out;
  }

  static std::string describe(const std::vector<std::int64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }

  // Opens attribute `name` of `object`; errors name both.
  Hid open_attribute(const std::string& object, const std::string& name, std::string* norm, Hid* owner) const {
    Hid obj = open(object, H5O_TYPE_UNKNOWN, "object");
    *norm = internal::normalize_path(object);
    const htri_t there = H5Aexists(obj.get(), name.c_str());
    if (there < 0) error(*norm, "cannot look up attribute '" + name + "'");
    if (there == 0) error(*norm, "has no attribute '" + name + "'");
    Hid attr(H5Aopen(obj.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
    check_id(attr.get(), path, *norm, "cannot open attribute '" + name + "'");
    *owner = std::move(obj);
    return attr;
  }

  // Number of elements of an attribute of rank 0 or 1 (0 for a null dataspace).
  std::int64_t attribute_count(hid_t attr, const std::string& norm, const std::string& name) const {
    Hid space(H5Aget_space(attr), H5Sclose);
    check_id(space.get(), path, norm, "cannot read dataspace of attribute '" + name + "'");
    switch (H5Sget_simple_extent_type(space.get())) {
      case H5S_NULL: return 0;
      case H5S_SCALAR: return 1;
      case H5S_SIMPLE: break;
      default: error(norm, "attribute '" + name + "' has an unknown dataspace");
    }
    if (H5Sget_simple_extent_ndims(space.get()) != 1) error(norm, "attribute '" + name + "' is not of rank 0 or 1");
    hsize_t n = 0;
    if (H5Sget_simple_extent_dims(space.get(), &n, nullptr) < 0) error(norm, "cannot read attribute '" + name + "'");
    if (n > static_cast<hsize_t>(options.max_attribute_bytes))
      error(norm, "attribute '" + name + "' declares " + std::to_string(n) + " elements (absurd)");
    return static_cast<std::int64_t>(n);
  }

  void check_bools(DType dtype, const std::byte* bytes, std::size_t n, const std::string& norm) const {
    if (dtype == DType::kBool)
      for (std::size_t i = 0; i < n; ++i)
        if (bytes[i] != std::byte{0} && bytes[i] != std::byte{1})
          error(norm, "bool dataset holds a value other than 0 and 1");
  }

  // Reads an open, inspected dataset into `out` (info.elements * dtype_size bytes).
  void read_into(hid_t dataset, const std::string& norm, const DatasetInfo& info, std::byte* out) const {
    const std::size_t bytes = static_cast<std::size_t>(info.elements) * dtype_size(info.dtype);
    if (bytes == 0) return;
    if (!info.run_chunk.empty() && raw.fd >= 0) {
      internal::read_run_chunks(dataset, raw, info.shape, info.run_chunk, dtype_size(info.dtype), out, path, norm);
    } else {
      Hid memory_type = internal::memory_type_for(info.dtype);
      Hid dxpl(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
      if (!dxpl.valid() || H5Pset_edc_check(dxpl.get(), H5Z_ENABLE_EDC) < 0) fail(path, norm, "cannot set up the read");
      if (H5Dread(dataset, memory_type.get(), H5S_ALL, H5S_ALL, dxpl.get(), out) < 0)
        fail(path, norm, "cannot read dataset: checksum mismatch or damaged data");
    }
    check_bools(info.dtype, out, bytes, norm);
  }

  // `object` is the attribute's owner (its header holds a variable-length attribute's raw elements).
  std::vector<std::string> read_strings(hid_t attr, hid_t object, const std::string& norm, const std::string& name) const;
  std::vector<std::string> read_variable_strings(hid_t attr, hid_t type, hid_t object, const std::string& norm,
                                                 const std::string& name, std::int64_t n) const;
};

std::vector<std::string> H5Reader::Impl::read_strings(hid_t attr, hid_t object, const std::string& norm,
                                                     const std::string& name) const {
  const std::string what = "attribute '" + name + "'";
  Hid type(H5Aget_type(attr), H5Tclose);
  check_id(type.get(), path, norm, "cannot read type of " + what);
  const std::int64_t n = attribute_count(attr, norm, name);
  std::vector<std::string> out;
  const H5T_class_t type_class = H5Tget_class(type.get());
  // h5py writes an empty list (a weightless layer's weight_names) as an empty float64 array.
  if (n == 0 && (type_class == H5T_FLOAT || type_class == H5T_INTEGER)) return out;
  if (type_class != H5T_STRING)
    error(norm, what + " is " + internal::type_class_name(type.get()) + ", expected string");
  if (n == 0) return out;
  const htri_t variable = H5Tis_variable_str(type.get());
  if (variable < 0) error(norm, "cannot read type of " + what);
  if (variable > 0) return read_variable_strings(attr, type.get(), object, norm, name, n);
  const std::size_t width = H5Tget_size(type.get());
  const std::int64_t bytes = mul_or_neg(n, static_cast<std::int64_t>(width));
  if (width == 0 || bytes < 0 || bytes > options.max_attribute_bytes || bytes > file_size)
    error(norm, what + " declares " + std::to_string(n) + " strings of " + std::to_string(width) + " bytes (absurd)");
  std::vector<char> buffer(static_cast<std::size_t>(bytes));
  if (H5Aread(attr, type.get(), buffer.data()) < 0) error(norm, "cannot read " + what);
  const bool space_padded = H5Tget_strpad(type.get()) == H5T_STR_SPACEPAD;
  for (std::int64_t i = 0; i < n; ++i) {
    std::string s(buffer.data() + i * static_cast<std::int64_t>(width), width);
    if (space_padded) s.erase(s.find_last_not_of(' ') + 1);
    else s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
    out.push_back(std::move(s));
  }
  return out;
}

// Variable-length strings (what h5py writes for every str attribute): their bytes live in the
// global heap, whose reader in HDF5 1.10 trusts the file (see internal/vlen_check.h), so every
// element's heap object is checked against the file's bytes first; then HDF5 converts them and
// H5Treclaim (1.10: H5Dvlen_reclaim) frees its buffers.
std::vector<std::string> H5Reader::Impl::read_variable_strings(hid_t attr, hid_t type, hid_t object,
                                                               const std::string& norm,
                                                               const std::string& name, std::int64_t n) const {
  const std::string what = "attribute '" + name + "'";
  H5O_info_t info;
  check_status(H5Oget_info2(object, &info, H5O_INFO_BASIC), path, norm, "cannot inspect object");
  Hid fcpl(H5Fget_create_plist(file.get()), H5Pclose);
  std::size_t sizeof_addr = 0, sizeof_size = 0;
  hsize_t user_block = 0;
  if (!fcpl.valid() || H5Pget_sizes(fcpl.get(), &sizeof_addr, &sizeof_size) < 0 ||
      H5Pget_userblock(fcpl.get(), &user_block) < 0)
    error(norm, "cannot read the file's address sizes");
  std::int64_t checked = 0;
  try {
    checked = internal::check_vlen_string_attribute({.path = path,
                                                     .file_size = file_size,
                                                     .base_address = user_block,
                                                     .header_address = info.addr,
                                                     .sizeof_addr = static_cast<unsigned>(sizeof_addr),
                                                     .sizeof_size = static_cast<unsigned>(sizeof_size),
                                                     .attribute = name,
                                                     .max_total_bytes = options.max_attribute_bytes});
  } catch (const std::runtime_error& e) {
    error(norm, what + " (variable-length string) refused: " + e.what());
  }
  if (checked != n) error(norm, what + ": the object header holds " + std::to_string(checked) + " elements, HDF5 " +
                                    std::to_string(n));
  Hid memory_type(H5Tcopy(H5T_C_S1), H5Tclose);
  Hid space(H5Aget_space(attr), H5Sclose);
  if (!memory_type.valid() || H5Tset_size(memory_type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(memory_type.get(), H5Tget_cset(type)) < 0 || !space.valid())
    error(norm, "cannot set up the read of " + what);
  std::vector<char*> pointers(static_cast<std::size_t>(n), nullptr);
  if (H5Aread(attr, memory_type.get(), pointers.data()) < 0) error(norm, "cannot read variable-length " + what);
  std::vector<std::string> out;
  out.reserve(pointers.size());
  for (const char* p : pointers) out.emplace_back(p == nullptr ? "" : p);
#if H5_VERSION_GE(1, 12, 0)
  H5Treclaim(memory_type.get(), space.get(), H5P_DEFAULT, pointers.data());
#else
  H5Dvlen_reclaim(memory_type.get(), space.get(), H5P_DEFAULT, pointers.data());  // 1.10's name for H5Treclaim
#endif
  return out;
}

H5Reader::H5Reader(const std::string& path, H5ReaderOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& r = *impl_;
  r.path = path;
  r.options = options;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw std::runtime_error(path + ": does not exist");
  if (!fs::is_regular_file(status)) throw std::runtime_error(path + ": is not a regular file");
  r.file_size = static_cast<std::int64_t>(fs::file_size(path, ec));
  if (ec) throw std::runtime_error(path + ": cannot read file size: " + ec.message());

  auto lock = internal::lock_hdf5();
  Hid fapl = internal::make_file_access_props();
  r.lapl = Hid(H5Pcreate(H5P_LINK_ACCESS), H5Pclose);
  if (!fapl.valid() || !r.lapl.valid() || H5Pset_elink_cb(r.lapl.get(), refuse_external_link, nullptr) < 0)
    fail(path, "", "cannot set up HDF5 access properties");
  r.file = Hid(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!r.file.valid()) {  // say why (probing first would cost every good file a second open)
    const std::string detail = internal::take_hdf5_error();
    const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
    if (is_hdf5 == 0) throw std::runtime_error(path + ": not an HDF5 file");
    if (is_hdf5 < 0) fail(path, "", "not an HDF5 file or its superblock is damaged");
    throw std::runtime_error(path + ": cannot open HDF5 file (truncated or damaged?)" +
                             (detail.empty() ? "" : " (HDF5: " + detail + ")"));
  }
  // Chunk addresses are relative to the base address, which is 0 only without a user block.
  Hid fcpl(H5Fget_create_plist(r.file.get()), H5Pclose);
  hsize_t user_block = 0;
  void* handle = nullptr;
  if (fcpl.valid() && H5Pget_userblock(fcpl.get(), &user_block) >= 0 && user_block == 0 &&
      H5Fget_vfd_handle(r.file.get(), fapl.get(), &handle) >= 0 && handle != nullptr)
    r.raw = {*static_cast<int*>(handle), r.file_size};
  internal::take_hdf5_error();
}

H5Reader::~H5Reader() {
  if (!impl_) return;
  auto lock = internal::lock_hdf5();
  impl_->file.reset();
  impl_->lapl.reset();
}

H5Reader::H5Reader(H5Reader&&) noexcept = default;

H5Reader& H5Reader::operator=(H5Reader&& other) noexcept {
  if (this != &other) {
    H5Reader doomed(std::move(*this));
    impl_ = std::move(other.impl_);
  }
  return *this;
}

const std::string& H5Reader::path() const { return impl_->path; }

bool H5Reader::exists(const std::string& object_path) const {
  auto lock = internal::lock_hdf5();
  return !impl_->resolve(object_path).empty();
}

bool H5Reader::is_group(const std::string& object_path) const {
  auto lock = internal::lock_hdf5();
  return impl_->type_of(object_path) == H5O_TYPE_GROUP;
}

bool H5Reader::is_dataset(const std::string& object_path) const {
  auto lock = internal::lock_hdf5();
  return impl_->type_of(object_path) == H5O_TYPE_DATASET;
}

std::vector<std::string> H5Reader::list_group(const std::string& group_path) const {
  auto lock = internal::lock_hdf5();
  const Impl& r = *impl_;
  Hid group = r.open(group_path, H5O_TYPE_GROUP, "group");
  const std::string norm = internal::normalize_path(group_path);
  Hid gcpl(H5Gget_create_plist(group.get()), H5Pclose);
  check_id(gcpl.get(), r.path, norm, "cannot read group properties");
  unsigned order = 0;
  check_status(H5Pget_link_creation_order(gcpl.get(), &order), r.path, norm, "cannot read group properties");
  std::vector<std::string> names;
  if (order & H5P_CRT_ORDER_TRACKED) {
    hsize_t index = 0;
    if (H5Literate(group.get(), H5_INDEX_CRT_ORDER, H5_ITER_INC, &index, collect_name, &names) >= 0) return names;
    internal::take_hdf5_error();
    names.clear();
  }
  hsize_t index = 0;
  check_status(H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_INC, &index, collect_name, &names), r.path, norm,
               "cannot list group members");
  return names;
}

ArrayData H5Reader::read_dataset(const std::string& path) const {
  auto lock = internal::lock_hdf5();
  const Impl& r = *impl_;
  Hid dataset = r.open(path, H5O_TYPE_DATASET, "dataset");
  const std::string norm = internal::normalize_path(path);
  DatasetInfo info = r.inspect(dataset.get(), norm);
  ArrayData out{info.dtype, info.shape, {}};
  out.bytes.resize(static_cast<std::size_t>(info.elements) * dtype_size(info.dtype));
  r.read_into(dataset.get(), norm, info, out.bytes.data());
  return out;
}

struct H5Dataset::Impl {
  const H5Reader::Impl* reader = nullptr;
  Hid dataset;
  std::string norm;
  DatasetInfo info;

  // Inspects an open dataset (all size checks happen here) and wraps it.
  static H5Dataset make(const H5Reader::Impl& reader, Hid dataset, const std::string& path) {
    auto d = std::make_unique<Impl>();
    d->reader = &reader;
    d->dataset = std::move(dataset);
    d->norm = internal::normalize_path(path);
    d->info = reader.inspect(d->dataset.get(), d->norm);
    return H5Dataset(std::move(d));
  }
};

H5Dataset::H5Dataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

H5Dataset::~H5Dataset() {
  if (!impl_) return;
  auto lock = internal::lock_hdf5();
  impl_->dataset.reset();
}

H5Dataset::H5Dataset(H5Dataset&&) noexcept = default;

H5Dataset& H5Dataset::operator=(H5Dataset&& other) noexcept {
  if (this != &other) {
    H5Dataset doomed(std::move(*this));
    impl_ = std::move(other.impl_);
  }
  return *this;
}

DType H5Dataset::dtype() const { return impl_->info.dtype; }
const std::vector<std::int64_t>& H5Dataset::shape() const { return impl_->info.shape; }
std::size_t H5Dataset::nbytes() const {
  return static_cast<std::size_t>(impl_->info.elements) * dtype_size(impl_->info.dtype);
}

void H5Dataset::read_into(void* out, std::size_t bytes) const {
  const Impl& d = *impl_;
  const std::string where = d.reader->path + ": '" + d.norm + "': H5Dataset::read_into: ";
  if (bytes != nbytes())
    throw std::invalid_argument(where + "buffer of " + std::to_string(bytes) + " bytes for a dataset of " +
                                std::to_string(nbytes()));
  if (out == nullptr && bytes != 0) throw std::invalid_argument(where + "null buffer");
  auto lock = internal::lock_hdf5();
  d.reader->read_into(d.dataset.get(), d.norm, d.info, static_cast<std::byte*>(out));
}

H5Dataset H5Reader::open_dataset(const std::string& path) const {
  auto lock = internal::lock_hdf5();
  return H5Dataset::Impl::make(*impl_, impl_->open(path, H5O_TYPE_DATASET, "dataset"), path);
}

std::optional<H5Dataset> H5Reader::find_dataset(const std::string& path) const {
  auto lock = internal::lock_hdf5();
  const Impl& r = *impl_;
  const std::string norm = r.resolve(path);
  if (norm.empty()) return std::nullopt;
  Hid obj(H5Oopen(r.file.get(), norm.c_str(), r.lapl.get()), H5Oclose);
  check_id(obj.get(), r.path, norm, "cannot open object");
  H5O_info_t info;
  check_status(H5Oget_info2(obj.get(), &info, H5O_INFO_BASIC), r.path, norm, "cannot inspect object");
  if (info.type != H5O_TYPE_DATASET) return std::nullopt;
  return H5Dataset::Impl::make(r, std::move(obj), path);
}

std::vector<std::int64_t> H5Reader::dataset_shape(const std::string& path) const {
  auto lock = internal::lock_hdf5();
  Hid dataset = impl_->open(path, H5O_TYPE_DATASET, "dataset");
  return impl_->inspect(dataset.get(), internal::normalize_path(path)).shape;
}

DType H5Reader::dataset_dtype(const std::string& path) const {
  auto lock = internal::lock_hdf5();
  Hid dataset = impl_->open(path, H5O_TYPE_DATASET, "dataset");
  return impl_->inspect(dataset.get(), internal::normalize_path(path)).dtype;
}

bool H5Reader::has_attribute(const std::string& object_path, const std::string& name) const {
  auto lock = internal::lock_hdf5();
  Hid obj = impl_->open(object_path, H5O_TYPE_UNKNOWN, "object");
  const htri_t there = H5Aexists(obj.get(), name.c_str());
  if (there < 0) impl_->error(internal::normalize_path(object_path), "cannot look up attribute '" + name + "'");
  return there > 0;
}

std::vector<std::string> H5Reader::read_string_array_attribute(const std::string& object_path,
                                                               const std::string& name) const {
  auto lock = internal::lock_hdf5();
  std::string norm;
  Hid owner;
  Hid attr = impl_->open_attribute(object_path, name, &norm, &owner);
  return impl_->read_strings(attr.get(), owner.get(), norm, name);
}

std::string H5Reader::read_string_attribute(const std::string& object_path, const std::string& name) const {
  auto lock = internal::lock_hdf5();
  std::string norm;
  Hid owner;
  Hid attr = impl_->open_attribute(object_path, name, &norm, &owner);
  std::vector<std::string> strings = impl_->read_strings(attr.get(), owner.get(), norm, name);
  if (strings.size() != 1)
    impl_->error(norm, "attribute '" + name + "' holds " + std::to_string(strings.size()) + " strings, expected one");
  return strings[0];
}

std::int64_t H5Reader::read_int_attribute(const std::string& object_path, const std::string& name) const {
  auto lock = internal::lock_hdf5();
  const Impl& r = *impl_;
  std::string norm;
  Hid owner;
  Hid attr = r.open_attribute(object_path, name, &norm, &owner);
  Hid type(H5Aget_type(attr.get()), H5Tclose);
  check_id(type.get(), r.path, norm, "cannot read type of attribute '" + name + "'");
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    r.error(norm, "attribute '" + name + "' is " + internal::type_class_name(type.get()) + ", expected integer");
  if (r.attribute_count(attr.get(), norm, name) != 1) r.error(norm, "attribute '" + name + "' is not a single integer");
  if (H5Tget_sign(type.get()) == H5T_SGN_NONE && H5Tget_size(type.get()) >= 8) {
    std::uint64_t value = 0;
    check_status(H5Aread(attr.get(), H5T_NATIVE_UINT64, &value), r.path, norm, "cannot read attribute '" + name + "'");
    if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      r.error(norm, "attribute '" + name + "' value " + std::to_string(value) + " does not fit in int64");
    return static_cast<std::int64_t>(value);
  }
  std::int64_t value = 0;
  check_status(H5Aread(attr.get(), H5T_NATIVE_INT64, &value), r.path, norm, "cannot read attribute '" + name + "'");
  return value;
}

}  // namespace tapeflow::io
