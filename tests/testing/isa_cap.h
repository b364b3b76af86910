// The kernels' instruction-set level capped for a scope (tapeflow::set_max_cpu_isa), the previous
// cap restored after it, also when an assertion returns early.
#pragma once

#include "tape/core/cpu_isa.h"

namespace tapeflow::testing {

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
