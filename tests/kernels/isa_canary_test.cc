// The compiler canary of issue 31 (tape/kernels/internal/braced_list_canary.h): braced-list
// constants built right by the tests' own flags (the header's inline copy, compiled here) and by
// every per-level copy inside the library (compiled with exactly the kernels' flags). Seen failing
// with -mtune=icelake-server added to the flags (see the note).
#include "tape/kernels/internal/braced_list_canary.h"

#include <gtest/gtest.h>

#include "tape/core/cpu_isa.h"

namespace tapeflow::kernels::internal {
namespace {

TEST(IsaCanary, BracedListsRightUnderTheTestsFlags) { EXPECT_EQ("", braced_list_canary_here()); }

TEST(IsaCanary, BracedListsRightInTheBaselineKernels) { EXPECT_EQ("", isa_baseline::braced_list_canary()); }

TEST(IsaCanary, BracedListsRightInTheAvx2Kernels) {
  if (host_cpu_isa() < CpuIsa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2 + FMA";
  EXPECT_EQ("", isa_avx2::braced_list_canary());
}

}  // namespace
}  // namespace tapeflow::kernels::internal
