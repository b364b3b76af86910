// Non-temporal (streaming) stores for the per-level kernel sources (tape/kernels/conv/*.cc, pool.cc):
// the few intrinsics those files need, kept here under ukernels/ with the rest of the intrinsics.
// Facts:    stream_packet(p, v) stores an Eigen packet to a packet-aligned p with a non-temporal
//           store where the level has AVX (32-byte packets), else with a plain aligned store;
//           StreamFence's destructor orders a task's streaming stores (weakly ordered) before
//           whatever follows (sfence), when active. Defined in the level's namespace
//           (TAPEFLOW_KERNEL_ISA): no inline function is shared between levels.
#pragma once
#ifndef TAPEFLOW_KERNEL_ISA
#error "compiled per instruction-set level with -DTAPEFLOW_KERNEL_ISA=isa_<level> (tape/CMakeLists.txt)"
#endif
#include <Eigen/Core>
#include <immintrin.h>

#include <type_traits>

namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA {

// Orders a task's streaming stores before whatever follows it (they are weakly ordered).
struct StreamFence {
  bool active;
  explicit StreamFence(bool a) : active(a) {}
  StreamFence(const StreamFence&) = delete;
  StreamFence& operator=(const StreamFence&) = delete;
  ~StreamFence() {
    if (active) _mm_sfence();
  }
};

// Non-temporal store of a packet to a packet-aligned address (a plain aligned store without AVX).
template <class T, class P>
void stream_packet(T* p, const P& v) {
#if defined(__AVX__)
  if constexpr (sizeof(P) == 32 && std::is_same_v<T, float>) {
    _mm256_stream_ps(p, v);
    return;
  } else if constexpr (sizeof(P) == 32 && std::is_same_v<T, double>) {
    _mm256_stream_pd(p, v);
    return;
  }
#endif
  Eigen::internal::pstore(p, v);
}

}  // namespace tapeflow::kernels::TAPEFLOW_KERNEL_ISA
