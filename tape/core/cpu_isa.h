// The instruction-set level tapeflow's kernels run at, chosen once at run time from the CPU.
// Facts:    The library is built for x86-64-v2 with generic tuning (CMakeLists.txt); the hot kernels
//           (packed GEMM, convolutions, pooling, Winograd, Cholesky's panel updates, the optimizers'
//           update loops: tape/kernels/optimizer_updates.h, the reductions: reduce.h, batch
//           norm: batch_norm.h, the arithmetic element-wise maps: elementwise.h) also exist
//           compiled for AVX2 + FMA, with AVX-512 tiles inside them, and each call takes the best
//           level the CPU and OS support (CPUID, and XGETBV for the ymm / zmm state), capped by
//           set_max_cpu_isa or TAPEFLOW_MAX_CPU_ISA.
//           Levels: kBaseline (x86-64-v2: SSE4.2, no FMA), kAvx2 (AVX2 + FMA + F16C), kAvx512 (AVX2 + FMA
//           and AVX-512F/BW/VL: the float GEMM and convolution tiles twice as wide).
//           Bits: kAvx2 and kAvx512 give the same bits (every element the same FMA chain, in the
//           same order); kBaseline multiplies and adds separately, so its last bits differ from
//           theirs (the optimizers' update loops, the reductions, batch norm and the element-wise
//           maps excepted: the same bits at every level). At every
//           level results are the same for any thread count.
//           On a non-x86-64 build, or with the opt-in TAPEFLOW_NATIVE build, what kBaseline runs is
//           whatever the compiler targets. A build without the avx512 level (TAPEFLOW_NATIVE with
//           GCC < 13: AVX-512 off, CMakeLists.txt) runs kAvx2 at most: host_cpu_isa() (and so
//           cpu_isa()) never exceeds the best level the build compiled, whatever the CPU.
// Env:      TAPEFLOW_MAX_CPU_ISA=baseline|avx2|avx512 caps the level (as ONEDNN_MAX_CPU_ISA /
//           ATEN_CPU_CAPABILITY do), read on the first call of cpu_isa().
// Errors:   std::invalid_argument, naming the variable or function and the value, for an unknown
//           level name or a level this CPU (or build) lacks (thrown by cpu_isa(), so by the first kernel call,
//           for a bad TAPEFLOW_MAX_CPU_ISA; by set_max_cpu_isa / parse_cpu_isa otherwise).
// Ref:      oneDNN dnnl::set_max_cpu_isa / ONEDNN_MAX_CPU_ISA; PyTorch ATEN_CPU_CAPABILITY.
#pragma once

#include <string>
#include <string_view>

namespace tapeflow {

// Instruction-set levels of the kernels, ordered: kBaseline (x86-64-v2, no FMA), kAvx2 (AVX2 + FMA + F16C),
// kAvx512 (AVX2 + FMA and AVX-512F/BW/VL); see above. Cap: set_max_cpu_isa, TAPEFLOW_MAX_CPU_ISA.
enum class CpuIsa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// The level the kernels run at now: the best one the CPU supports, capped.
CpuIsa cpu_isa();
// The best level this CPU (and OS) supports and this build compiled, ignoring any cap.
CpuIsa host_cpu_isa();
// Caps the level for the kernels that run from now on (not while kernels run); returns the
// previous cap. Errors: std::invalid_argument if the CPU lacks `isa`.
CpuIsa set_max_cpu_isa(CpuIsa isa);
// "baseline", "avx2", "avx512".
std::string_view cpu_isa_name(CpuIsa isa);
// The level named `name` (as cpu_isa_name gives it). Errors: std::invalid_argument naming `what`
// (e.g. the variable) and the value when the name is unknown or the CPU lacks that level.
CpuIsa parse_cpu_isa(std::string_view name, const std::string& what = "TAPEFLOW_MAX_CPU_ISA");

namespace internal {
// Whether the kernels of `isa` fuse multiply-adds (one rounding), as test references need to know.
bool cpu_isa_fuses_multiply_add(CpuIsa isa);
}  // namespace internal

}  // namespace tapeflow
