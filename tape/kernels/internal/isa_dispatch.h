// Calling the per-level copies of a kernel source (cmake/tapeflow_isa.cmake: compiled once per
// instruction-set level into kernels::isa_<level>) from the one function the rest of the library
// calls, which picks the copy for cpu_isa() (tape/core/cpu_isa.h) at each call.
// Use:      a list macro LIST(X) with X(name, (parameters), (arguments)) per function template of
//           T returning void; inside namespace tapeflow::kernels, TAPEFLOW_ISA_DECLARE(LIST)
//           declares the copies and LIST(TAPEFLOW_ISA_DISPATCH) defines the dispatching functions.
// Facts:    The levels this build has: baseline, avx2 and avx512 on x86-64; without avx512 in the
//           opt-in native build with GCC < 13 (TAPEFLOW_NO_AVX512_TILES); baseline elsewhere.
//           A level the build lacks runs the best copy below it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "tape/core/cpu_isa.h"
#include "tape/kernels/internal/conv_isa.h"  // TAPEFLOW_HAS_AVX2_KERNELS

#define TAPEFLOW_ISA_DECLARE_ONE(name, params, args) \
  template <class T>                                 \
  void name params;
#define TAPEFLOW_ISA_DECLARE(LIST)                       \
  namespace isa_baseline {                               \
  LIST(TAPEFLOW_ISA_DECLARE_ONE)                         \
  }                                                      \
  namespace isa_avx2 {                                   \
  LIST(TAPEFLOW_ISA_DECLARE_ONE)                         \
  }                                                      \
  namespace isa_avx512 {                                 \
  LIST(TAPEFLOW_ISA_DECLARE_ONE)                         \
  }

// TAPEFLOW_ISA_LEVELS(X, ...): X(isa_<level>, ...) for every level this build compiled, lowest first
// (in CpuIsa order), for kernels that pick their copy otherwise (a table of loops per level).
#if TAPEFLOW_HAS_AVX2_KERNELS && !defined(TAPEFLOW_NO_AVX512_TILES)
#define TAPEFLOW_ISA_LEVELS(X, ...) X(isa_baseline, __VA_ARGS__) X(isa_avx2, __VA_ARGS__) X(isa_avx512, __VA_ARGS__)
#elif TAPEFLOW_HAS_AVX2_KERNELS
#define TAPEFLOW_ISA_LEVELS(X, ...) X(isa_baseline, __VA_ARGS__) X(isa_avx2, __VA_ARGS__)
#else
#define TAPEFLOW_ISA_LEVELS(X, ...) X(isa_baseline, __VA_ARGS__)
#endif

// A table of loops per level, for a kernel whose per-level source fills one (isa_<level>::fill<T>
// (internal::Table<T>&)): inside namespace tapeflow::kernels, TAPEFLOW_ISA_DECLARE_FILL(Table, fill)
// declares the per-level fill functions; inside namespace tapeflow::kernels::internal,
// TAPEFLOW_ISA_TABLE(Table, getter, fill) defines template <class T> const Table<T>& getter(), the
// table of cpu_isa()'s level (all filled on the first call).
#define TAPEFLOW_ISA_DECLARE_FILL_ONE(level, Table, fill) \
  namespace level {                                       \
  template <class T>                                      \
  void fill(internal::Table<T>& loops);                   \
  }
#define TAPEFLOW_ISA_DECLARE_FILL(Table, fill) TAPEFLOW_ISA_LEVELS(TAPEFLOW_ISA_DECLARE_FILL_ONE, Table, fill)
#define TAPEFLOW_ISA_FILL_ONE(level, fill) level::fill<T>(tables.emplace_back());
#define TAPEFLOW_ISA_TABLE(Table, getter, fill)                                                        \
  template <class T>                                                                                   \
  const Table<T>& getter() {                                                                           \
    static const auto all = [] {                                                                       \
      std::vector<Table<T>> tables;                                                                    \
      TAPEFLOW_ISA_LEVELS(TAPEFLOW_ISA_FILL_ONE, fill)                                                  \
      return tables;                                                                                   \
    }();                                                                                               \
    return all[std::min<std::size_t>(static_cast<std::size_t>(cpu_isa()), all.size() - 1)];          \
  }

#if TAPEFLOW_HAS_AVX2_KERNELS && !defined(TAPEFLOW_NO_AVX512_TILES)
#define TAPEFLOW_ISA_DISPATCH(name, params, args)                \
  template <class T>                                             \
  void name params {                                             \
    const CpuIsa isa = cpu_isa();                                \
    if (isa == CpuIsa::kAvx512) return isa_avx512::name<T> args; \
    if (isa == CpuIsa::kAvx2) return isa_avx2::name<T> args;     \
    return isa_baseline::name<T> args;                           \
  }
#elif TAPEFLOW_HAS_AVX2_KERNELS
#define TAPEFLOW_ISA_DISPATCH(name, params, args)                  \
  template <class T>                                               \
  void name params {                                               \
    if (cpu_isa() >= CpuIsa::kAvx2) return isa_avx2::name<T> args; \
    return isa_baseline::name<T> args;                             \
  }
#else
#define TAPEFLOW_ISA_DISPATCH(name, params, args) \
  template <class T>                              \
  void name params {                              \
    return isa_baseline::name<T> args;            \
  }
#endif
