// Manager-level kill test: a forked child resumes from the directory and saves in a loop; it is
// SIGKILLed at random moments. Every restore must give one complete checkpoint (all values equal
// to the step its file number says), never older than the last one seen.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include "models/checkpoint.h"
#include "tests/models_io/io_test_util.h"

namespace tapeflow::models {
namespace {

namespace fs = std::filesystem;
using io::testing::ScratchDir;

constexpr std::int64_t kElements = 1 << 17;  // 512 KiB per variable

// Fills without kernels (no TBB in the forked child).
Tensor filled(float value) {
  Tensor t = Tensor::empty(Shape{kElements}, DType::kFloat32);
  std::fill(t.mutable_data<float>(), t.mutable_data<float>() + kElements, value);
  return t;
}

struct State {
  std::vector<Variable> vars{Variable(filled(0)), Variable(filled(0)), Variable(filled(0))};
  std::int64_t step = 0;
  std::shared_ptr<Checkpoint> checkpoint() {
    auto c = std::make_shared<Checkpoint>();
    for (std::size_t i = 0; i < vars.size(); ++i) {
      std::string name = "v";  // appended, not "v" + ...: GCC 12's -Wrestrict false positive
      name += std::to_string(i);
      c->track_variable(name, vars[i]);
    }
    c->track_counter("step", &step);
    return c;
  }
};

// The child: resume, then save steps forever (ckpt-N holds step N).
[[noreturn]] void save_forever(const std::string& dir) {
  try {
    State s;
    CheckpointManager m(s.checkpoint(), dir, 2);
    s.step = m.restore() ? s.step + 1 : 1;
    for (;; ++s.step) {
      for (const Variable& v : s.vars) v.assign(filled(static_cast<float>(s.step)));
      m.save();
    }
  } catch (...) {
  }
  ::_exit(1);
}

class Kill : public ScratchDir {};

TEST_F(Kill, RestoreAlwaysGivesACompleteCheckpoint) {
  const std::string dir = file("ckpts");
  const auto start = std::chrono::steady_clock::now();
  {
    State probe;
    CheckpointManager(probe.checkpoint(), file("probe"), 1).save();
  }
  const long save_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  std::mt19937 rng(2024);
  std::uniform_int_distribution<long> delay_us(0, 4 * std::max<long>(save_us, 1000));
  std::int64_t last = 0;
  int restored = 0;
  for (int round = 0; round < 16; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) save_forever(dir);
    ::usleep(static_cast<useconds_t>(delay_us(rng)));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the saver exited by itself: a save failed";

    State s;
    try {
      CheckpointManager m(s.checkpoint(), dir, 2);
      auto path = m.restore();
      if (!path) {
        EXPECT_EQ(last, 0) << "round " << round << ": checkpoints vanished";
        continue;
      }
      ++restored;
      EXPECT_EQ(*path, (fs::path(dir) / ("ckpt-" + std::to_string(s.step) + ".h5")).string()) << "round " << round;
      EXPECT_GE(s.step, last) << "round " << round << ": went back in time";
      for (const Variable& v : s.vars) {
        auto values = v.value().to_vector<float>();
        EXPECT_TRUE(std::all_of(values.begin(), values.end(), [&](float x) { return x == static_cast<float>(s.step); }))
            << "round " << round << ": torn checkpoint";
      }
      last = s.step;
      // The constructor cleaned up: only the index and the listed files remain.
      std::vector<std::string> names;
      for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
      EXPECT_EQ(names.size(), m.checkpoints().size() + 1) << "round " << round;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "round " << round << ": " << e.what();
    }
  }
  EXPECT_GT(restored, 0);
  EXPECT_GT(last, 1);
}

}  // namespace
}  // namespace tapeflow::models
