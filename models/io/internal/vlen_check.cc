// The raw-byte checks behind H5Reader's variable-length strings (see vlen_check.h). Layouts from the
// HDF5 File Format Specification 3.0: IV.A.1 (object headers v1, v2), IV.A.2.d (dataspace),
// IV.A.2.m (attribute), IV.A.2.q (continuation), III.E (global heap).
#include "models/io/internal/vlen_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

namespace tapeflow::io::internal {
namespace {

[[noreturn]] void bad(const std::string& what) { throw std::runtime_error(what); }

constexpr std::uint64_t kMaxHeaderChunk = std::uint64_t{1} << 24;  // 16 MiB per header chunk
constexpr int kMaxChunks = 64;                                      // continuation chunks followed

class File {
 public:
  File(const std::string& path, std::int64_t size, std::uint64_t base) : size_(size), base_(base) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) bad("cannot open the file to check the global heap");
  }
  ~File() { ::close(fd_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // The bytes [addr, addr + n) (relative to the base address); errors if any lie outside the file.
  std::vector<unsigned char> read(std::uint64_t addr, std::uint64_t n, const char* what) const {
    const std::uint64_t size = static_cast<std::uint64_t>(size_);
    if (addr > size || base_ > size - addr || n > size - addr - base_)
      bad(std::string(what) + " at address " + std::to_string(addr) + " (" + std::to_string(n) +
          " bytes) lies outside the file of " + std::to_string(size_) + " bytes");
    std::vector<unsigned char> out(static_cast<std::size_t>(n));
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t got = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(base_ + addr + done));
      if (got <= 0) bad(std::string("short read of ") + what);
      done += static_cast<std::size_t>(got);
    }
    return out;
  }

 private:
  int fd_ = -1;
  std::int64_t size_;
  std::uint64_t base_;
};

// Little-endian unsigned of `n` bytes at b[at], bounds-checked against the span's size.
std::uint64_t le(const std::vector<unsigned char>& b, std::size_t at, unsigned n, const char* what) {
  if (at > b.size() || n > b.size() - at) bad(std::string(what) + " is truncated");
  std::uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(b[at + i]) << (8 * i);
  return v;
}

std::uint64_t align8(std::uint64_t x) { return (x + 7) / 8 * 8; }

struct Message {
  unsigned type;
  std::vector<unsigned char> data;
  unsigned flags;
};

// Every message of the object header at `addr`, following continuation chunks.
std::vector<Message> header_messages(const File& file, std::uint64_t addr, const VlenCheckInput& in) {
  std::vector<Message> out;
  struct Chunk {
    std::uint64_t addr, length;
    bool first;
  };
  std::vector<Chunk> todo;
  const std::vector<unsigned char> start = file.read(addr, 16, "object header");
  const bool v2 = std::memcmp(start.data(), "OHDR", 4) == 0;
  unsigned v2_flags = 0;
  std::uint64_t messages_at = 0, messages_len = 0;
  if (v2) {
    const std::vector<unsigned char> h = file.read(addr, 32, "object header");
    if (h[4] != 2) bad("object header version " + std::to_string(h[4]) + " is unknown");
    v2_flags = h[5];
    std::size_t at = 6;
    if (v2_flags & 0x20) at += 16;
    if (v2_flags & 0x10) at += 4;
    const unsigned width = 1u << (v2_flags & 3);
    messages_len = le(h, at, width, "object header");
    messages_at = addr + at + width;
  } else {
    if (start[0] != 1) bad("object header version " + std::to_string(start[0]) + " is unknown");
    messages_len = le(start, 8, 4, "object header");
    messages_at = addr + 16;
  }
  todo.push_back({messages_at, messages_len, true});
  for (int chunks = 0; !todo.empty(); ++chunks) {
    if (chunks >= kMaxChunks) bad("object header has more than " + std::to_string(kMaxChunks) + " chunks");
    const Chunk c = todo.back();
    todo.pop_back();
    if (c.length > kMaxHeaderChunk) bad("object header chunk of " + std::to_string(c.length) + " bytes (absurd)");
    std::vector<unsigned char> b = file.read(c.addr, c.length, "object header chunk");
    std::size_t at = 0, end = b.size();
    if (v2 && !c.first) {
      if (b.size() < 8 || std::memcmp(b.data(), "OCHK", 4) != 0) bad("object header continuation lacks its signature");
      at = 4;
      end -= 4;  // checksum
    }
    const std::size_t head = v2 ? ((v2_flags & 0x04) ? 6 : 4) : 8;
    while (end - at >= head) {
      const unsigned type = static_cast<unsigned>(v2 ? b[at] : le(b, at, 2, "message"));
      const std::uint64_t size = le(b, at + (v2 ? 1 : 2), 2, "message");
      const unsigned flags = b[at + (v2 ? 3 : 4)];
      at += head;
      if (size > end - at) bad("object header message runs past its chunk");
      Message m{type, std::vector<unsigned char>(b.begin() + static_cast<std::ptrdiff_t>(at),
                                                 b.begin() + static_cast<std::ptrdiff_t>(at + size)), flags};
      at += size;
      if (type == 0x10) {  // continuation: offset, length
        todo.push_back({le(m.data, 0, in.sizeof_addr, "continuation"),
                        le(m.data, in.sizeof_addr, in.sizeof_size, "continuation"), false});
      } else if (type == 0x0C) {
        out.push_back(std::move(m));
      }
    }
  }
  return out;
}

