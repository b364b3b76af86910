// H5Writer errors and temp-file handling, the on-disk layout (checked with the HDF5 C API), and
// atomic_write_file.
#include <hdf5.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "models/io/atomic_file.h"
#include "models/io/h5_io.h"
#include "tests/models_io/io_test_util.h"

namespace tapeflow::io {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;
using Writer = ScratchDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(Writer, NothingVisibleUntilCommitAndNoTempLeftAfter) {
  const std::string path = file("m.h5");
  const float x[2] = {1, 2};
  {
    H5Writer w(path);
    w.write_dataset("x", DType::kFloat32, {2}, x);
    EXPECT_FALSE(fs::exists(path));
    ASSERT_EQ(entries().size(), 1u);
    EXPECT_EQ(entries()[0].rfind("m.h5.tmp-" + std::to_string(::getpid()) + "-", 0), 0u) << entries()[0];
    w.commit();
    EXPECT_EQ(w.path(), path);
  }
  EXPECT_EQ(entries(), std::vector<std::string>{"m.h5"});
  {
    H5Writer abandoned(path);
    abandoned.write_dataset("y", DType::kFloat32, {2}, x);
  }
  EXPECT_EQ(entries(), std::vector<std::string>{"m.h5"});
  EXPECT_TRUE(H5Reader(path).exists("x"));  // the abandoned writer left the old file alone
  {
    H5Writer replacement(path);
    replacement.write_dataset("y", DType::kFloat32, {2}, x);
    H5Writer moved(std::move(replacement));
    moved.commit();
  }
  H5Reader r(path);
  EXPECT_FALSE(r.exists("x"));
  EXPECT_TRUE(r.exists("y"));
  EXPECT_EQ(entries(), std::vector<std::string>{"m.h5"});
}

TEST_F(Writer, BadArgumentsAndMisuse) {
  const std::string path = file("e.h5");
  const float x[4] = {};
  H5Writer w(path);
  w.write_dataset("a/b", DType::kFloat32, {4}, x);
  EXPECT_THROW(w.write_dataset("c", DType::kFloat32, {2, -1}, x), std::invalid_argument);
  EXPECT_THROW(w.write_dataset("c", DType::kFloat32, {2}, nullptr), std::invalid_argument);
  EXPECT_THROW(w.write_dataset("c", DType::kFloat32, std::vector<std::int64_t>(33, 1), x), std::invalid_argument);
  EXPECT_THROW(w.write_dataset("c", DType::kFloat32, {1ll << 40, 1ll << 40}, x), std::invalid_argument);
  EXPECT_THROW(w.write_dataset("a/b", DType::kFloat32, {4}, x), std::invalid_argument);    // exists
  EXPECT_THROW(w.write_dataset("a/b/c", DType::kFloat32, {4}, x), std::invalid_argument);  // b is no group
  EXPECT_THROW(w.create_group("a/b"), std::invalid_argument);
  EXPECT_THROW(w.write_dataset("/", DType::kFloat32, {4}, x), std::invalid_argument);
  EXPECT_THROW(w.write_attribute("a", "s", std::string("nul\0inside", 10)), std::invalid_argument);
  EXPECT_THROW(w.write_attribute("a", "s", std::vector<std::string>{std::string("x\0", 2)}), std::invalid_argument);
  EXPECT_RUNTIME_ERROR(w.write_attribute("missing", "n", std::int64_t{1}), path, "'/missing'", "no such object");
  EXPECT_NO_THROW(w.write_dataset("empty", DType::kFloat32, {0, 3}, nullptr));
  w.commit();
  EXPECT_THROW(w.commit(), std::logic_error);
  EXPECT_THROW(w.create_group("z"), std::logic_error);
  EXPECT_THROW(w.write_dataset("z", DType::kFloat32, {4}, x), std::logic_error);
  EXPECT_THROW(w.write_attribute("/", "n", std::int64_t{1}), std::logic_error);
  EXPECT_THROW(H5Writer(file("x.h5"), {.chunk_bytes = 0}), std::invalid_argument);
}

TEST_F(Writer, UnwritableLocationsNameThePath) {
  EXPECT_RUNTIME_ERROR(H5Writer(file("no/such/dir/m.h5")), file("no/such/dir/m.h5"), "cannot create temporary file");
  // commit() onto a path that is a non-empty directory fails in rename and cleans up.
  fs::create_directories(file("taken.h5/inside"));
  H5Writer w(file("taken.h5"));
  EXPECT_RUNTIME_ERROR(w.commit(), file("taken.h5"), "cannot rename");
  EXPECT_EQ(entries(), std::vector<std::string>{"taken.h5"});
  EXPECT_THROW(w.commit(), std::logic_error);
}

// The layout seen through the plain HDF5 C API (what h5py / h5dump users get).
TEST_F(Writer, LayoutThroughTheCApi) {
  const std::string path = file("layout.h5");
  std::vector<float> kernel(300 * 2000, 0.25f);
  const double scalar = 3.0;
  const bool flags[3] = {true, false, true};
  {
    H5Writer w(path);
    w.write_attribute("/", "layer_names", std::vector<std::string>{"dense", "bn"});
    w.write_attribute("/", "backend", std::string("tensorflow"));
    w.write_dataset("dense/dense/kernel:0", DType::kFloat32, {300, 2000}, kernel.data());
    w.write_attribute("dense", "weight_names", std::vector<std::string>{"dense/kernel:0"});
    w.write_dataset("s", DType::kFloat64, {}, &scalar);
    w.write_dataset("flags", DType::kBool, {3}, flags);
    w.write_attribute("s", "n", std::int64_t{5});
    w.commit();
  }
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5F_info2_t finfo;
  ASSERT_GE(H5Fget_info2(f, &finfo), 0);
  EXPECT_GE(finfo.super.version, 2u);  // checksummed superblock

  hid_t a = H5Aopen(f, "layer_names", H5P_DEFAULT);
  hid_t at = H5Aget_type(a);
  EXPECT_EQ(H5Tget_class(at), H5T_STRING);
  EXPECT_EQ(H5Tis_variable_str(at), 0);
  EXPECT_EQ(H5Tget_size(at), 5u);
  EXPECT_EQ(H5Tget_strpad(at), H5T_STR_NULLPAD);
  H5Tclose(at);
  H5Aclose(a);
  a = H5Aopen(f, "backend", H5P_DEFAULT);
  at = H5Aget_type(a);
  EXPECT_EQ(H5Tis_variable_str(at), 0);  // fixed-length, as h5py writes bytes (no global heap)
  EXPECT_EQ(H5Tget_strpad(at), H5T_STR_NULLPAD);
  EXPECT_EQ(H5Tget_cset(at), H5T_CSET_UTF8);
  H5Tclose(at);
  H5Aclose(a);

  hid_t d = H5Dopen2(f, "/dense/dense/kernel:0", H5P_DEFAULT);
  ASSERT_GE(d, 0);
  hid_t t = H5Dget_type(d);
  EXPECT_GT(H5Tequal(t, H5T_IEEE_F32LE), 0);
  H5Tclose(t);
  hid_t dcpl = H5Dget_create_plist(d);
  EXPECT_EQ(H5Pget_layout(dcpl), H5D_CHUNKED);
  hsize_t chunk[2];
  EXPECT_EQ(H5Pget_chunk(dcpl, 2, chunk), 2);
  EXPECT_EQ(chunk[1], 2000u);                        // whole rows
  EXPECT_LE(chunk[0] * chunk[1] * 4, 1u << 20);      // about 1 MiB
  EXPECT_GT(chunk[0] * chunk[1] * 4, 1u << 19);
  ASSERT_EQ(H5Pget_nfilters(dcpl), 1);
  EXPECT_EQ(H5Pget_filter2(dcpl, 0, nullptr, nullptr, nullptr, 0, nullptr, nullptr), H5Z_FILTER_FLETCHER32);
  H5Pclose(dcpl);
  H5Dclose(d);

  d = H5Dopen2(f, "s", H5P_DEFAULT);
  dcpl = H5Dget_create_plist(d);
  EXPECT_EQ(H5Pget_layout(dcpl), H5D_COMPACT);
  hid_t sp = H5Dget_space(d);
  EXPECT_EQ(H5Sget_simple_extent_type(sp), H5S_SCALAR);
  H5Sclose(sp);
  H5Pclose(dcpl);
  H5Dclose(d);

  d = H5Dopen2(f, "flags", H5P_DEFAULT);
  t = H5Dget_type(d);
  EXPECT_EQ(H5Tget_class(t), H5T_ENUM);
  EXPECT_EQ(H5Tget_size(t), 1u);
  char name[8] = {};
  std::int8_t one = 1;
  ASSERT_GE(H5Tenum_nameof(t, &one, name, sizeof name), 0);
  EXPECT_STREQ(name, "TRUE");
  H5Tclose(t);
  H5Dclose(d);

  hid_t g = H5Gopen2(f, "/dense", H5P_DEFAULT);
  hid_t gcpl = H5Gget_create_plist(g);
  unsigned order = 0;
  H5Pget_link_creation_order(gcpl, &order);
  EXPECT_TRUE(order & H5P_CRT_ORDER_TRACKED);
  H5Pclose(gcpl);
  H5Gclose(g);
  H5Fclose(f);
}

TEST_F(Writer, ConcurrentWritersAndReadersOnSeveralThreads) {
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::int32_t> v(5000, t);
      for (int round = 0; round < 10; ++round) {
        const std::string path = file(std::string("t").append(std::to_string(t)).append(".h5"));  // "x" + s: GCC 12 -Wrestrict false positive
        H5Writer w(path);
        for (int k = 0; k < 5; ++k)
          w.write_dataset(std::string("d").append(std::to_string(k)), DType::kInt32, {5000}, v.data());
        w.write_attribute("/", "round", std::int64_t{round});
        w.commit();
        H5Reader r(path);
        ok[t] += r.read_int_attribute("/", "round") == round && r.read_dataset("d4").bytes.size() == 20000;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 10));
}

