// The direct chunk path (own Fletcher-32, H5Dwrite_chunk / H5Dread_chunk) agrees with HDF5's own
// filter pipeline in both directions, and rejects damaged or incomplete chunk storage.
#include <hdf5.h>

#include <cstring>
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
  for (std::size_t len : {0u, 1u, 2u, 3u, 31u, 32u, 33u, 719u, 720u, 721u, 722u, 1441u, 65536u, 100003u}) {
    for (int fill : {-1, 0x00, 0xff}) {  // 0xff words are the worst case for HDF5's uint32 sums
      std::vector<unsigned char> v(len);
      for (auto& c : v) c = static_cast<unsigned char>(fill < 0 ? rng() : fill);
      EXPECT_EQ(internal::fletcher32(v.data(), len), H5_checksum_fletcher32(v.data(), len))
          << "len " << len << " fill " << fill;
    }
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

}  // namespace
}  // namespace tapeflow::io
