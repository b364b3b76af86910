// braced_list_canary() compiled with each instruction-set level's flags (tape/CMakeLists.txt).
#include "tape/kernels/internal/braced_list_canary.h"

#ifndef TAPEFLOW_KERNEL_ISA
#error "braced_list_canary.cc is compiled per instruction-set level (tape/CMakeLists.txt)"
#endif

namespace tapeflow::kernels::internal::TAPEFLOW_KERNEL_ISA {
std::string braced_list_canary() { return braced_list_canary_here(); }
}  // namespace tapeflow::kernels::internal::TAPEFLOW_KERNEL_ISA