using AtomicFile = ScratchDir;

TEST_F(AtomicFile, WritesAndReplacesWholeFiles) {
  const std::string path = file("index.txt");
  atomic_write_file(path, "first\n");
  EXPECT_EQ(slurp(path), "first\n");
  atomic_write_file(path, std::string("second\0binary", 13));
  EXPECT_EQ(slurp(path), std::string("second\0binary", 13));
  atomic_write_file(path, "");
  EXPECT_EQ(slurp(path), "");
  EXPECT_EQ(entries(), std::vector<std::string>{"index.txt"});
  EXPECT_RUNTIME_ERROR(atomic_write_file(file("none/index.txt"), "x"), file("none/index.txt"), "cannot create");
  fs::create_directories(file("dir_in_the_way/x"));
  EXPECT_RUNTIME_ERROR(atomic_write_file(file("dir_in_the_way"), "x"), "cannot rename");
  EXPECT_EQ(entries(), (std::vector<std::string>{"dir_in_the_way", "index.txt"}));
}

TEST_F(AtomicFile, TempNamesAreUniqueAndStaleOnesAreRemoved) {
  const std::string path = file("ckpt.h5");
  const std::string a = make_temp_path(path), b = make_temp_path(path);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(path + ".tmp-" + std::to_string(::getpid()) + "-", 0), 0u);
  // A dead writer's leftovers (pid above Linux's largest pid_max, 2^22), a live one's (ours), and look-alikes.
  for (const char* name : {"ckpt.h5.tmp-99999999-00ff", "ckpt.h5.tmp-x-1", "ckpt.h5.tmp--1", "other.h5.tmp-99999999-1"})
    std::ofstream(file(name)) << "x";
  std::ofstream(a) << "x";
  EXPECT_EQ(remove_stale_temp_files(path), 1);
  EXPECT_FALSE(fs::exists(file("ckpt.h5.tmp-99999999-00ff")));
  EXPECT_TRUE(fs::exists(a));
  EXPECT_EQ(entries().size(), 4u);
  EXPECT_RUNTIME_ERROR(remove_stale_temp_files(file("none/ckpt.h5")), "cannot list directory");
}

}  // namespace
}  // namespace tapeflow::io