struct RawAttribute {
  std::int64_t elements = 0;
  std::vector<unsigned char> data;
};

// The attribute message named `name`, with its element count and raw data.
RawAttribute find_attribute(const std::vector<Message>& messages, const VlenCheckInput& in) {
  for (const Message& m : messages) {
    const auto& d = m.data;
    const unsigned version = static_cast<unsigned>(le(d, 0, 1, "attribute message"));
    if (version < 1 || version > 3) continue;
    const std::uint64_t name_size = le(d, 2, 2, "attribute message");
    const std::uint64_t type_size = le(d, 4, 2, "attribute message");
    const std::uint64_t space_size = le(d, 6, 2, "attribute message");
    std::size_t at = version == 3 ? 9 : 8;
    auto padded = [&](std::uint64_t n) { return version == 1 ? align8(n) : n; };
    if (name_size == 0 || at + name_size > d.size()) continue;
    const std::string name(reinterpret_cast<const char*>(d.data() + at), static_cast<std::size_t>(name_size - 1));
    if (name != in.attribute) continue;
    if ((m.flags & 0x02) || (version >= 2 && (d[1] & 0x03)))
      bad("attribute '" + in.attribute + "' has a shared datatype or dataspace (refused)");
    at += padded(name_size);
    if (at + type_size > d.size() || type_size < 8) bad("attribute '" + in.attribute + "' datatype is truncated");
    if ((d[at] & 0x0F) != 9) bad("attribute '" + in.attribute + "' is not variable-length in the file");
    at += padded(type_size);
    if (at + space_size > d.size() || space_size < 4) bad("attribute '" + in.attribute + "' dataspace is truncated");
    const unsigned space_version = d[at], rank = d[at + 1], space_flags = d[at + 2];
    const unsigned space_type = space_version == 2 ? d[at + 3] : (rank == 0 ? 0u : 1u);
    std::size_t dims_at = at + (space_version == 1 ? 8 : 4);
    RawAttribute out;
    out.elements = space_type == 2 ? 0 : 1;
    for (unsigned i = 0; i < rank && space_type == 1; ++i) {
      const std::uint64_t dim = le(d, dims_at + i * in.sizeof_size, in.sizeof_size, "attribute dataspace");
      if (dim > (std::uint64_t{1} << 32) || static_cast<std::uint64_t>(out.elements) * dim > (std::uint64_t{1} << 32))
        bad("attribute '" + in.attribute + "' declares too many elements");
      out.elements *= static_cast<std::int64_t>(dim);
    }
    (void)space_flags;
    at += padded(space_size);
    const std::uint64_t element = 4 + in.sizeof_addr + 4;
    const std::uint64_t bytes = element * static_cast<std::uint64_t>(out.elements);
    if (at > d.size() || bytes > d.size() - at)
      bad("attribute '" + in.attribute + "' holds " + std::to_string(d.size() - std::min(at, d.size())) +
          " bytes of data for " + std::to_string(out.elements) + " elements");
    out.data.assign(d.begin() + static_cast<std::ptrdiff_t>(at), d.begin() + static_cast<std::ptrdiff_t>(at + bytes));
    return out;
  }
  bad("attribute '" + in.attribute + "' is not in the object header (dense attribute storage is refused for "
      "variable-length strings)");
}

