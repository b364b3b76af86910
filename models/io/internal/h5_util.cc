#include "models/io/internal/h5_util.h"

#include <H5PLpublic.h>

#include <stdexcept>

namespace tapeflow::io::internal {
namespace {

herr_t innermost_error(unsigned n, const H5E_error2_t* err, void* data) {
  if (n == 0 && err != nullptr && err->desc != nullptr) *static_cast<std::string*>(data) = err->desc;
  return 0;
}

}  // namespace

std::unique_lock<std::mutex> lock_hdf5() {
  static std::mutex mutex;
  static std::once_flag once;
  std::unique_lock<std::mutex> lock(mutex);
  std::call_once(once, [] {
    // No library shutdown at exit: HDF5 1.10.8's crashes (SIGSEGV in H5F__close_cb) on a file whose
    // H5Fclose failed, e.g. on a full disk, and turns an error the caller handled into exit status
    // 139. Every file we open is closed by RAII, so the shutdown has nothing to save. Effective only
    // when this is the process's first HDF5 call (as in the apps); later it is a harmless no-op.
    H5dont_atexit();
    H5open();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    // A hostile file could name a filter id that makes HDF5 dlopen a plugin: never load any.
    H5PLset_loading_state(0);
  });
  return lock;
}

Hid make_file_access_props() {
  Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.valid() || H5Pset_fapl_sec2(fapl.get()) < 0 || H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) < 0)
    return Hid();
#if H5_VERSION_GE(1, 10, 7)
  if (H5Pset_file_locking(fapl.get(), false, true) < 0) return Hid();
#endif
  return fapl;
}

std::string take_hdf5_error() {
  std::string message;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_error, &message);
  H5Eclear2(H5E_DEFAULT);
  return message;
}

void fail(const std::string& file, const std::string& object, const std::string& problem) {
  std::string message = file + ": ";
  if (!object.empty()) message += "'" + object + "': ";
  message += problem;
  const std::string detail = take_hdf5_error();
  if (!detail.empty()) message += " (HDF5: " + detail + ")";
  throw std::runtime_error(message);
}

hid_t check_id(hid_t id, const std::string& file, const std::string& object, const std::string& problem) {
  if (id < 0) fail(file, object, problem);
  return id;
}

void check_status(herr_t status, const std::string& file, const std::string& object, const std::string& problem) {
  if (status < 0) fail(file, object, problem);
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::string normalize_path(const std::string& path) {
  std::string out;
  for (const std::string& part : split_path(path)) out += "/" + part;
  return out.empty() ? "/" : out;
}

namespace {

Hid make_bool_enum(hid_t base) {
  Hid type(H5Tenum_create(base), H5Tclose);
  if (!type.valid()) throw std::runtime_error("hdf5: cannot create the bool enum type");
  const std::int8_t no = 0, yes = 1;
  H5Tenum_insert(type.get(), "FALSE", &no);
  H5Tenum_insert(type.get(), "TRUE", &yes);
  return type;
}

Hid copy_type(hid_t predefined) { return Hid(H5Tcopy(predefined), H5Tclose); }

// True if `type` is h5py's bool: enum {FALSE = 0, TRUE = 1} over a one-byte integer.
bool is_bool_enum(hid_t type) {
  if (H5Tget_size(type) != 1 || H5Tget_nmembers(type) != 2) return false;
  for (unsigned i = 0; i < 2; ++i) {
    char* name = H5Tget_member_name(type, i);
    if (name == nullptr) return false;
    const std::string member(name);
    H5free_memory(name);
    std::int8_t value = -1;
    if (H5Tget_member_value(type, i, &value) < 0) return false;
    if (!((member == "FALSE" && value == 0) || (member == "TRUE" && value == 1))) return false;
  }
  return true;
}

}  // namespace

Hid file_type_for(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return copy_type(H5T_IEEE_F32LE);
    case DType::kFloat64: return copy_type(H5T_IEEE_F64LE);
    case DType::kInt32: return copy_type(H5T_STD_I32LE);
    case DType::kInt64: return copy_type(H5T_STD_I64LE);
    case DType::kBool: return make_bool_enum(H5T_STD_I8LE);
  }
  throw std::invalid_argument("hdf5: unknown dtype");
}

Hid memory_type_for(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return copy_type(H5T_NATIVE_FLOAT);
    case DType::kFloat64: return copy_type(H5T_NATIVE_DOUBLE);
    case DType::kInt32: return copy_type(H5T_NATIVE_INT32);
    case DType::kInt64: return copy_type(H5T_NATIVE_INT64);
    case DType::kBool: return make_bool_enum(H5T_NATIVE_INT8);
  }
  throw std::invalid_argument("hdf5: unknown dtype");
}

std::optional<DType> dtype_from_file_type(hid_t type) {
  const std::size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      if (size == 4) return DType::kFloat32;
      if (size == 8) return DType::kFloat64;
      return std::nullopt;
    case H5T_INTEGER:
      if (H5Tget_sign(type) != H5T_SGN_2) return std::nullopt;
      if (size == 4) return DType::kInt32;
      if (size == 8) return DType::kInt64;
      return std::nullopt;
    case H5T_ENUM:
      if (is_bool_enum(type)) return DType::kBool;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::string type_class_name(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: return H5Tget_sign(type) == H5T_SGN_2 ? "signed integer" : "unsigned integer";
    case H5T_FLOAT: return "float";
    case H5T_STRING: return "string";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_COMPOUND: return "compound";
    case H5T_REFERENCE: return "reference";
    case H5T_ENUM: return "enum";
    case H5T_VLEN: return "variable-length sequence";
    case H5T_ARRAY: return "array";
    default: return "unknown type class";
  }
}

}  // namespace tapeflow::io::internal
