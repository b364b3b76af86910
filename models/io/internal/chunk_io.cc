#include "models/io/internal/chunk_io.h"

#include <sys/uio.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "models/io/internal/fs_util.h"
#include "models/io/internal/h5_util.h"

namespace tapeflow::io::internal {
namespace {

// Calls f(chunk_offset, first_element, valid_elements) for every chunk of a run chunking, where
// chunk k covers elements [first_element, first_element + valid_elements) of the flat array.
template <typename F>
void for_each_run_chunk(const std::vector<std::int64_t>& shape, const std::vector<hsize_t>& chunk, F&& f) {
  const std::size_t rank = shape.size();
  std::size_t k = rank - 1;  // the split dimension: chunks are 1 before it and full after it
  while (k > 0 && static_cast<std::int64_t>(chunk[k]) == shape[k]) --k;
  std::int64_t trailing = 1, lead = 1;
  for (std::size_t i = k + 1; i < rank; ++i) trailing *= shape[i];
  for (std::size_t i = 0; i < k; ++i) lead *= shape[i];
  const std::int64_t step = static_cast<std::int64_t>(chunk[k]);
  std::vector<hsize_t> offset(rank, 0);
  for (std::int64_t l = 0; l < lead; ++l) {
    std::int64_t rest = l;  // unravel l over dims 0..k-1
    for (std::size_t i = k; i-- > 0;) {
      offset[i] = static_cast<hsize_t>(rest % shape[i]);
      rest /= shape[i];
    }
    for (std::int64_t j = 0; j < shape[k]; j += step) {
      offset[k] = static_cast<hsize_t>(j);
      f(offset, (l * shape[k] + j) * trailing, std::min(step, shape[k] - j) * trailing);
    }
  }
}

std::string describe(const std::vector<hsize_t>& offset) {
  std::string s = "chunk at [";
  for (std::size_t i = 0; i < offset.size(); ++i) s += (i ? ", " : "") + std::to_string(offset[i]);
  return s + "]";
}

}  // namespace

// HDF5 adds 16-bit big-endian words w_j: sum1 += w_j, sum2 += sum1, folding both
// (x -> (x & 0xffff) + (x >> 16)) every 360 words and twice at the end. 360 words keep its uint32
// sums from wrapping, and a fold keeps a sum congruent mod 65535 and nonzero once nonzero, so its
// result is a function of S1 = Σ w_j mod 65535, S2 = Σ (N - j) w_j mod 65535 (N words) and of
// whether any byte is nonzero: each half is 0 for all-zero data, else its residue with 0 written
// as 65535. So we may fold whenever we like and leave the vector lanes only at the end.
// On little-endian hosts a 16-bit half holds u = the byte-swapped word, and w = 256 u mod 65535
// (65536 = 1 mod 65535): no swapping, the sums are scaled by 256 at the end.
std::uint32_t fletcher32(const unsigned char* data, std::size_t len) {
  constexpr std::size_t kFoldSteps = 256;  // after a fold, p and q stay below 2^32 for 256 steps
  constexpr bool kLittleEndian = std::endian::native == std::endian::little;
  typedef std::uint32_t U32x8 __attribute__((vector_size(32)));  // AVX2 with -march=native, else SSE2
  // A step adds 32 bytes: lane l holds words 2l and 2l + 1 in its two 16-bit halves (host order).
  // p: running sums of the halves; q: sums of the running sums.
  U32x8 plo = {}, phi = {}, qlo = {}, qhi = {};
  auto step = [&](const unsigned char* bytes) {
    U32x8 x;
    std::memcpy(&x, bytes, 32);
    plo += x & 0xffff;
    phi += x >> 16;
    qlo += plo;
    qhi += phi;
  };
  auto fold = [](U32x8& v) { v = (v & 0xffff) + (v >> 16); };
  const std::size_t steps = len / 32;
  for (std::size_t i = 0; i < steps;) {
    for (const std::size_t end = std::min(steps, i + kFoldSteps); i < end; ++i) step(data + 32 * i);
    fold(plo);
    fold(phi);
    fold(qlo);
    fold(qhi);
  }
  if (len % 32 != 0) {  // the last words zero-padded; an odd last byte is a word's high byte
    unsigned char tail[32] = {};
    std::memcpy(tail, data + 32 * steps, len % 32);
    step(tail);
  }
  // Word j = 16 s + k sits in step s at slot k: over M = 16 * (steps taken) slots (zeros past the
  // N real words), Σ (M - j) w_j = 16 Σ q - Σ k p_k, and S2 = that - (M - N) S1.
  constexpr std::uint64_t kMod = 65535;
  std::uint64_t s1 = 0, s2 = 0;
  bool nonzero = false;  // a p lane is 0 exactly when all its words were 0 (folds keep nonzero)
  for (std::uint64_t l = 0; l < 8; ++l) {
    const std::uint64_t k_lo = kLittleEndian ? 2 * l : 2 * l + 1, k_hi = kLittleEndian ? 2 * l + 1 : 2 * l;
    s1 += std::uint64_t{plo[l]} + phi[l];
    s2 += 16 * (std::uint64_t{qlo[l]} + qhi[l]) + 32 * kMod - k_lo * (plo[l] % kMod) - k_hi * (phi[l] % kMod);
    nonzero |= (plo[l] | phi[l]) != 0;
  }
  if (!nonzero) return 0;
  const std::uint64_t scale = kLittleEndian ? 256 : 1;
  s1 = s1 % kMod * scale % kMod;
  s2 = s2 % kMod * scale % kMod;
  const std::uint64_t words = (len + 1) / 2, slots = 16 * ((len + 31) / 32);
  s2 = (s2 + (slots - words) * (kMod - s1)) % kMod;
  if (s1 == 0) s1 = kMod;
  if (s2 == 0) s2 = kMod;
  return static_cast<std::uint32_t>(s2 << 16 | s1);
}

bool is_run_chunking(const std::vector<std::int64_t>& shape, const std::vector<hsize_t>& chunk) {
  if (shape.empty() || chunk.size() != shape.size()) return false;
  std::size_t k = shape.size() - 1;
  while (k > 0 && static_cast<std::int64_t>(chunk[k]) == shape[k]) --k;
  if (chunk[k] < 1 || static_cast<std::int64_t>(chunk[k]) > shape[k]) return false;
  for (std::size_t i = 0; i < k; ++i)
    if (chunk[i] != 1) return false;
  for (std::int64_t d : shape)
    if (d <= 0) return false;
  return true;
}

void write_run_chunks(hid_t dataset, const std::vector<std::int64_t>& shape, const std::vector<hsize_t>& chunk,
                      std::size_t element_size, const std::byte* data, const std::string& file,
                      const std::string& object) {
  std::size_t chunk_bytes = element_size;
  for (hsize_t c : chunk) chunk_bytes *= c;
  std::vector<unsigned char> buffer(chunk_bytes + 4, 0);
  for_each_run_chunk(shape, chunk, [&](const std::vector<hsize_t>& offset, std::int64_t first, std::int64_t count) {
    const std::size_t valid = static_cast<std::size_t>(count) * element_size;
    std::memcpy(buffer.data(), data + static_cast<std::size_t>(first) * element_size, valid);
    std::fill(buffer.begin() + static_cast<std::ptrdiff_t>(valid), buffer.end() - 4, 0);  // edge chunk padding
    const std::uint32_t sum = fletcher32(buffer.data(), chunk_bytes);
    for (int i = 0; i < 4; ++i) buffer[chunk_bytes + i] = static_cast<unsigned char>(sum >> (8 * i));  // little-endian
    check_status(H5Dwrite_chunk(dataset, H5P_DEFAULT, 0, offset.data(), buffer.size(), buffer.data()), file, object,
                 "cannot write " + describe(offset));
  });
}

namespace {

// Reads one chunk of `chunk_bytes` at `address` into `target`, its 4 checksum bytes aside (one
// preadv; short counts from signals resume where they stopped), and verifies it.
void read_chunk(int fd, haddr_t address, unsigned char* target, std::size_t chunk_bytes,
                const std::vector<hsize_t>& offset, const std::string& file, const std::string& object) {
  unsigned char stored_sum_bytes[4];
  for (std::size_t done = 0; done < chunk_bytes + 4;) {
    iovec parts[2];
    int n = 0;
    if (done < chunk_bytes) parts[n++] = {target + done, chunk_bytes - done};
    const std::size_t sum_done = done > chunk_bytes ? done - chunk_bytes : 0;
    parts[n++] = {stored_sum_bytes + sum_done, 4 - sum_done};
    const ssize_t got = ::preadv(fd, parts, n, static_cast<off_t>(address + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      fail(file, object, "cannot read " + describe(offset) + ": " + (got < 0 ? errno_text() : "unexpected end of file"));
    done += static_cast<std::size_t>(got);
  }
  std::uint32_t stored_sum = 0;
  for (int i = 0; i < 4; ++i) stored_sum |= std::uint32_t{stored_sum_bytes[i]} << (8 * i);
  const std::uint32_t sum = fletcher32(target, chunk_bytes);
  // HDF5 also accepts the byte-swapped sum written by its releases before 1.6.3.
  const std::uint32_t swapped = ((sum & 0xff) << 8) | ((sum >> 8) & 0xff) | ((sum & 0xff0000) << 8) | ((sum >> 8) & 0xff0000);
  if (stored_sum != sum && stored_sum != swapped)
    fail(file, object, "Fletcher-32 checksum mismatch in " + describe(offset) + " (the data is damaged)");
}

}  // namespace

void read_run_chunks(hid_t dataset, const RawFile& raw, const std::vector<std::int64_t>& shape,
                     const std::vector<hsize_t>& chunk, std::size_t element_size, std::byte* out,
                     const std::string& file, const std::string& object) {
  std::size_t chunk_bytes = element_size;
  for (hsize_t c : chunk) chunk_bytes *= c;
  std::vector<unsigned char> edge;  // partial edge chunks are read whole here, then the valid part copied
  for_each_run_chunk(shape, chunk, [&](const std::vector<hsize_t>& offset, std::int64_t first, std::int64_t count) {
    unsigned filters = 0;
    haddr_t address = HADDR_UNDEF;
    hsize_t stored = 0;
    check_status(H5Dget_chunk_info_by_coord(dataset, offset.data(), &filters, &address, &stored), file, object,
                 "cannot look up " + describe(offset));
    if (address == HADDR_UNDEF || stored == 0) fail(file, object, "missing " + describe(offset));
    if (stored != chunk_bytes + 4)
      fail(file, object, describe(offset) + " is stored in " + std::to_string(stored) + " bytes, expected " +
                             std::to_string(chunk_bytes + 4));
    if (filters != 0) fail(file, object, describe(offset) + " was stored without its checksum");
    if (address > static_cast<haddr_t>(raw.size) || stored > static_cast<hsize_t>(raw.size) - address)
      fail(file, object, describe(offset) + " lies outside the file (truncated?)");
    const std::size_t valid = static_cast<std::size_t>(count) * element_size;
    unsigned char* place = reinterpret_cast<unsigned char*>(out) + static_cast<std::size_t>(first) * element_size;
    if (valid == chunk_bytes) {
      read_chunk(raw.fd, address, place, chunk_bytes, offset, file, object);
    } else {
      edge.resize(chunk_bytes);
      read_chunk(raw.fd, address, edge.data(), chunk_bytes, offset, file, object);
      std::memcpy(place, edge.data(), valid);
    }
  });
}

}  // namespace tapeflow::io::internal
