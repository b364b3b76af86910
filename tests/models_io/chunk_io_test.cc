// The direct chunk path (own Fletcher-32, H5Dwrite_chunk / H5Dread_chunk) agrees with HDF5's own
// filter pipeline in both directions, and rejects damaged or incomplete chunk storage.
#include <hdf5.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <random>

#include "models/io/h5_io.h"
#include "models/io/internal/chunk_io.h"
#include "tests/models_io/io_test_util.h"

// HDF5's own implementation (exported by libhdf5, declared only in its private headers).
extern "C" uint32_t H5_checksum_fletcher32(const void* data, size_t len);

namespace tapeflow::io {
namespace {

using testing::ScratchDir;
using ChunkIo = ScratchDir;

TEST(Fletcher32, BitIdenticalToHdf5) {
  std::mt19937 rng(7);
  // Lengths around the 32-byte step, HDF5's 360-word block, our 8 KiB fold interval, and odd sizes.
  for (std::size_t len : {0u, 1u, 2u, 3u, 31u, 32u, 33u, 719u, 720u, 721u, 722u, 1441u, 8191u, 8192u, 8193u, 8226u,
                          16385u, 65536u, 100003u, 1048576u}) {
    for (int fill : {-1, 0x00, 0xff}) {  // 0xff words are 65535, i.e. 0 mod 65535 but not all-zero
      std::vector<unsigned char> v(len);
      for (auto& c : v) c = static_cast<unsigned char>(fill < 0 ? rng() : fill);
      EXPECT_EQ(internal::fletcher32(v.data(), len), H5_checksum_fletcher32(v.data(), len))
          << "len " << len << " fill " << fill;
    }
  }
}

TEST(Fletcher32, RandomLengthsOffsetsAndSparseData) {
  std::mt19937 rng(11);
  std::vector<unsigned char> v(40000 + 64);
  for (int trial = 0; trial < 1000; ++trial) {
    const std::size_t len = rng() % 40000, offset = rng() % 64;  // unaligned starts
    const int kind = trial % 4;
    for (auto& c : v) {
      const unsigned r = rng();
      c = static_cast<unsigned char>(kind == 0 ? r : kind == 1 ? (r % 50 ? 0 : r) : kind == 2 ? (r % 2 ? 0xff : 0) : 0xff);
    }
    ASSERT_EQ(internal::fletcher32(v.data() + offset, len), H5_checksum_fletcher32(v.data() + offset, len))
        << "trial " << trial << " len " << len << " offset " << offset;
  }
}

// Known answers (from HDF5's H5_checksum_fletcher32) including sums that are 0 mod 65535 in one half
// or both, where only the all-zero input gives 0.
TEST(Fletcher32, KnownAnswers) {
  auto sum = [](std::vector<unsigned char> v) { return internal::fletcher32(v.data(), v.size()); };
  EXPECT_EQ(sum({}), 0u);
  EXPECT_EQ(sum({0, 0, 0, 0, 0}), 0u);
  EXPECT_EQ(sum({0x01, 0x02}), 0x01020102u);              // one word 0x0102
  EXPECT_EQ(sum({0x01, 0x02, 0x03, 0x04}), 0x05080406u);  // sum1 = 0x0406, sum2 = 0x0102 + 0x0406
  EXPECT_EQ(sum({0x05}), 0x05000500u);                    // an odd last byte is a high byte
  EXPECT_EQ(sum({0xff, 0xff}), 0xffffffffu);              // S1 = S2 = 65535 = 0 mod 65535, not zero data
  EXPECT_EQ(sum({0x00, 0x01, 0xff, 0xfe}), 0x0001ffffu);  // S1 = 65535, S2 = 65536 = 1 mod 65535
  const std::string text = "abcde";
  EXPECT_EQ(internal::fletcher32(reinterpret_cast<const unsigned char*>(text.data()), text.size()),
            H5_checksum_fletcher32(text.data(), text.size()));
}

TEST(Fletcher32, EverySingleBitFlipChangesTheSum) {
  std::mt19937 rng(3);
  std::vector<unsigned char> v(3000);
  for (auto& c : v) c = static_cast<unsigned char>(rng());
  const std::uint32_t good = internal::fletcher32(v.data(), v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      v[i] ^= static_cast<unsigned char>(1 << bit);
      ASSERT_NE(internal::fletcher32(v.data(), v.size()), good) << "byte " << i << " bit " << bit;
      v[i] ^= static_cast<unsigned char>(1 << bit);
    }
}

TEST(RunChunking, Recognised) {
  using internal::is_run_chunking;
  EXPECT_TRUE(is_run_chunking({10, 20}, {3, 20}));
  EXPECT_TRUE(is_run_chunking({10, 20}, {10, 20}));
  EXPECT_TRUE(is_run_chunking({4, 10, 20}, {1, 7, 20}));
  EXPECT_TRUE(is_run_chunking({4, 10, 20}, {1, 1, 5}));
  EXPECT_FALSE(is_run_chunking({4, 10, 20}, {2, 1, 20}));
  EXPECT_FALSE(is_run_chunking({10, 20}, {3, 10}));
  EXPECT_FALSE(is_run_chunking({10, 20}, {11, 20}));
  EXPECT_FALSE(is_run_chunking({10, 0}, {10, 1}));
  EXPECT_FALSE(is_run_chunking({}, {}));
}

std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) - 0.5f;
  return v;
}

