// Helpers of the MPI tests (run under mpirun; every test is collective: all ranks run it).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "distribute/context.h"

namespace tapeflow::distribute::testing {

// The job's context (made by mpi_main.cc).
Context& context();
// The machines the job was started on (mpi_main.cc's --hosts; 1 unless the test hosts are used).
int expected_hosts();

// FNV-1a over the bytes of `tensors`.
inline std::uint32_t hash_bytes(const std::vector<Tensor>& tensors) {
  std::uint32_t h = 2166136261u;
  for (const Tensor& t : tensors) {
    const auto* p = static_cast<const unsigned char*>(t.raw_data());
    for (std::size_t i = 0; i < t.nbytes(); ++i) h = (h ^ p[i]) * 16777619u;
  }
  return h;
}

// True on every rank iff `value` is the same on every rank.
inline bool same_on_every_rank(std::uint32_t value) {
  std::vector<double> lo{static_cast<double>(value)}, hi{static_cast<double>(value)};
  context().all_reduce(lo, ReduceOp::kMin, "test: same value (min)");
  context().all_reduce(hi, ReduceOp::kMax, "test: same value (max)");
  return lo[0] == hi[0];
}

}  // namespace tapeflow::distribute::testing
