// Context: the MPI job this process belongs to (init/finalize, rank, size, local rank) and the
// collectives of data-parallel training — allreduce, broadcast, gradients averaged in fusion
// buffers with non-blocking MPI collectives. The counterpart of Horovod's hvd.* over Open MPI.
//
// Facts:    One Context per process (RAII: the constructor calls MPI_Init_thread asking for
//           MPI_THREAD_SERIALIZED, the destructor MPI_Finalize). Use it from the thread that made
//           it; with SERIALIZED a progress thread of its own advances gradient reductions while
//           the backward pass computes (Open MPI progresses non-blocking collectives only inside
//           MPI calls); with FUNNELED only they progress at each final gradient. A process
//           started without mpirun is a job of size 1. Collectives run on a private duplicate of
//           MPI_COMM_WORLD.
//           Every collective is non-blocking underneath and waited for with a deadline
//           (ContextOptions::timeout_seconds): if it does not complete in time, the rank asks the
//           other ranks where they are (ranks waiting in a collective answer; hung, busy or dead
//           ranks do not), prints "distribute: collective '<name>' (#<seq>) did not complete
//           within <t> s on rank <r>: rank 1 (<host>) did not answer (...); rank 2 (<host>) is in
//           '<other>' (#<seq>)" — and "no rank on host <host> answered (ranks 2, 3): is the host or
//           its link down?" for another machine none of whose ranks answered — to stderr and calls
//           MPI_Abort, so mpirun ends every rank with a non-zero status instead of hanging. A rank
//           that dies is caught by mpirun itself (it kills the job); so is a machine that goes away,
//           once mpirun's TCP connection to its daemon fails (Open MPI: "ORTE has lost communication
//           with a remote daemon ... on node <host>"; how soon depends on oob_tcp_keepalive_* and
//           the kernel's TCP retries: scripts/test_hosts.sh sets both so that it takes ~5 s).
//           Reductions: Open MPI's libnbc reduces each element once and sends the result back
//           (binomial tree below 4 ranks, ring or reduce-scatter + allgather above), so every rank
//           receives the same bits, and a fixed number of ranks reduces in a fixed order: runs are
//           deterministic at a fixed number of ranks and threads. Averages divide the sum by size().
//           Gradients (gradient(), DistributedGradientTape, DistributedOptimizer) are packed into
//           fusion buffers of about fusion_threshold_bytes in reverse variable order (the order the
//           backward pass finishes them), one buffer per dtype run; a buffer's reduction starts as
//           soon as every gradient in it is final — during the backward pass when the tape reports
//           final gradients (GradientOptions::on_gradient_final), else right after it. With
//           ContextOptions::shared_memory (the default), when every machine runs the same number
//           (> 1) of ranks, buffers are reduced through an MPI-3 shared-memory window per machine:
//           each of a machine's M ranks sums a 1/M slice of every buffer over the machine's copies
//           (in rank order, each element once) between two MPI_Ibarriers; with several machines
//           each slice's sum is then summed over the network among the ranks holding that slice
//           on every machine (Horovod's hierarchical allreduce), the same way as below. Every rank
//           gets the same bits.
//           Otherwise (uneven machines, one rank per machine) buffers are summed over the network
//           with an MPI_Ialltoall of 1/size of them to each rank, each rank's sum of its part, and
//           an MPI_Iallgather (a reduce-scatter + allgather; ContextOptions::compression can send
//           them as half).
//           The window costs 2 × the gradients' bytes per rank.
//           The first gradient reduction checks that every rank holds the same variables (count,
//           names, shapes, dtypes) and broadcasts rank 0's values of them (Horovod's
//           broadcast_global_variables at the first step), so ranks that started differently agree.
// Errors:   std::logic_error for a second Context in one process, or use after MPI_Finalize;
//           std::runtime_error if MPI_Init_thread fails or lacks MPI_THREAD_FUNNELED;
//           std::invalid_argument for a bad root, bad options, or variables that differ across
//           ranks ("... variable 3 differs: rank 0 has 'dense_1/kernel:0' [256, 10] float32, rank 1
//           has 'dense_1/kernel:0' [256, 12] float32"), thrown on every rank.
// Ref:      horovod/common/operations.cc (tensor fusion, stall check), horovod.tensorflow
//           (allreduce, broadcast_variables, DistributedGradientTape), MPI 3.1 §5.12.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/replica_context.h"
#include "tape/autodiff/gradient_tape.h"
#include "tape/core/tensor.h"
#include "tape/runtime/variable.h"

