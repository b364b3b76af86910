#include "tape/runtime/threads.h"

#include "tape/kernels/parallel.h"

namespace tapeflow {

int set_num_threads(int n) { return kernels::set_num_threads(n); }
int get_num_threads() { return kernels::num_threads(); }

}  // namespace tapeflow
