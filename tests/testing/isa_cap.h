// The kernels' instruction-set level capped for a scope (tapeflow::set_max_cpu_isa), the previous
// cap restored after it, also when an assertion returns early.
#pragma once

#include <vector>

#include "tape/core/cpu_isa.h"

namespace tapeflow::testing {

// The levels this CPU has, lowest first (the ones a test can force).
inline std::vector<CpuIsa> host_cpu_levels() {
  std::vector<CpuIsa> levels;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (isa <= host_cpu_isa()) levels.push_back(isa);
  return levels;
}

class IsaCap {
 public:
  explicit IsaCap(CpuIsa isa) : previous_(set_max_cpu_isa(isa)) {}
  ~IsaCap() { set_max_cpu_isa(previous_); }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;

 private:
  CpuIsa previous_;
};

}  // namespace tapeflow::testing
