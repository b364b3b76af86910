// internal::GradientReducer under mpirun: what the Context-level tests cannot make happen on
// purpose (a rank that is slow to copy its results out).
#include "distribute/internal/gradient_reducer.h"

#include <gtest/gtest.h>

#include <chrono>

#include "distribute/internal/communicator.h"
#include "tape/ops/array_ops.h"
#include "tests/distribute/mpi_test_util.h"

namespace tapeflow::distribute::testing {
namespace {

// The window's two halves: rank 1 sleeps 30 ms between the second barrier and its copy-out in
// every step, so the other ranks are already writing the next step's gradients into their
// segments while it still reads this step's sums from them. Rank r's gradient in step s is
// (r + 1)(s + 1) everywhere, so every element of the sum is (s + 1)·n(n + 1)/2, exactly.
TEST(GradientReducerTest, ASlowCopyOutStillReadsItsOwnStep) {
  Context& c = context();
  if (c.size() == 1) GTEST_SKIP() << "needs two ranks";
  internal::Communicator comm(60, c.rank(), c.size());
  internal::GradientReducer reducer(comm, false, true, c.options().shared_memory_group);
  if (!reducer.uses_shared_memory()) GTEST_SKIP() << "no shared-memory window (uneven groups)";
  if (c.rank() == 1) reducer.set_copy_out_delay_for_testing(std::chrono::milliseconds(30));
  Variable v(zeros(Shape{4096}), {.name = "slow_copy_out"});
  const int n = c.size();
  for (int step = 0; step < 4; ++step) {
    reducer.begin({v}, ReduceOp::kSum, 1 << 20);
    reducer.set(0, fill(Shape{4096}, static_cast<double>((c.rank() + 1) * (step + 1)), DType::kFloat32));
    const auto out = reducer.finish();
    ASSERT_TRUE(out[0].has_value());
    const float want = static_cast<float>((step + 1) * n * (n + 1) / 2);
    const auto got = out[0]->to_vector<float>();
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want) << "element " << i << " step " << step;
  }
}

}  // namespace
}  // namespace tapeflow::distribute::testing
