// Failures of mpirun jobs end them promptly with a clear message and a non-zero status: differing
// variables, a rank that throws, a rank that is killed, a rank that hangs (collective timeout).
// Also the train_classifier app under mpirun: one log, one checkpoint, one metrics file, and
// --resume at another number of ranks. Every job runs under `timeout -s KILL` (no hang can
// outlive the test).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "data/fashion_mnist.h"
#include "tests/testing/apps.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kBin = TAPEFLOW_BINARY_DIR;
constexpr int kHardTimeoutSeconds = 60;

struct Job {
  int exit_code = -1;
  double seconds = 0;
  std::string output;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `prefix` wraps mpirun (e.g. a mount namespace), as `prefix 'mpirun ...'`; empty: none.
Job mpirun(int ranks, const std::string& command, const std::string& prefix = "") {
  const std::string out = (fs::temp_directory_path() / ("tapeflow_mpi_" + std::to_string(::getpid()) + ".txt")).string();
  std::string run = TAPEFLOW_MPIRUN " " + std::to_string(ranks) + " " + command;
  if (!prefix.empty()) run = prefix + " '" + run + "'";
  const std::string line = "timeout -s KILL " + std::to_string(kHardTimeoutSeconds) + " " + run + " > " + out + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(line.c_str());
  Job j;
  j.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  j.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  j.output = read_file(out);
  fs::remove(out);
  return j;
}

std::string child(const std::string& args) { return kBin + "/tests/distribute_child " + args; }

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(DistributeFailures, HealthyJobSucceeds) {
  const Job j = mpirun(2, child("--mode ok"));
  EXPECT_EQ(j.exit_code, 0) << j.output;
  EXPECT_THAT(j.output, HasSubstr("trained 16 steps"));
}

TEST(DistributeFailures, MismatchedVariablesNameTheFirstDifferenceAndTheRanks) {
  const Job j = mpirun(2, child("--mode mismatch"));
  EXPECT_NE(j.exit_code, 0) << j.output;
  EXPECT_THAT(j.output, HasSubstr("variable 0: rank 0 has 'w' [2, 2] float32, rank 1 has 'w' [2, 3] float32"));
  EXPECT_LT(j.seconds, kHardTimeoutSeconds - 5) << j.output;
}

TEST(DistributeFailures, ARankThatThrowsEndsTheJob) {
  const Job j = mpirun(2, child("--mode throw --timeout 30"));
  EXPECT_NE(j.exit_code, 0) << j.output;
  EXPECT_THAT(j.output, HasSubstr("rank 1 of 2 is leaving with an exception; aborting the job"));
  EXPECT_LT(j.seconds, 20) << "the others must not wait for the collective timeout\n" << j.output;
}

TEST(DistributeFailures, ARankThatIsKilledEndsTheJob) {
  const Job j = mpirun(2, child("--mode kill --timeout 30"));
  EXPECT_NE(j.exit_code, 0) << j.output;
  EXPECT_THAT(j.output, HasSubstr("signal 9")) << "mpirun reports the killed rank";
  EXPECT_LT(j.seconds, 20) << j.output;
}

TEST(DistributeFailures, AHungRankTimesOutNamingIt) {
  const Job j = mpirun(3, child("--mode hang --timeout 3"));
  EXPECT_NE(j.exit_code, 0) << j.output;
  EXPECT_THAT(j.output, HasSubstr("did not complete within 3 s on rank"));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_THAT(j.output, HasSubstr("rank 1 (" + std::string(host) + ") did not answer"));
  EXPECT_THAT(j.output, ::testing::Not(HasSubstr("no rank on host"))) << "this rank's own host is never missing";
  EXPECT_LT(j.seconds, 30) << j.output;
}

bool dataset_installed() {
  return fs::exists(std::string(tapeflow::data::kDefaultFashionMnistDir) + "/train-images-idx3-ubyte.gz") ||
         fs::exists(std::string(tapeflow::data::kDefaultFashionMnistDir) + "/train-images-idx3-ubyte");
}

TEST(DistributeApps, TrainClassifierOnTwoRanksResumesOnOneAndThree) {
  TAPEFLOW_REQUIRE_APP(kBin + "/apps/train_classifier");
  if (!dataset_installed()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const fs::path dir = fs::temp_directory_path() / ("tapeflow_mpi_app_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string app = kBin + "/apps/train_classifier --limit 480 --batch-size 60 --threads 1 --checkpoint-dir " +
                          (dir / "ckpt").string() + " --metrics-out " + (dir / "m.json").string();
  Job j = mpirun(2, app + " --epochs 1");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  EXPECT_EQ(count(j.output, "Epoch 1/1"), 1) << "one log line per epoch, from rank 0\n" << j.output;
  EXPECT_EQ(count(j.output, "Saved "), 1) << j.output;
  EXPECT_THAT(read_file((dir / "m.json").string()), HasSubstr("\"ranks\": 2"));
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "ckpt-1.h5"));

  j = mpirun(3, app + " --epochs 2 --resume");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  EXPECT_EQ(count(j.output, "Resumed from"), 1) << j.output;
  EXPECT_THAT(j.output, HasSubstr("after epoch 1"));
  EXPECT_EQ(count(j.output, "Epoch 2/2"), 1) << j.output;
  EXPECT_THAT(read_file((dir / "m.json").string()), HasSubstr("\"ranks\": 3"));

  j = mpirun(1, app + " --epochs 3 --resume");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  EXPECT_THAT(j.output, HasSubstr("after epoch 2"));
  EXPECT_EQ(count(j.output, "Epoch 3/3"), 1) << j.output;
  fs::remove_all(dir);
}

// --fp16-allreduce: the gradients cross the network as half (--no-shared-memory: every buffer takes
// the network sum, where the compression applies); training runs and logs a finite loss.
TEST(DistributeApps, Fp16AllreduceTrainsOverTheNetwork) {
  TAPEFLOW_REQUIRE_APP(kBin + "/apps/train_classifier");
  if (!dataset_installed()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const Job j = mpirun(2, kBin + "/apps/train_classifier --limit 480 --batch-size 60 --threads 1 --epochs 2 "
                                 "--verbose 2 --no-shared-memory --fp16-allreduce");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  EXPECT_THAT(j.output, HasSubstr("Epoch 2/2"));
  EXPECT_THAT(j.output, Not(HasSubstr("nan"))) << j.output;
  EXPECT_THAT(j.output, HasSubstr("loss: ")) << j.output;
}

// Where /dev/shm is small (containers), the shared-memory window cannot be allocated: the job ends
// with exit 1 and a message saying what it needs and how to do without; --no-shared-memory then
// trains there. /dev/shm is a 1 MB tmpfs in a private mount namespace (root only; the window of W1's
// MLP needs 2 x 2 x 1.08 MB); btl tcp,self, since Open MPI's own shared-memory transport needs
// /dev/shm too.
TEST(DistributeApps, ASmallDevShmFailsTheWindowClearlyAndNoSharedMemoryTrainsThere) {
  TAPEFLOW_REQUIRE_APP(kBin + "/apps/train_classifier");
  if (!dataset_installed()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string tiny = "unshare -m sh -c 'mount -t tmpfs -o size=1m tapeflow_shm /dev/shm && exec \"$@\"' tiny sh -c";
  if (std::system("unshare -m sh -c 'mount -t tmpfs -o size=1m tapeflow_shm /dev/shm' 2>/dev/null") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs in a private mount namespace here (needs root)";
  const std::string app = "--mca btl tcp,self " + kBin +
                          "/apps/train_classifier --limit 480 --batch-size 60 --threads 1 --epochs 1 --verbose 2";
  Job j = mpirun(2, app, tiny);
  EXPECT_EQ(j.exit_code, 1) << j.output;
  EXPECT_THAT(j.output, HasSubstr("train_classifier: error: distribute: MPI_Win_allocate_shared ("));
  EXPECT_THAT(j.output, HasSubstr("the apps' --no-shared-memory, reduces over the network instead"));
  EXPECT_LT(j.seconds, 40) << j.output;
  j = mpirun(2, app + " --no-shared-memory", tiny);
  EXPECT_EQ(j.exit_code, 0) << j.output;
  EXPECT_THAT(j.output, HasSubstr("Epoch 1/1"));
}

}  // namespace