// Shapes whose chunks split a leading, a middle or the last dim, with partial edge chunks.
const std::vector<std::vector<std::int64_t>> kShapes = {{1000}, {37, 29}, {5, 13, 17}, {3, 2, 999}};

TEST_F(ChunkIo, OurFilesReadBackThroughHdf5sPipeline) {
  for (const auto& shape : kShapes) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    const std::vector<float> values = ramp(static_cast<std::size_t>(n));
    const std::string path = file("ours.h5");
    H5Writer w(path, {.chunk_bytes = 600});
    w.write_dataset("x", DType::kFloat32, shape, values.data());
    w.commit();
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "x", H5P_DEFAULT);
    std::vector<float> got(values.size());
    EXPECT_GE(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got.data()), 0);
    EXPECT_EQ(got, values) << "rank " << shape.size();
    H5Dclose(d);
    H5Fclose(f);
  }
}

TEST_F(ChunkIo, Hdf5PipelineFilesReadThroughTheDirectPath) {
  for (const auto& shape : kShapes) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    const std::vector<float> values = ramp(static_cast<std::size_t>(n));
    const std::string path = file("theirs.h5");
    std::vector<hsize_t> dims(shape.begin(), shape.end()), chunk(dims);
    chunk.back() = (chunk.back() + 2) / 3;  // split the last dim: a run chunking with edge chunks
    for (std::size_t i = 0; i + 1 < chunk.size(); ++i) chunk[i] = 1;
    {
      hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
      hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
      H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
      H5Pset_fletcher32(dcpl);
      hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
      hid_t d = H5Dcreate2(f, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
      EXPECT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
      H5Dclose(d);
      H5Sclose(space);
      H5Pclose(dcpl);
      H5Fclose(f);
    }
    const ArrayData a = H5Reader(path).read_dataset("x");
    std::vector<float> got(values.size());
    std::memcpy(got.data(), a.bytes.data(), a.bytes.size());
    EXPECT_EQ(got, values) << "rank " << shape.size();
  }
}

