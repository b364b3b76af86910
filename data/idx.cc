#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <type_traits>

namespace tapeflow::data {

std::size_t idx_type_size(IdxType type) {
  switch (type) {
    case IdxType::kUInt8:
    case IdxType::kInt8: return 1;
    case IdxType::kInt16: return 2;
    case IdxType::kInt32:
    case IdxType::kFloat32: return 4;
    case IdxType::kFloat64: return 8;
  }
  return 0;
}

const char* idx_type_name(IdxType type) {
  switch (type) {
    case IdxType::kUInt8: return "uint8";
    case IdxType::kInt8: return "int8";
    case IdxType::kInt16: return "int16";
    case IdxType::kInt32: return "int32";
    case IdxType::kFloat32: return "float32";
    case IdxType::kFloat64: return "float64";
  }
  return "unknown";
}

std::string describe(const IdxArray& a) {
  std::string s = std::string(idx_type_name(a.type)) + " [";
  for (std::size_t i = 0; i < a.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(a.dims[i]);
  return s + "]";
}

namespace {

struct GzClose {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzClose>;

// Reads one IDX file; each error names the file.
class IdxReader {
 public:
  explicit IdxReader(const std::string& path) : path_(path) {
    errno = 0;
    file_.reset(gzopen(path.c_str(), "rb"));  // zlib reads plain files as is, gzip if 1f 8b leads
    if (!file_) fail(std::string("cannot open: ") + (errno ? std::strerror(errno) : "out of memory"));
    gzbuffer(file_.get(), 1 << 20);
  }

  IdxArray read() {
    IdxArray a;
    std::uint8_t magic[4];
    read_exact(magic, 4, "header");
    if (magic[0] != 0 || magic[1] != 0)
      fail("bad magic number " + hex(magic, 4) + ": the first two bytes must be zero");
    a.type = static_cast<IdxType>(magic[2]);
    if (idx_type_size(a.type) == 0) fail("unknown type code " + hex(&magic[2], 1));
    const int ndims = magic[3];
    if (ndims == 0 || ndims > 4)
      fail("unsupported number of dimensions " + std::to_string(ndims) + " (expected 1 to 4)");

    std::uint8_t raw[16];
    read_exact(raw, 4 * ndims, "header");
    for (int i = 0; i < ndims; ++i) {
      const std::uint8_t* p = raw + 4 * i;
      a.dims.push_back(std::int64_t{p[0]} << 24 | p[1] << 16 | p[2] << 8 | p[3]);
    }
    const std::int64_t expected = payload_bytes(a);
    a.bytes = read_payload(expected);
    if (static_cast<std::int64_t>(a.bytes.size()) < expected)
      fail("truncated payload: " + describe(a) + " needs " + std::to_string(expected) +
           " bytes, got " + std::to_string(a.bytes.size()));
    check_no_trailing(a.num_elements() == 0 ? describe(a) : "");
    to_host_order(a);
    return a;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("read_idx: " + path_ + ": " + what);
  }

  static std::string hex(const std::uint8_t* p, int n) {
    static const char* digits = "0123456789abcdef";
    std::string s = "0x";
    for (int i = 0; i < n; ++i) s += {digits[p[i] >> 4], digits[p[i] & 15]};
    return s;
  }

  // Reads up to n bytes and returns how many arrived; a gzip error throws with zlib's message.
  std::size_t read_some(std::uint8_t* dst, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      const auto chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
      const int r = gzread(file_.get(), dst + got, chunk);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    int err = Z_OK;
    const char* msg = gzerror(file_.get(), &err);
    if (err == Z_ERRNO) fail(std::string("read error: ") + std::strerror(errno));
    if (err != Z_OK) {  // zlib prefixes its message with the path: drop it, ours has it already
      std::string text = msg;
      if (text.rfind(path_ + ": ", 0) == 0) text.erase(0, path_.size() + 2);
      fail("corrupt gzip stream: " + text);
    }
    return got;
  }

  void read_exact(std::uint8_t* dst, std::size_t n, const char* what) {
    const std::size_t got = read_some(dst, n);
    if (got < n)
      fail(std::string("truncated ") + what + ": expected " + std::to_string(n) + " bytes, got " +
           std::to_string(got));
  }

  // Payload size in bytes, checked against overflow and kMaxIdxPayloadBytes before any allocation.
  std::int64_t payload_bytes(const IdxArray& a) const {
    if (std::find(a.dims.begin(), a.dims.end(), 0) != a.dims.end()) return 0;
    std::int64_t n = static_cast<std::int64_t>(idx_type_size(a.type));
    for (std::int64_t d : a.dims) {
      if (n > kMaxIdxPayloadBytes / d)
        fail(describe(a) + " exceeds the limit of " +
             std::to_string(kMaxIdxPayloadBytes) + " bytes");
      n *= d;
    }
    return n;
  }

  // Reads up to `expected` bytes, growing the buffer as data arrives (a lying header costs nothing).
  std::vector<std::uint8_t> read_payload(std::int64_t expected) {
    std::vector<std::uint8_t> bytes;
    std::size_t got = 0;
    const auto total = static_cast<std::size_t>(expected);
    while (got < total) {
      const std::size_t step = std::min(total - got, std::max<std::size_t>(got, 1 << 20));
      bytes.resize(got + step);
      const std::size_t r = read_some(bytes.data() + got, step);
      got += r;
      if (r < step) break;
    }
    bytes.resize(got);
    return bytes;
  }

  // `empty` describes the array when its dims hold a zero, for a clearer message.
  void check_no_trailing(const std::string& empty) {
    std::uint8_t scratch[1 << 16];
    std::size_t extra = 0;
    for (std::size_t r; (r = read_some(scratch, sizeof scratch)) > 0;) extra += r;
    if (extra == 0) return;
    if (!empty.empty())
      fail(empty + " has a zero dimension but " + std::to_string(extra) + " bytes of data follow");
    fail(std::to_string(extra) + " trailing bytes after the payload");
  }

  static void to_host_order(IdxArray& a) {
    const std::size_t size = idx_type_size(a.type);
    if constexpr (std::endian::native == std::endian::little) {
      if (size == 1) return;
      for (std::size_t i = 0; i + size <= a.bytes.size(); i += size)
        std::reverse(a.bytes.begin() + i, a.bytes.begin() + i + size);
    }
  }

  std::string path_;
  GzFile file_;
};

}  // namespace

IdxArray read_idx(const std::string& path) { return IdxReader(path).read(); }

}  // namespace tapeflow::data
