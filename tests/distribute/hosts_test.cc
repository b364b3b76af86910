// Data-parallel jobs across the test hosts of scripts/test_hosts.sh (network namespaces on a bridge,
// Open MPI over TCP between them; CTest makes them in the distribute_hosts fixture): a host that goes
// away mid-training (all its processes killed, or its link pulled) ends the job with a non-zero
// status, promptly, with the host named; the newest checkpoint then resumes on the remaining host
// at another number of ranks; a shaped (slow) link still trains. Every job runs under
// `timeout -s KILL` (no hang can outlive the test). Skipped, with the reason, where the hosts are
// not up (no root or no namespaces: see scripts/test_hosts.sh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "data/fashion_mnist.h"
#include "tests/testing/apps.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const std::string kBin = TAPEFLOW_BINARY_DIR;
const std::string kHosts = std::string(TAPEFLOW_SOURCE_DIR) + "/scripts/test_hosts.sh";
// What the app's collectives wait before they abort the job, and what a failure may take to end it.
constexpr int kCollectiveTimeout = 10;
constexpr int kHardTimeoutSeconds = 90;

std::string prefix() {
  const char* p = std::getenv("TAPEFLOW_TEST_HOSTS");
  return p && *p ? p : "tfh";
}
std::string host(int i) { return prefix() + std::to_string(i); }

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// `scripts/test_hosts.sh ARGS` (under the hard timeout, with `env` as NAME=VALUE words added to the
// environment): exit code, output in `out` if given.
int hosts(const std::string& args, std::string* out = nullptr, const std::string& env = "") {
  const fs::path file = fs::temp_directory_path() / ("tapeflow_hosts_" + std::to_string(::getpid()) + ".txt");
  const std::string line = "timeout -s KILL " + std::to_string(kHardTimeoutSeconds) + " env " + env + " bash " +
                           kHosts + " " + args + " > " + file.string() + " 2>&1";
  const int status = std::system(line.c_str());
  if (out) *out = read_file(file);
  fs::remove(file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A job in the background: sh -c "timeout -s KILL 90 <command>" with output to a file.
class Job {
 public:
  Job(const std::string& command, const fs::path& out) : out_(out) {
    const std::string line = "exec timeout -s KILL " + std::to_string(kHardTimeoutSeconds) + " " + command + " > " +
                             out.string() + " 2>&1";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Job() {
    if (pid_ > 0 && code_ < -1) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  std::string output() const { return read_file(out_); }
  // Waits until the output contains `text` or the job ends (false) or `limit` seconds pass (false).
  bool wait_for_output(const std::string& text, double limit) {
    const auto t0 = Clock::now();
    while (seconds(t0, Clock::now()) < limit) {
      if (output().find(text) != std::string::npos) return true;
      if (done()) return output().find(text) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // The exit code once the job ended (-1 for a signal), waiting up to `limit` seconds; -2 if still running.
  int wait(double limit) {
    const auto t0 = Clock::now();
    while (!done() && seconds(t0, Clock::now()) < limit) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return code_ < -1 ? -2 : code_;
  }

 private:
  bool done() {
    if (code_ >= -1) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return true;
  }
  fs::path out_;
  pid_t pid_ = -1;
  int code_ = -3;
};

bool dataset_installed() {
  return fs::exists(std::string(tapeflow::data::kDefaultFashionMnistDir) + "/train-images-idx3-ubyte.gz") ||
         fs::exists(std::string(tapeflow::data::kDefaultFashionMnistDir) + "/train-images-idx3-ubyte");
}

// The newest ckpt-N.h5 in dir (0 if none).
int newest_checkpoint(const fs::path& dir) {
  int newest = 0;
  if (!fs::is_directory(dir)) return 0;
  const std::regex name("ckpt-([0-9]+)\\.h5");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    if (std::regex_match(f, m, name)) newest = std::max(newest, std::stoi(m[1].str()));
  }
  return newest;
}

// On leaving a test that pulled host 2's link: the link back up, host 2's orphans killed, and the
// hosts talking again. The next test's job must find them so: after the outage, Open MPI's first
// connection from host 2 back to host 1 was seen failing ("unable to complete a TCP connection")
// when a job started at once. Waits (up to ~20 s) until a trivial 2-host job runs.
struct ReconnectHostTwo {
  ~ReconnectHostTwo() {
    hosts("link " + host(2) + " up");
    hosts("kill " + host(2));
    for (int i = 0; i < 20; ++i) {
      if (hosts("mpirun --host " + host(1) + ":1," + host(2) + ":1 -np 2 true") == 0) break;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
};

class HostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (hosts("check", &why) != 0) GTEST_SKIP() << "no test hosts can be made here: " << why;
    std::string status;
    hosts("status", &status);
    if (status.find("== " + host(2)) == std::string::npos)
      GTEST_SKIP() << "the test hosts " << host(1) << " and " << host(2) << " are not up (CTest's fixture "
                   << "distribute_hosts_up makes them: scripts/test_hosts.sh up 2)";
    TAPEFLOW_REQUIRE_APP(kBin + "/apps/train_classifier");
    if (!dataset_installed()) GTEST_SKIP() << "Fashion-MNIST not installed";
    dir_ = fs::temp_directory_path() / ("tapeflow_hosts_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // train_classifier on the test hosts: `placement` is mpirun's --host list (H:SLOTS,...).
  std::string app(const std::string& placement, int ranks, const std::string& flags) const {
    return "bash " + kHosts + " mpirun --host " + placement + " -np " + std::to_string(ranks) + " " + kBin +
           "/apps/train_classifier --threads 1 --batch-size 120 --verbose 2 --collective-timeout " +
           std::to_string(kCollectiveTimeout) + " --checkpoint-dir " + (dir_ / "ckpt").string() + " " + flags;
  }
  // 2 hosts x 2 ranks train until rank 0 saved a checkpoint; then `fail` takes host 2 away. The job
  // must end non-zero within the collective timeout, naming host 2; then the newest checkpoint
  // resumes on host 1 alone with `resume_ranks` ranks for one more epoch. `fail`: kill or link.
  void lose_host_two(const std::string& fail, int resume_ranks) {
    Job job(app(host(1) + ":2," + host(2) + ":2", 4, "--limit 6000 --epochs 40"), dir_ / "job.txt");
    ASSERT_TRUE(job.wait_for_output("Saved ", 60)) << job.output();
    const auto t0 = Clock::now();
    std::string said;
    ASSERT_EQ(hosts(fail == "kill" ? "kill " + host(2) : "link " + host(2) + " down", &said), 0) << said;
    const int code = job.wait(kHardTimeoutSeconds);
    const double took = seconds(t0, Clock::now());
    const std::string out = job.output();
    std::printf("%s %s: the job ended with status %d %.2f s later\n", fail.c_str(), host(2).c_str(), code, took);
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(code, -2) << "still running\n" << out;
    EXPECT_LT(took, kCollectiveTimeout) << "must end within the collective timeout\n" << out;
    EXPECT_THAT(out, HasSubstr(host(2))) << "the message names the host that went away\n" << out;
    EXPECT_THAT(out, ::testing::Not(HasSubstr("Test loss"))) << "the job was meant to fail mid-training";

    const int newest = newest_checkpoint(dir_ / "ckpt");
    ASSERT_GE(newest, 1) << out;
    std::printf("newest checkpoint: ckpt-%d.h5; resuming on %s with %d ranks\n", newest, host(1).c_str(), resume_ranks);
    Job resume(app(host(1) + ":" + std::to_string(resume_ranks), resume_ranks,
                   "--limit 6000 --resume --epochs " + std::to_string(newest + 1) + " --metrics-out " +
                       (dir_ / "m.json").string()),
               dir_ / "resume.txt");
    ASSERT_EQ(resume.wait(kHardTimeoutSeconds), 0) << resume.output();
    const std::string r = resume.output();
    EXPECT_THAT(r, HasSubstr("Data-parallel over " + std::to_string(resume_ranks) + " ranks"));
    EXPECT_THAT(r, HasSubstr("ckpt-" + std::to_string(newest) + ".h5 after epoch " + std::to_string(newest))) << r;
    EXPECT_THAT(r, HasSubstr("Epoch " + std::to_string(newest + 1) + "/" + std::to_string(newest + 1))) << r;
    EXPECT_THAT(read_file(dir_ / "m.json"), HasSubstr("\"ranks\": " + std::to_string(resume_ranks)));
  }
  fs::path dir_;
};

// The test hosts share this machine's cores while each host's daemon believes it owns them all: with
// Open MPI's default binding (--bind-to core at <= 2 ranks) the first rank of every host was pinned to
// core 0, so 2 hosts x 1 rank ran on one core (W1's local step 8.1 ms vs 3.9 on one host). Every
// rank must see the cores this test sees.
TEST_F(HostsTest, RanksOnTheTestHostsAreNotPinnedToTheSameCores) {
  std::string out;
  ASSERT_EQ(hosts("mpirun --host " + host(1) + ":1," + host(2) + ":1 -np 2 grep Cpus_allowed_list: /proc/self/status",
                  &out),
            0)
      << out;
  std::smatch mine;
  const std::string status = read_file("/proc/self/status");
  ASSERT_TRUE(std::regex_search(status, mine, std::regex("Cpus_allowed_list:[^\\n]*"))) << status;
  int ranks = 0;
  for (std::size_t at = out.find(mine.str()); at != std::string::npos; at = out.find(mine.str(), at + 1)) ++ranks;
  EXPECT_EQ(ranks, 2) << "each rank's " << mine.str() << " expected; the ranks said:\n" << out;
}

// Every process on host 2 (its daemon and both ranks) is killed with SIGKILL: mpirun loses its daemon
// at once (the connection is reset) and ends the job; resume on host 1 with 3 ranks (4 before).
TEST_F(HostsTest, AKilledHostEndsTheJobNamingItAndTheNewestCheckpointResumesOnTheOther) {
  lose_host_two("kill", 3);
}

// Host 2's cable is pulled (the switch side of its link set down): no reset, packets vanish. The job
// ends once mpirun's keepalive to host 2's daemon fails (scripts/test_hosts.sh: ~5 s, inside the 10 s
// collective timeout); resume on host 1 with 2 ranks. Host 2's orphans are killed afterwards.
TEST_F(HostsTest, AHostWhoseLinkGoesDownEndsTheJobNamingItAndTheNewestCheckpointResumesOnTheOther) {
  const ReconnectHostTwo reconnect;
  lose_host_two("link", 2);
}

// Host 2's only rank hangs (sleeps) at its 3rd step: host 1's rank times out in the collective and
// names the rank and the host none of whose ranks answered; mpirun ends the job.
TEST_F(HostsTest, AHostWhoseRanksDoNotAnswerIsNamedWhenTheCollectiveTimesOut) {
  Job job("bash " + kHosts + " mpirun --host " + host(1) + ":1," + host(2) + ":1 -np 2 " + kBin +
              "/tests/distribute_child --mode hang --timeout 3",
          dir_ / "job.txt");
  const int code = job.wait(kHardTimeoutSeconds);
  const std::string out = job.output();
  EXPECT_NE(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("did not complete within 3 s on rank 0 of 2"));
  EXPECT_THAT(out, HasSubstr("rank 1 (" + host(2) + ") did not answer"));
  EXPECT_THAT(out, HasSubstr("no rank on host " + host(2) + " answered (ranks 1): is the host or its link down?"));
}

// Host 2's only rank hangs at its 3rd step and then host 2 becomes unreachable (its link pulled as
// soon as that rank says it hangs, when host 1's rank is in the step's collective): host 1's rank
// times out in the collective (3.5 s), names host 2 and its ranks and aborts; the job must end
// within 5 s of that message. Host 1's rank itself is gone within 1 s of its message (its MPI_Abort
// returns promptly); what took ~15 s was mpirun waiting on its connection to host 2's unreachable
// daemon until the kernel's TCP retries ran out: seen so with scripts/test_hosts.sh's keepalives
// on Open MPI's control connections removed, and with a 2 s timeout (the abort then goes out
// before the keepalive probes start, 2 s after the last traffic, and the retransmissions govern).
// The keepalives declare the daemon lost ~4.5 s after the link goes: the job ends ~1.05 s after
// the message. (The link used to be pulled 1 s after host 2's rank merely started, with a 3 s
// timeout; on a loaded machine host 1's rank reached the collective late, the keepalives spoke
// first, "ORTE has lost communication", and no host was named by us: seen on an AMD Zen 4 VM with
// a build beside the tests, and reproduced with 4 busy loops, which this version passes.)
TEST_F(HostsTest, AnUnreachableHostIsNamedAndTheJobEndsPromptlyAfterTheTimeout) {
  const ReconnectHostTwo reconnect;
  Job job("bash " + kHosts + " mpirun --host " + host(1) + ":1," + host(2) + ":1 -np 2 " + kBin +
              "/tests/distribute_child --mode hang --timeout 3.5",
          dir_ / "job.txt");
  // Host 2's rank hangs; host 1's rank is then in the 3rd step's collective (the 2nd completed on both).
  ASSERT_TRUE(job.wait_for_output("rank 1 hangs at step 3", 60)) << job.output();
  std::string said;
  ASSERT_EQ(hosts("link " + host(2) + " down", &said), 0) << said;
  ASSERT_TRUE(job.wait_for_output("did not complete within 3.5 s", 30)) << job.output();
  const auto t0 = Clock::now();
  const int code = job.wait(kHardTimeoutSeconds);
  const double took = seconds(t0, Clock::now());
  const std::string out = job.output();
  std::printf("the job ended with status %d %.2f s after the timeout message\n", code, took);
  EXPECT_NE(code, 0) << out;
  EXPECT_LT(took, 5.0) << out;
  EXPECT_THAT(out, HasSubstr("rank 1 (" + host(2) + ") did not answer"));
  EXPECT_THAT(out, HasSubstr("no rank on host " + host(2) + " answered (ranks 1): is the host or its link down?"));
}

// One link shaped as the issue asks ("delay 5ms rate 1gbit": netem where the kernel has it, else host 2
// behind a TAP relay that delays every frame 5 ms each way and a token bucket, see test_hosts.sh):
// the round trip between the hosts is measured (>= 9 ms: the delay is really applied), and 2 hosts x
// 1 rank still train to the end over that link.
TEST_F(HostsTest, ASlowLinkStillTrains) {
  struct Unshape {
    ~Unshape() { hosts("shape " + host(2) + " none"); }
  } unshape;
  std::string said;
  ASSERT_EQ(hosts("shape " + host(2) + " \"delay 5ms rate 1gbit\"", &said), 0) << said;
  std::printf("%s", said.c_str());
  std::string rtt;
  ASSERT_EQ(hosts("rtt " + host(1) + " " + host(2), &rtt), 0) << rtt;
  std::printf("%s", rtt.c_str());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(rtt, m, std::regex("rtt min/median/max = ([0-9.]+)/([0-9.]+)/"))) << rtt;
  EXPECT_GE(std::stod(m[1].str()), 9.0) << "the link's 5 ms each way is not applied: " << rtt;
  EXPECT_LT(std::stod(m[2].str()), 100.0) << rtt;
  Job job(app(host(1) + ":1," + host(2) + ":1", 2, "--limit 2400 --epochs 2"), dir_ / "job.txt");
  const int code = job.wait(kHardTimeoutSeconds);
  const std::string out = job.output();
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("Epoch 2/2"));
  EXPECT_THAT(out, HasSubstr("Test loss"));
  const std::regex epoch_line("Epoch [0-9]/2 .*ms/step");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), epoch_line);
       it != std::sregex_iterator(); ++it)
    std::printf("%s\n", it->str().c_str());
}

// The test hosts talk TCP with Linux's default congestion control, CUBIC, or TAPEFLOW_TEST_HOSTS_CC,
// not with whatever this machine defaults to (BBR on some images, whose pacing doubled W1's gradient
// exchange time between the hosts: see scripts/test_hosts.sh).
TEST_F(HostsTest, TheTestHostsUseTheChosenTcpCongestionControl) {
  const char* chosen = std::getenv("TAPEFLOW_TEST_HOSTS_CC");
  const std::string want = chosen && *chosen ? chosen : "cubic";
  for (int i = 1; i <= 2; ++i) {
    std::string cc;
    ASSERT_EQ(hosts("exec " + host(i) + " cat /proc/sys/net/ipv4/tcp_congestion_control", &cc), 0) << cc;
    EXPECT_EQ(cc, want + "\n") << host(i);
  }
}

// An unknown congestion control is refused before anything is made, naming it and what is available.
TEST(TestHostsScript, AnUnknownCongestionControlIsRefusedAndNothingIsMade) {
  std::string why;
  if (hosts("check", &why) != 0) GTEST_SKIP() << "no test hosts can be made here: " << why;
  const std::string p = prefix().substr(0, 7) + "c";
  std::string said;
  EXPECT_EQ(hosts("up 1", &said, "TAPEFLOW_TEST_HOSTS=" + p + " TAPEFLOW_TEST_HOSTS_CC=nosuch"), 1) << said;
  EXPECT_THAT(said, HasSubstr("TCP congestion control 'nosuch' is not available here (available: "));
  std::string left;
  hosts("status", &left, "TAPEFLOW_TEST_HOSTS=" + p);
  EXPECT_EQ(left, "") << "namespaces made despite the refusal";
  hosts("down", nullptr, "TAPEFLOW_TEST_HOSTS=" + p);
}

}  // namespace