namespace tapeflow::distribute {

using models::ReduceOp;

namespace internal {
class Communicator;
class GradientReducer;
}  // namespace internal

// How float32 gradients travel over the network (Horovod's hvd.Compression): kNone as float32;
// kFp16 as IEEE half, half the bytes: every rank's gradient and each sum of them are rounded to
// half (round to nearest even; magnitudes >= 65520 become inf, below 2^-25 zero), summed in
// float32, so every rank still gets the same bits, within ~2^-11 relative of the float32 sum per
// rounding. Only where bytes cross the network: the network sum of every buffer when the ranks
// do not share machines, and the across-machines step of the hierarchical path; the
// shared-memory sum on a machine, float64 gradients and allreduce() stay exact.
// Ref: horovod/tensorflow/compression.py (FP16Compressor)
enum class Compression { kNone, kFp16 };

// Options of a Context (the MPI job's collectives): deadline, gradient fusion, overlap with the
// backward pass and the shared-memory reduction. Errors: Context's constructor throws
// std::invalid_argument for timeout_seconds <= 0, fusion_threshold_bytes < 1 or
// shared_memory_group < 0.
struct ContextOptions {
  // A collective not complete after this many seconds aborts the job (> 0).
  double timeout_seconds = 300.0;
  // Gradients are fused into buffers of about this size (one variable larger than it gets its own).
  std::int64_t fusion_threshold_bytes = 1 << 20;
  // Start each fusion buffer's reduction during the backward pass, as soon as its gradients are
  // final (false: all buffers start after the backward pass; for measuring what overlap hides).
  bool overlap_backward = true;
  // Reduce gradients through a shared-memory window per machine when every machine runs the same
  // number (> 1) of ranks (false: the network sum always). On 2 ranks of one machine a 1.08 MB
  // reduction costs about 40% of Open MPI's through its shared-memory transport (0.24 against
  // 0.61 ms; issue 16's notes).
  bool shared_memory = true;
  // Ranks per shared-memory group (0: all of a machine's ranks). A smaller value splits each
  // machine's ranks into groups of at most this many, reduced between each other as machines are:
  // the multi-machine path on one machine (tests), or smaller windows on machines with many ranks.
  int shared_memory_group = 0;
  // How gradients travel over the network (see Compression).
  Compression compression = Compression::kNone;
};

// Where the time of gradient reductions went (totals since construction or reset_timings()).
struct ReductionTimings {
  std::int64_t reductions = 0;       // gradient() / reduce_gradients() calls
  std::int64_t buffers = 0;          // fusion buffers reduced
  std::int64_t bytes = 0;            // bytes reduced per rank
  std::int64_t started_in_backward = 0;  // buffers whose reduction started before the backward pass ended
  double backward_seconds = 0;       // in tape.gradient (including the reductions started in it)
  double wait_seconds = 0;           // blocked after the backward pass until every buffer was reduced
  std::int64_t tensor_allreduces = 0;         // allreduce() calls that took the gradients' path
  std::int64_t tensor_allreduces_shared = 0;  // of those, through the shared-memory window
};

// True when this process was started by mpirun/mpiexec (Open MPI, MPICH, PMIx), i.e. when a
// Context would join a job instead of making a job of one. Apps create a Context only then.
bool launched_by_mpirun();

// This process's place in an MPI job and the job's collectives (allreduce, broadcast, gradients
// reduced in fusion buffers); the ReplicaContext that Model::fit uses for data-parallel training.
// See the file's notes above for the facts, errors and references. Ref: horovod.tensorflow (hvd.*)
class Context : public models::ReplicaContext {
 public:
  // Initialises MPI (argc/argv may be null). Errors: see above.
  Context(int* argc, char*** argv, ContextOptions options = {});
  // Initialises MPI without the program's arguments: Context(nullptr, nullptr, options).
  explicit Context(ContextOptions options = {}) : Context(nullptr, nullptr, options) {}
  // MPI_Finalize; during stack unwinding from an exception with size() > 1, MPI_Abort instead
  // (a finalize would wait for ranks that are waiting for this one).
  ~Context() override;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // This process's rank in the job, 0 <= rank() < size() (MPI_Comm_rank). Ref: hvd.rank()
  int rank() const override { return rank_; }
  // The number of processes in the job (1 when not started by mpirun). Ref: hvd.size()
  int size() const override { return size_; }
  // Rank among the processes on this machine (for pinning threads or devices). Ref: hvd.local_rank()
  int local_rank() const { return local_rank_; }
  // The number of this job's processes on this machine. Ref: hvd.local_size()
  int local_size() const { return local_size_; }
  // Rank r's host name (MPI_Get_processor_name, gathered when the Context is made): the machine,
  // as the timeout messages name it. Errors: std::invalid_argument unless 0 <= r < size().
  const std::string& host(int r) const;
  // The options in force (as given, changed by set_fusion, set_shared_memory and set_timeout).
  const ContextOptions& options() const { return options_; }