TEST_F(ChunkIo, IncompleteOrUncheckedChunksAreRejected) {
  const std::string path = file("partial.h5");
  const hsize_t dims[1] = {8}, chunk[1] = {4};
  {
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, chunk);
    H5Pset_fletcher32(dcpl);
    hid_t space = H5Screate_simple(1, dims, nullptr);
    unsigned char raw[16 + 4] = {1, 2, 3};
    const std::uint32_t sum = H5_checksum_fletcher32(raw, 16);
    std::memcpy(raw + 16, &sum, 4);  // a valid chunk (little-endian host)
    const hsize_t first[1] = {0}, second[1] = {4};
    hid_t missing = H5Dcreate2(f, "missing", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    EXPECT_GE(H5Dwrite_chunk(missing, H5P_DEFAULT, 0, first, 20, raw), 0);  // chunk [4] never written
    hid_t unchecked = H5Dcreate2(f, "unchecked", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    EXPECT_GE(H5Dwrite_chunk(unchecked, H5P_DEFAULT, 1, first, 20, raw), 0);  // filter marked skipped
    EXPECT_GE(H5Dwrite_chunk(unchecked, H5P_DEFAULT, 1, second, 20, raw), 0);
    hid_t short_chunk = H5Dcreate2(f, "short", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    EXPECT_GE(H5Dwrite_chunk(short_chunk, H5P_DEFAULT, 0, first, 7, raw), 0);
    for (hid_t id : {missing, unchecked, short_chunk}) H5Dclose(id);
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Fclose(f);
  }
  H5Reader r(path);
  EXPECT_RUNTIME_ERROR(r.read_dataset("missing"), path, "'/missing'", "missing chunk at [4]");
  EXPECT_RUNTIME_ERROR(r.read_dataset("unchecked"), path, "'/unchecked'", "chunk at [0] was stored without its checksum");
  EXPECT_RUNTIME_ERROR(r.read_dataset("short"), path, "'/short'", "chunk at [0] is stored in 7 bytes, expected 20");
}

// Byte ranges [address, address + size) of every chunk of dataset `name`, in index order.
std::vector<std::pair<haddr_t, hsize_t>> chunk_ranges(const std::string& path, const char* name) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  hsize_t n = 0;
  EXPECT_GE(H5Dget_num_chunks(d, space, &n), 0);
  std::vector<std::pair<haddr_t, hsize_t>> out;
  for (hsize_t i = 0; i < n; ++i) {
    hsize_t offset[H5S_MAX_RANK];
    unsigned mask = 0;
    haddr_t addr = 0;
    hsize_t size = 0;
    EXPECT_GE(H5Dget_chunk_info(d, space, i, offset, &mask, &addr, &size), 0);
    out.emplace_back(addr, size);
  }
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST_F(ChunkIo, OpenAndReadIntoCallerMemory) {
  const std::vector<float> values = ramp(37 * 29);
  const std::string path = file("x.h5");
  {
    H5Writer w(path, {.chunk_bytes = 600});  // [5, 29] chunks: 8 of them, the last one partial
    w.write_dataset("g/x", DType::kFloat32, {37, 29}, values.data());
    w.commit();
  }
  H5Reader r(path);
  H5Dataset d = r.open_dataset("g/x");
  EXPECT_EQ(d.dtype(), DType::kFloat32);
  EXPECT_EQ(d.shape(), (std::vector<std::int64_t>{37, 29}));
  EXPECT_EQ(d.nbytes(), values.size() * sizeof(float));
  std::vector<float> got(values.size(), -7.0f);
  d.read_into(got.data(), got.size() * sizeof(float));
  EXPECT_EQ(got, values);
  EXPECT_THROW(d.read_into(got.data(), got.size() * sizeof(float) - 1), std::invalid_argument);
  EXPECT_THROW(d.read_into(nullptr, got.size() * sizeof(float)), std::invalid_argument);
  std::optional<H5Dataset> found = r.find_dataset("/g//x");
  ASSERT_TRUE(found.has_value());
  std::fill(got.begin(), got.end(), 0.0f);
  found->read_into(got.data(), got.size() * sizeof(float));
  EXPECT_EQ(got, values);
  EXPECT_FALSE(r.find_dataset("g").has_value());          // a group
  EXPECT_FALSE(r.find_dataset("g/missing").has_value());  // nothing there
  EXPECT_FALSE(r.find_dataset("g/x/child").has_value());  // below a dataset
  EXPECT_RUNTIME_ERROR(r.open_dataset("g"), path, "'/g'", "is not a dataset");
  EXPECT_RUNTIME_ERROR(r.open_dataset("nope"), path, "'/nope'", "no such dataset");
}

// A flipped byte in any chunk's data or stored checksum, the last (partial) chunk included, is an
// error naming that chunk.
TEST_F(ChunkIo, ReadIntoVerifiesEveryChunk) {
  const std::vector<float> values = ramp(37 * 29);
  const std::string good = file("good.h5");
  {
    H5Writer w(good, {.chunk_bytes = 600});
    w.write_dataset("x", DType::kFloat32, {37, 29}, values.data());
    w.commit();
  }
  const std::string bytes = read_bytes(good);
  const auto ranges = chunk_ranges(good, "x");
  ASSERT_EQ(ranges.size(), 8u);
  for (std::size_t k = 0; k < ranges.size(); ++k) {
    const auto [addr, size] = ranges[k];
    ASSERT_EQ(size, 5u * 29 * 4 + 4);
    for (hsize_t at : {hsize_t{0}, size / 2, size - 5, size - 1}) {  // data start, middle, end; checksum
      std::string bad = bytes;
      bad[addr + at] = static_cast<char>(bad[addr + at] ^ 0x01);
      write_bytes(file("bad.h5"), bad);
      H5Reader r(file("bad.h5"));
      std::vector<float> got(values.size());
      EXPECT_RUNTIME_ERROR(r.open_dataset("x").read_into(got.data(), got.size() * sizeof(float)), file("bad.h5"),
                           "'/x'", "checksum mismatch in chunk at [" + std::to_string(5 * k) + ", 0]");
    }
  }
}

// With a user block, chunk addresses are not file offsets: such files take HDF5's own read path,
// which verifies the checksums too.
TEST_F(ChunkIo, UserBlockFilesReadThroughHdf5) {
  const std::vector<float> values = ramp(1000);
  const std::string path = file("ub.h5");
  {
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_userblock(fcpl, 512);
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t dims[1] = {1000}, chunk[1] = {300};
    H5Pset_chunk(dcpl, 1, chunk);
    H5Pset_fletcher32(dcpl);
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t d = H5Dcreate2(f, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    EXPECT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    for (hid_t id : {d}) H5Dclose(id);
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Fclose(f);
    H5Pclose(fcpl);
  }
  std::vector<float> got(values.size());
  H5Reader(path).open_dataset("x").read_into(got.data(), got.size() * sizeof(float));
  EXPECT_EQ(got, values);
  std::string bad = read_bytes(path);
  const std::size_t at = bad.find(std::string(reinterpret_cast<const char*>(values.data() + 300), 64));
  ASSERT_NE(at, std::string::npos);  // the second chunk's data
  bad[at + 10] = static_cast<char>(bad[at + 10] ^ 0x01);
  write_bytes(file("ub_bad.h5"), bad);
  EXPECT_RUNTIME_ERROR(H5Reader(file("ub_bad.h5")).read_dataset("x"), file("ub_bad.h5"), "'/x'", "checksum mismatch");
}

}  // namespace
}  // namespace tapeflow::io
