#include "models/io/internal/chunk_io.h"

#include <algorithm>
#include <cstring>

#include "models/io/internal/h5_util.h"

namespace tapeflow::io::internal {
namespace {

// Eight 32-bit lanes (GCC / Clang vector extension; AVX2 with -march=native, SSE2 otherwise).
typedef std::uint32_t U32x8 __attribute__((vector_size(32)));

void fold(std::uint32_t& sum) { sum = (sum & 0xffff) + (sum >> 16); }

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

std::uint32_t fletcher32(const unsigned char* data, std::size_t len) {
  std::size_t words = len / 2;
  std::uint32_t sum1 = 0, sum2 = 0;
  while (words > 0) {
    // HDF5 adds up to 360 words before folding; per block, with w_j the words and n the count:
    // sum2 += n * sum1 + Σ (n - j) w_j and sum1 += Σ w_j (all mod 2^32, as HDF5's uint32 sums).
    const std::uint32_t n = words > 360 ? 360 : static_cast<std::uint32_t>(words);
    words -= n;
    const std::uint32_t steps = n / 16;  // 16 words = 32 bytes: lane l holds words 2l and 2l + 1
    U32x8 pe = {}, po = {}, qe = {}, qo = {};  // p: running sums; q: sums of running sums
    for (std::uint32_t i = 0; i < steps; ++i) {
      U32x8 x;
      std::memcpy(&x, data + 32 * i, 32);
      const U32x8 even = ((x << 8) & 0xff00) | ((x >> 8) & 0xff);
      const U32x8 odd = ((x >> 8) & 0xff00) | (x >> 24);
      pe += even;
      po += odd;
      qe += pe;
      qo += po;
    }
    // Over the first m = 16 * steps words: Σ w = Σ p and Σ (m - j) w_j = 16 Σ q - Σ position * p.
    std::uint32_t a = 0, b = 0;
    for (std::uint32_t l = 0; l < 8; ++l) {
      a += pe[l] + po[l];
      b += 16 * (qe[l] + qo[l]) - (2 * l) * pe[l] - (2 * l + 1) * po[l];
    }
    const std::uint32_t m = 16 * steps;
    sum2 += m * sum1 + b;
    sum1 += a;
    for (std::uint32_t j = m; j < n; ++j) {
      sum1 += (std::uint32_t{data[2 * j]} << 8) | data[2 * j + 1];
      sum2 += sum1;
    }
    data += 2 * n;
    fold(sum1);
    fold(sum2);
  }
  if (len % 2) {
    sum1 += std::uint32_t{*data} << 8;
    sum2 += sum1;
    fold(sum1);
    fold(sum2);
  }
  fold(sum1);
  fold(sum2);
  return (sum2 << 16) | sum1;
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

void read_run_chunks(hid_t dataset, const std::vector<std::int64_t>& shape, const std::vector<hsize_t>& chunk,
                     std::size_t element_size, std::vector<std::byte>& out, const std::string& file,
                     const std::string& object) {
  std::size_t chunk_bytes = element_size;
  for (hsize_t c : chunk) chunk_bytes *= c;
  const std::size_t size = out.size();
  // A full chunk is read straight into place; its 4 checksum bytes land on the start of the next
  // chunk's region (read later, in order) or in 4 bytes of slack at the end.
  out.resize(size + 4);
  std::vector<unsigned char> edge;  // for partial edge chunks only
  for_each_run_chunk(shape, chunk, [&](const std::vector<hsize_t>& offset, std::int64_t first, std::int64_t count) {
    const std::size_t valid = static_cast<std::size_t>(count) * element_size;
    unsigned char* target = reinterpret_cast<unsigned char*>(out.data()) + static_cast<std::size_t>(first) * element_size;
    if (valid != chunk_bytes) {
      edge.resize(chunk_bytes + 4);
      target = edge.data();
    }
    hsize_t stored = 0;
    if (H5Dget_chunk_storage_size(dataset, offset.data(), &stored) < 0 || stored == 0)
      fail(file, object, "missing " + describe(offset));
    if (stored != chunk_bytes + 4)
      fail(file, object, describe(offset) + " is stored in " + std::to_string(stored) + " bytes, expected " +
                             std::to_string(chunk_bytes + 4));
    std::uint32_t filters = 0;
    check_status(H5Dread_chunk(dataset, H5P_DEFAULT, offset.data(), &filters, target), file, object,
                 "cannot read " + describe(offset));
    if (filters != 0) fail(file, object, describe(offset) + " was stored without its checksum");
    std::uint32_t stored_sum = 0;
    for (int i = 0; i < 4; ++i) stored_sum |= std::uint32_t{target[chunk_bytes + i]} << (8 * i);
    const std::uint32_t sum = fletcher32(target, chunk_bytes);
    // HDF5 also accepts the byte-swapped sum written by its releases before 1.6.3.
    const std::uint32_t swapped = ((sum & 0xff) << 8) | ((sum >> 8) & 0xff) | ((sum & 0xff0000) << 8) | ((sum >> 8) & 0xff0000);
    if (stored_sum != sum && stored_sum != swapped)
      fail(file, object, "Fletcher-32 checksum mismatch in " + describe(offset) + " (the data is damaged)");
    if (target == edge.data())
      std::memcpy(out.data() + static_cast<std::size_t>(first) * element_size, edge.data(), valid);
  });
  out.resize(size);
}

}  // namespace tapeflow::io::internal
