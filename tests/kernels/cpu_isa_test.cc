// tapeflow::cpu_isa / set_max_cpu_isa / TAPEFLOW_MAX_CPU_ISA (tape/core/cpu_isa.h).
#include "tape/core/cpu_isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tapeflow {
namespace {

std::string error_of(void (*f)()) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no throw";
}

TEST(CpuIsa, NamesRoundTrip) {
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa <= host_cpu_isa()) {
      EXPECT_EQ(parse_cpu_isa(cpu_isa_name(isa)), isa);
    }
  }
}

TEST(CpuIsa, UnknownNameIsAnError) {
  const std::string e = error_of([] { parse_cpu_isa("sse9"); });
  EXPECT_NE(e.find("TAPEFLOW_MAX_CPU_ISA"), std::string::npos) << e;
  EXPECT_NE(e.find("\"sse9\""), std::string::npos) << e;
  EXPECT_NE(e.find("baseline, avx2, avx512"), std::string::npos) << e;
}

TEST(CpuIsa, LevelTheCpuLacksIsAnError) {
  if (host_cpu_isa() == CpuIsa::kAvx512) GTEST_SKIP() << "this CPU has every level";
  const std::string e = error_of([] { parse_cpu_isa("avx512"); });
  EXPECT_NE(e.find("not supported by this CPU"), std::string::npos) << e;
  const std::string s = error_of([] { set_max_cpu_isa(CpuIsa::kAvx512); });
  EXPECT_NE(s.find("set_max_cpu_isa"), std::string::npos) << s;
}

TEST(CpuIsa, CapLowersTheLevelAndRestores) {
  const CpuIsa before = cpu_isa();
  EXPECT_LE(before, host_cpu_isa());
  const CpuIsa previous = set_max_cpu_isa(CpuIsa::kBaseline);
  EXPECT_EQ(previous, before);
  EXPECT_EQ(cpu_isa(), CpuIsa::kBaseline);
  set_max_cpu_isa(host_cpu_isa());
  EXPECT_EQ(cpu_isa(), host_cpu_isa());
  set_max_cpu_isa(before);
  EXPECT_EQ(cpu_isa(), before);
}

// The level the process started with follows the environment (CTest runs the kernel, op and layer
// suites once per level with TAPEFLOW_MAX_CPU_ISA set: tests/CMakeLists.txt).
TEST(CpuIsa, EnvironmentCapsTheStartingLevel) {
  const char* env = std::getenv("TAPEFLOW_MAX_CPU_ISA");
  if (!env || !*env) GTEST_SKIP() << "TAPEFLOW_MAX_CPU_ISA is not set";
  // Other tests restore the cap they change, so the level is still the environment's.
  EXPECT_EQ(cpu_isa_name(cpu_isa()), std::string(env));
}

}  // namespace
}  // namespace tapeflow
