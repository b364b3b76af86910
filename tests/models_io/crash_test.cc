// Kill test: a child process saves (H5Writer, then atomic_write_file of an index) in a loop and is
// SIGKILLed at random moments; each target must always be absent (before its first commit) or
// complete with one of the two contents, and the killed writers' temporary files must not disturb
// later saves.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "models/io/atomic_file.h"
#include "models/io/h5_io.h"
#include "tests/models_io/io_test_util.h"

namespace tapeflow::io {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;
using Crash = ScratchDir;

// The small index file rewritten with atomic_write_file after each save.
const std::string kIndexA(3000, 'a'), kIndexB = "model_checkpoint_path: \"ckpt-2\"\n";

constexpr int kDatasets = 8;
constexpr std::int64_t kRows = 128, kCols = 256;  // 128 KiB per dataset, 1 MiB per save

// Saves version `v` (1 or 2): every element of every dataset equals v, attribute "version" = v.
void save(const std::string& path, int v) {
  std::vector<float> values(kRows * kCols, static_cast<float>(v));
  H5Writer w(path, {.chunk_bytes = 64 << 10});
  for (int k = 0; k < kDatasets; ++k)
    w.write_dataset("layer" + std::to_string(k) + "/kernel:0", DType::kFloat32, {kRows, kCols}, values.data());
  w.write_attribute("/", "version", std::int64_t{v});
  w.commit();
}

// Loads and checks a saved file completely; returns its version.
int load(const std::string& path) {
  H5Reader r(path);
  const std::int64_t v = r.read_int_attribute("/", "version");
  EXPECT_TRUE(v == 1 || v == 2) << v;
  for (int k = 0; k < kDatasets; ++k) {
    const ArrayData a = r.read_dataset("layer" + std::to_string(k) + "/kernel:0");
    EXPECT_EQ(a.shape, (std::vector<std::int64_t>{kRows, kCols}));
    std::vector<float> got(a.bytes.size() / 4);
    std::memcpy(got.data(), a.bytes.data(), a.bytes.size());
    EXPECT_EQ(got, std::vector<float>(kRows * kCols, static_cast<float>(v))) << "dataset " << k;
  }
  return static_cast<int>(v);
}

TEST_F(Crash, KilledSaverAlwaysLeavesTheOldOrTheNewFile) {
  const std::string path = file("ckpt.h5"), index = file("checkpoint");
  // Scale the kill delays to how long one save takes here.
  const auto start = std::chrono::steady_clock::now();
  save(file("probe.h5"), 1);
  const auto save_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  fs::remove(file("probe.h5"));

  std::mt19937 rng(12345);
  std::uniform_int_distribution<long> delay_us(0, 3 * std::max<long>(save_us, 1000));
  std::set<int> versions_seen;
  bool committed_once = false, index_once = false;
  for (int kill_round = 0; kill_round < 20; ++kill_round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      try {
        for (int i = kill_round;; ++i) {
          save(path, 1 + i % 2);
          atomic_write_file(index, i % 2 ? kIndexB : kIndexA);
        }
      } catch (...) {
      }
      ::_exit(1);  // only reached if a save failed
    }
    ::usleep(static_cast<useconds_t>(delay_us(rng)));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the saver exited by itself: a save failed";

    EXPECT_TRUE(fs::exists(index) || !index_once) << "round " << kill_round << ": the index vanished";
    if (fs::exists(index)) {
      index_once = true;
      std::ifstream in(index, std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_TRUE(text == kIndexA || text == kIndexB) << "round " << kill_round << ": torn index '" << text << "'";
    }
    if (!fs::exists(path)) {
      EXPECT_FALSE(committed_once) << "round " << kill_round << ": the file vanished";
      continue;
    }
    committed_once = true;
    try {
      versions_seen.insert(load(path));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "round " << kill_round << ": broken file: " << e.what();
    }
  }
  EXPECT_TRUE(committed_once);
  RecordProperty("versions_seen", static_cast<int>(versions_seen.size()));

  // Leftover temporary files (from kills mid-save) belong to dead processes: cleanup removes them
  // all, and neither they nor their removal disturb a later save.
  const std::size_t leftovers = entries().size() - (fs::exists(path) ? 1 : 0) - (fs::exists(index) ? 1 : 0);
  RecordProperty("leftover_temp_files", static_cast<int>(leftovers));
  save(path, 2);
  EXPECT_EQ(load(path), 2);
  EXPECT_EQ(remove_stale_temp_files(path) + remove_stale_temp_files(index), static_cast<int>(leftovers));
  fs::remove(index);
  EXPECT_EQ(entries(), std::vector<std::string>{"ckpt.h5"});
  EXPECT_EQ(load(path), 2);
}

}  // namespace
}  // namespace tapeflow::io
