// The number of threads tapeflow's kernels and jacobian loops may use (one oneTBB arena per process).
//
// Facts:    set_num_threads(n) caps the threads of every parallel kernel from now on, process-wide
//           (a tbb::global_control); 0 removes the cap (all cores). Results do not depend on the
//           thread count: reductions use fixed chunks, so any n repeats bit for bit.
//           get_num_threads() is the number kernels use now: min(cap, cores), at least 1; inside
//           an explicit tbb::task_arena the arena's concurrency replaces the core count.
// Errors:   set_num_threads: std::invalid_argument for n < 0 (names the value).
// Ref:      tf.config.threading.set_intra_op_parallelism_threads / get_intra_op_parallelism_threads
#pragma once

namespace tapeflow {

// Caps the threads used by kernels; 0 = no cap. Returns the previous cap (0 if none was set).
int set_num_threads(int n);
// The number of threads kernels may use now (>= 1).
int get_num_threads();

}  // namespace tapeflow