  // Element-wise reduction across ranks: average (default), sum, min or max. Every rank passes a
  // tensor of the same shape and dtype (float32, float64, int32, int64; average needs floating).
  // Shapes:  [...] -> [...]. Errors: std::invalid_argument for an unsupported dtype or average of
  //          integers; shapes that differ across ranks are not detected (as MPI).
  // Path:    average or sum of float32/float64 goes the gradients' way (a fusion buffer through the
  //          shared-memory window where the ranks share machines, its slices across machines by
  //          the network sum, never compressed: bit-identical on every rank); min, max and
  //          integers use MPI_Iallreduce.
  // Ref:     hvd.allreduce(tensor, op=hvd.Average)
  Tensor allreduce(const Tensor& tensor, ReduceOp op = ReduceOp::kAverage, const char* name = "allreduce");
  // Root's tensor on every rank (others pass a tensor of the same shape and dtype). Ref: hvd.broadcast
  Tensor broadcast(const Tensor& tensor, int root, const char* name = "broadcast");

  // ReplicaContext (used by Model::fit / evaluate).
  std::vector<std::optional<Tensor>> gradient(GradientTape& tape, const Tensor& target,
                                              const std::vector<Variable>& variables) override;
  // Reduces a few doubles in place across ranks (metrics, loss sums): op over every rank's values,
  // the same result on every rank; `what` names the collective in timeout messages. Collective.
  void all_reduce(std::span<double> values, ReduceOp op, const char* what) override;
  void broadcast(std::span<double> values, int root, const char* what) override;
  // Assigns root's value to every variable (any dtype), in one fused broadcast per dtype run.
  // Ref: hvd.broadcast_variables
  void broadcast_variables(const std::vector<Variable>& variables, int root) override;

  // Averages (or sums) gradients already computed (nullopt = no gradient on this rank: zeros).
  // What DistributedOptimizer uses; gradient() overlaps the same work with the backward pass.
  std::vector<std::optional<Tensor>> reduce_gradients(const std::vector<std::optional<Tensor>>& gradients,
                                                      const std::vector<Variable>& variables,
                                                      ReduceOp op = ReduceOp::kAverage);
  // tape.gradient(target, variables) with each fusion buffer reduced as soon as its gradients are final.
  std::vector<std::optional<Tensor>> gradient(GradientTape& tape, const Tensor& target,
                                              const std::vector<Variable>& variables, ReduceOp op);

  // Fails unless every rank holds the same variables (count, names, shapes, dtypes); the message
  // names the first difference and the ranks. Collective.
  void check_same_variables(const std::vector<Variable>& variables, const char* what);

  // Changes the fusion buffer size and the overlap with the backward pass (collective: call it at
  // the same point on every rank). Errors: std::invalid_argument for threshold_bytes < 1.
  void set_fusion(std::int64_t threshold_bytes, bool overlap_backward);

  // Switches the shared-memory reduction on or off (ContextOptions::shared_memory; collective: call
  // it at the same point on every rank).
  void set_shared_memory(bool on);
  // True when gradient reductions go through the shared-memory window: the option is on and the
  // ranks form shared-memory groups (machines, or ContextOptions::shared_memory_group) of one size > 1.
  bool uses_shared_memory() const;

  // Changes ContextOptions::compression (collective: call it at the same point on every rank).
  void set_compression(Compression compression);

  // Changes ContextOptions::timeout_seconds. Errors: std::invalid_argument unless seconds > 0.
  void set_timeout(double seconds);

  // Totals of the gradient reductions since construction or the last reset_timings().
  const ReductionTimings& timings() const { return timings_; }
  // Sets every total of timings() back to zero (this rank only; not collective).
  void reset_timings() { timings_ = {}; }

  // Ends the whole job now: prints "<message>" to stderr (prefixed with the rank) and calls
  // MPI_Abort(code), which makes mpirun stop every rank with a non-zero status.
  [[noreturn]] void abort(int code, const std::string& message) const;

 private:
  friend class internal::GradientReducer;
  std::vector<std::optional<Tensor>> reduce(GradientTape* tape, const Tensor* target,
                                            const std::vector<std::optional<Tensor>>* gradients,
                                            const std::vector<Variable>& variables, ReduceOp op);

  ContextOptions options_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::unique_ptr<internal::Communicator> comm_;
  std::unique_ptr<internal::GradientReducer> reducer_;
  // allreduce() of floating tensors by average or sum: the reducer's path with a layout of its own
  // (made at the first such call, collectively), and the variable standing for the last shape.
  std::unique_ptr<internal::GradientReducer> tensor_reducer_;
  Variable tensor_slot_;
  std::vector<std::vector<std::int64_t>> checked_;  // variable lists (handle ids) already checked
  ReductionTimings timings_;
};

}  // namespace tapeflow::distribute
