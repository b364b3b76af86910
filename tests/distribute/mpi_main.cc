// gtest main for tests run under mpirun: one distribute::Context for the whole run; rank 0 prints
// the usual report, other ranks print only their failures (prefixed with the rank).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/distribute/mpi_test_util.h"

namespace tapeflow::distribute::testing {
namespace {

Context* g_context = nullptr;
int g_expected_hosts = 1;

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

Context& context() { return *g_context; }
int expected_hosts() { return g_expected_hosts; }

}  // namespace tapeflow::distribute::testing

int main(int argc, char** argv) {
  // Leading options: --shared-memory-group G (ContextOptions::shared_memory_group, so one machine
  // runs the reductions across groups that several machines would) and --hosts H (the job spans H
  // machines with the same number of ranks each: scripts/test_hosts.sh; default 1).
  int group = 0;
  while (argc >= 3 && (std::string(argv[1]) == "--shared-memory-group" || std::string(argv[1]) == "--hosts")) {
    (std::string(argv[1]) == "--hosts" ? tapeflow::distribute::testing::g_expected_hosts : group) = std::stoi(argv[2]);
    for (int i = 3; i <= argc; ++i) argv[i - 2] = argv[i];  // argv[argc] is the null terminator
    argc -= 2;
  }
  // A short timeout: a test that desynchronises the ranks aborts the job instead of hanging CTest.
  tapeflow::distribute::Context context(&argc, &argv, {.timeout_seconds = 60, .shared_memory_group = group});
  tapeflow::distribute::testing::g_context = &context;
  ::testing::InitGoogleTest(&argc, argv);
  if (context.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new tapeflow::distribute::testing::FailurePrinter(context.rank()));
  }
  const int failed = RUN_ALL_TESTS();
  // Every rank's verdict: a failure anywhere fails the job on every rank.
  std::vector<double> any{static_cast<double>(failed)};
  context.all_reduce(any, tapeflow::models::ReduceOp::kMax, "test verdict");
  return any[0] != 0.0 ? 1 : 0;
}