// A global heap collection's objects: index -> size, after walking it as HDF5 does, in bounds.
std::map<std::uint64_t, std::uint64_t> heap_objects(const File& file, std::uint64_t addr, const VlenCheckInput& in) {
  const std::uint64_t header = 8 + in.sizeof_size;
  const std::vector<unsigned char> h = file.read(addr, header, "global heap collection");
  if (std::memcmp(h.data(), "GCOL", 4) != 0 || h[4] != 1) bad("global heap collection at " + std::to_string(addr) + " is not one");
  const std::uint64_t size = le(h, 8, in.sizeof_size, "global heap collection");
  if (size < header || size > kMaxHeaderChunk * 64)
    bad("global heap collection at " + std::to_string(addr) + " declares an absurd size " + std::to_string(size));
  const std::vector<unsigned char> b = file.read(addr, size, "global heap collection");
  const std::uint64_t object_header = 8 + in.sizeof_size;
  std::map<std::uint64_t, std::uint64_t> objects;
  std::uint64_t p = header;
  while (p < size) {
    if (size - p < object_header) break;  // too small for an object: free space (HDF5 does the same)
    const std::uint64_t index = le(b, static_cast<std::size_t>(p), 2, "heap object");
    const std::uint64_t object_size = le(b, static_cast<std::size_t>(p + 8), in.sizeof_size, "heap object");
    if (object_size > size) bad("global heap object " + std::to_string(index) + " declares size " + std::to_string(object_size));
    const std::uint64_t need = index > 0 ? object_header + align8(object_size) : object_size;
    if (need < object_header || need > size - p)
      bad("global heap object " + std::to_string(index) + " at " + std::to_string(addr + p) + " (size " +
          std::to_string(object_size) + ") does not fit its collection of " + std::to_string(size) + " bytes");
    if (index > 0 && !objects.emplace(index, object_size).second)
      bad("global heap collection holds object " + std::to_string(index) + " twice");
    p += need;
  }
  return objects;
}

}  // namespace

std::int64_t check_vlen_string_attribute(const VlenCheckInput& in) {
  if ((in.sizeof_addr != 4 && in.sizeof_addr != 8) || (in.sizeof_size != 4 && in.sizeof_size != 8))
    bad("unsupported address or length size");
  const File file(in.path, in.file_size, in.base_address);
  const RawAttribute attr = find_attribute(header_messages(file, in.header_address, in), in);
  std::map<std::uint64_t, std::map<std::uint64_t, std::uint64_t>> collections;
  const std::size_t element = 4 + in.sizeof_addr + 4;
  std::uint64_t total = 0;
  for (std::int64_t i = 0; i < attr.elements; ++i) {
    const std::size_t at = static_cast<std::size_t>(i) * element;
    const std::uint64_t length = le(attr.data, at, 4, "string element");
    const std::uint64_t addr = le(attr.data, at + 4, in.sizeof_addr, "string element");
    const std::uint64_t index = le(attr.data, at + 4 + in.sizeof_addr, 4, "string element");
    if (addr == 0) {  // a null string: HDF5 reads nothing
      if (length != 0) bad("string " + std::to_string(i) + " of " + std::to_string(length) + " bytes has no heap object");
      continue;
    }
    auto it = collections.find(addr);
    if (it == collections.end()) it = collections.emplace(addr, heap_objects(file, addr, in)).first;
    const auto obj = it->second.find(index);
    if (obj == it->second.end())
      bad("string " + std::to_string(i) + " names global heap object " + std::to_string(index) + " that its collection lacks");
    if (obj->second != length)
      bad("string " + std::to_string(i) + " is " + std::to_string(length) + " bytes but its heap object holds " +
          std::to_string(obj->second));
    total += length;
    if (total > static_cast<std::uint64_t>(in.max_total_bytes))
      bad("strings exceed the limit of " + std::to_string(in.max_total_bytes) + " bytes");
  }
  return attr.elements;
}

}  // namespace tapeflow::io::internal
