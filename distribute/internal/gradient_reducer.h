// GradientReducer: Horovod's tensor fusion — gradients packed into fusion buffers in reverse
// variable order, each buffer reduced with MPI_Iallreduce as soon as all its gradients are in
// (not public API).
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "distribute/internal/communicator.h"
#include "models/replica_context.h"
#include "tape/core/tensor.h"
#include "tape/runtime/variable.h"

namespace tapeflow::distribute::internal {

// Layout: buffers hold consecutive variables (walking the list from the last variable to the
// first) of one dtype, up to about `threshold` bytes (a larger variable gets a buffer of its own).
// Each buffer is [every gradient flattened..., one presence flag per variable]: the flag is 1 where
// this rank had a gradient (absent gradients are zeros), so after the sum a variable without a
// gradient on every rank stays without one, and one missing on some ranks only counts as zeros.
//
// Progress: Open MPI advances a non-blocking collective only inside MPI calls. With
// MPI_THREAD_SERIALIZED (threaded = true) a progress thread calls MPI_Test on the buffers in
// flight every ~50 us while the backward pass computes (the two threads take turns through a
// mutex; it sleeps on a condition variable when nothing is in flight); otherwise they progress
// only when a gradient is reported final.
class GradientReducer {
 public:
  GradientReducer(Communicator& comm, bool threaded);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Starts a reduction of gradients for `variables` (the layout is kept while the list is the same).
  // Errors: std::invalid_argument for an op other than kAverage/kSum or a non-floating variable.
  void begin(const std::vector<Variable>& variables, models::ReduceOp op, std::int64_t threshold);
  // Gradient i is final (undefined: none on this rank). Copies it into its buffer and starts the
  // buffer's reduction when it is complete; progresses the reductions in flight.
  // Errors: std::invalid_argument for a shape or dtype that differs from the variable's.
  void set(std::size_t i, const Tensor& gradient);
  bool is_set(std::size_t i) const { return set_[i] != 0; }
  // Starts what is left (gradients never set count as absent), waits, returns the reduced gradients.
  std::vector<std::optional<Tensor>> finish();

  // Buffers of the current layout.
  std::size_t num_buffers() const { return buffers_.size(); }
  std::int64_t bytes() const;
  // Buffers started so far in this reduction.
  std::size_t started() const { return started_; }

 private:
  struct Buffer {
    DType dtype;
    std::vector<std::size_t> vars;       // variable indices, in buffer order
    std::vector<std::int64_t> offsets;   // element offset of each variable's gradient
    std::int64_t elements = 0;           // gradients + flags
    std::vector<unsigned char> data;
    std::size_t missing = 0;             // gradients not yet set in this step
    MPI_Request request = MPI_REQUEST_NULL;
    bool started = false;
  };
  void start(Buffer& b);
  void progress();
  void progress_loop();

  Communicator& comm_;
  std::vector<std::int64_t> ids_;  // handle ids of the layout's variables
  std::vector<Shape> shapes_;
  std::vector<DType> dtypes_;
  std::int64_t threshold_ = 0;
  models::ReduceOp op_ = models::ReduceOp::kAverage;
  std::vector<Buffer> buffers_;
  std::vector<std::size_t> buffer_of_;  // variable -> buffer
  std::vector<std::size_t> slot_of_;    // variable -> position in its buffer
  std::vector<char> set_;
  std::size_t started_ = 0;
  bool finishing_ = false;
  // Progress thread (threaded only): runs MPI_Test while active_; mu_ serialises MPI calls.
  bool threaded_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool active_ = false, stop_ = false;
  std::thread progress_;
};

}  // namespace tapeflow::distribute::internal
