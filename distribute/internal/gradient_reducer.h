// GradientReducer: Horovod's tensor fusion — gradients packed into fusion buffers in reverse
// variable order, each buffer reduced as soon as all its gradients are in: over the network (an
// MPI_Ialltoall and an MPI_Iallgather, or between 2 ranks an exchange, below), or, when every rank
// runs on one machine, through an MPI-3 shared-memory window (not public API).
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>
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
// Network sum (every buffer when the ranks do not form shared-memory groups, and the
// across-groups step below): the n elements are cut into P parts of one padded length (P ranks of
// the communicator); an MPI_Ialltoall sends part r to rank r, each rank sums the P copies of its
// part in rank order (rank 0's + rank 1's + ..., as the shared-memory sum), and an
// MPI_Iallgather (in place) gives every rank every part's sum. Each element is summed once, by one
// rank, so every rank gets the same bits, and each rank sends and receives 2 (P - 1) / P of the
// buffer: a reduce-scatter + allgather. (MPI_Iallreduce of Open MPI 4.1's libnbc reduces an
// in-place buffer, or any buffer on fewer than 4 ranks, with a binomial tree: all of it to rank 0
// and all of it back, one direction at a time; 1.40 against 0.95-1.09 ms for W1's 1.08 MB between
// 2 test hosts, issue 33's notes.) The alltoalls and the allgathers run on two duplicates of the
// communicator, each issued in buffer order.
// The exchange (P = 2): a reduce-scatter + allgather moves the whole buffer each way, as a plain
// swap of the two copies does in one round instead of two. So 2 ranks swap (MPI_Irecv + MPI_Isend
// on the first duplicate, in pieces of at most 1 MiB, issued in buffer order) and each sums every
// element as rank 0's + rank 1's: the bits of the one summing rank above, on both (twice the sums,
// one round and its wait less: W1's comm-only between 2 test hosts takes about a third less, issue
// 33's notes). Each piece is summed as soon as it is in and, on the MPI path, converted, averaged
// and copied into the output tensors in the same pass.
// With compression (set_compression; float32 buffers only), the parts travel as IEEE half
// (tape/kernels/convert.h, round to nearest even): each rank's copy is rounded to half, summed in
// float32 and the sum rounded to half again, so every rank still gets the same bits, with half the
// bytes on the wire (Horovod's Compression.fp16).
//
// Progress: Open MPI advances a non-blocking collective only inside MPI calls. With
// MPI_THREAD_SERIALIZED (threaded = true) a progress thread tests the buffers in flight while the
// backward pass computes (50 us after a change, backing off to 1 ms while nothing moves), does the
// part sums and issues the allgathers, or the exchange's sums and copy-outs (the two threads take
// turns through a mutex; it sleeps on a condition variable when nothing is in flight, and is not
// woken for buffers that finish() starts); otherwise they progress only when a gradient is
// reported final.
//
// Shared memory (set_shared_memory(true), and the ranks form groups of one size > 1: see below):
// the buffers live in this rank's segment of an MPI_Win_allocate_shared window shared by its group.
// A complete buffer enters an MPI_Ibarrier; once every rank of the group is in, each rank sums
// its 1/N slice of the buffer over all segments (rank 0's + rank 1's + ..., a fixed order) in
// place into its own segment, then enters a second barrier; after it every rank copies each slice
// from its owner's segment. Each element is summed once, so every rank gets
// the same bits. The reduction is on this thread (set() and finish() progress it), not on a progress
// thread: on a node every rank's core is busy computing, and the sum is cheaper than MPI's copies
// through its shared-memory transport (a 1.08 MB reduction of 2 ranks: see the issue-16 notes).
// Steps alternate between two halves of the window, so a step's writes cannot overwrite what a
// slower rank still reads from the previous one: every rank has passed that step's barriers first.
// First and second barriers run on two duplicates of the node communicator, so each sees its
// barriers in buffer order on every rank (MPI matches collectives by order of issue).
// Several machines (Horovod's hierarchical allreduce): the ranks form groups, one per machine (or
// ContextOptions::shared_memory_group), all of the same size. Between the slice sum and the second
// barrier, slice r's sum is summed over the network (above) among the ranks that own slice r in
// every group, so each rank sends about 2/N of the buffer over the network instead of all of it.
// Groups of different sizes (or of one rank) use the network sum for everything.
class GradientReducer {
 public:
  // `shared_memory`: use the window when the ranks form shared-memory groups of one size > 1: the
  // ranks of each machine, or groups of at most `group_limit` of them when > 0 (collective).
  GradientReducer(Communicator& comm, bool threaded, bool shared_memory, int group_limit = 0);
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
  std::vector<std::optional<Tensor>> finish() { return finish({}); }
  // The same, with rest[i] as gradient i where it was not set yet (as set(i, *rest[i]); a gradient
  // not set and beyond rest or nullopt counts as absent), without waking the progress thread for
  // the buffers this starts (this thread progresses them right away).
  std::vector<std::optional<Tensor>> finish(const std::vector<std::optional<Tensor>>& rest);

  // Buffers of the current layout.
  std::size_t num_buffers() const { return buffers_.size(); }
  std::int64_t bytes() const;
  // Buffers started so far in this reduction.
  std::size_t started() const { return started_; }
  // Switches between the shared-memory window and the network sum (collective; takes effect at the
  // next begin()). The window is used only when the ranks form groups of one size > 1.
  void set_shared_memory(bool on) { shared_memory_ = on; }
  // Sends float32 buffers' network sums as half (see above; collective: takes effect at the next
  // begin()). float64 buffers and the shared-memory sum are never compressed.
  void set_compression(bool fp16) { compress_ = fp16; }
  // Tests only: this rank sleeps `delay` between the second barrier and its copy-out, as a slow
  // rank would (checks that faster ranks' next step cannot overwrite what it still reads).
  void set_copy_out_delay_for_testing(std::chrono::microseconds delay) { copy_out_delay_ = delay; }
  // True when the next reductions go through the shared-memory window.
  bool uses_shared_memory() const { return shared_memory_ && node_all_ != MPI_COMM_NULL; }

 private:
  struct Buffer {
    DType dtype;
    std::vector<std::size_t> vars;       // variable indices, in buffer order
    std::vector<std::int64_t> offsets;   // element offset of each variable's gradient
    std::int64_t elements = 0;           // gradients + flags
    std::vector<unsigned char> data;     // MPI path
    std::int64_t window_offset = 0;      // shared memory: byte offset in each rank's half-segment
    std::size_t missing = 0;             // gradients not yet set in this step
    MPI_Request request = MPI_REQUEST_NULL;
    bool started = false;
    int phase = 0;  // shared memory: 1 first barrier issued, 2 network sum across groups, 3 second barrier issued
    // The network sum of n elements at target (b.data, or this rank's slice in the window).
    unsigned char* target = nullptr;
    std::int64_t n = 0, part = 0;      // elements; elements of each rank's part (padded)
    bool half = false;                 // the parts travel as half (compression)
    bool prefilled = false;            // the MPI path, compressed: set() writes the halves to `wire`
    std::vector<unsigned char> wire;   // sent, then the gathered sums (target itself when possible)
    std::vector<unsigned char> inbox;  // the alltoall's P copies of this rank's part (exchange: the partner's copy)
    int net = 0;                       // 0 none, 1 alltoall (exchange) issued, 2 allgather issued, 3 done
    MPI_Comm gather = MPI_COMM_NULL;   // the allgather's communicator
    // The exchange (2 ranks): pieces of `piece` elements; requests 2j, 2j + 1 receive and send piece j.
    int rank = -1;                     // this rank in the exchange's communicator; -1: alltoall + allgather
    std::int64_t piece = 0, pieces = 0, done = 0;  // elements per piece; pieces; pieces summed (in order)
    std::vector<MPI_Request> requests;
    bool copied = false;               // the MPI path: every piece is in the output tensors already
  };
  // Network sum: starts the alltoall of b's n elements at target over `comm` (P ranks).
  void net_start(Buffer& b, unsigned char* target, std::int64_t n, MPI_Comm a2a, MPI_Comm gather);
  // Network sum, once b.request completed: sums this rank's part and issues the allgather (net 1),
  // or copies the sums to the target (net 2). True when the sum is done.
  bool net_advance(Buffer& b);
  unsigned char* wire(Buffer& b) { return b.wire.empty() ? b.target : b.wire.data(); }
  // The exchange: sends and receives every piece of b (net 1).
  void exchange_start(Buffer& b, MPI_Comm comm);
  // The exchange: sums (and on the MPI path copies out) the pieces that are in, in order; true when all are.
  bool exchange_advance(Buffer& b);
  // What b waits for next: its request, or the exchange's next piece.
  std::span<MPI_Request> waiting(Buffer& b);
  // f(from, to, dst) for each variable k of b with elements in [lo, hi): [from, to) those elements
  // (buffer positions), dst out[k]'s bytes at `from` (out[k] made where missing).
  template <class F>
  void each_output(const Buffer& b, std::int64_t lo, std::int64_t hi, std::vector<std::optional<Tensor>>& out, F&& f) const;
  // The MPI path: elements [lo, hi) of b's sums (halves in b.wire when compressed; else
  // b.data) divided by `divisor` into out's tensors of the variables there (made where missing).
  void copy_out(const Buffer& b, std::int64_t lo, std::int64_t hi, int divisor, std::vector<std::optional<Tensor>>& out) const;
  // The exchange, the MPI path compressed: elements [lo, hi) of the halves r0 (rank 0's) + r1
  // (element 0 of each at r0, r1) summed, rounded to half, converted and divided by `divisor` into
  // out's tensors (made where missing); the presence flags among them summed into b.wire.
  void sum_out_half(Buffer& b, const std::uint16_t* r0, const std::uint16_t* r1, std::int64_t lo, std::int64_t hi,
                    int divisor, std::vector<std::optional<Tensor>>& out);
  // The MPI path: out[k] reset for b's variables that no rank had (their summed flag is 0); made
  // (empty) for present ones without elements.
  void drop_absent(const Buffer& b, std::vector<std::optional<Tensor>>& out) const;
  // The MPI path: advances buffers' network sums, allgathers in buffer order; true when one moved.
  bool progress_net();
  void start(Buffer& b);
  void progress();
  void progress_loop();
  // This rank's bytes of buffer b in the current step (its own segment, or b.data).
  unsigned char* data(Buffer& b);
  // Shared memory: rank r's copy of buffer b in the current step.
  unsigned char* segment(int r, const Buffer& b) const;
  // Shared memory: elements [begin, end) of buffer b that rank r sums.
  std::pair<std::int64_t, std::int64_t> slice(const Buffer& b, int r) const;
  void sum_slice(Buffer& b);                // shared memory: this rank's slice over every segment
  void progress_shared();                   // shared memory: sums buffers whose first barrier is done
  void reserve_window(std::int64_t bytes);  // shared memory: (re)allocates the window (collective)
  void free_window();

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
  std::vector<std::optional<Tensor>> out_;  // the MPI path: the outputs, filled piece by piece (exchange)
  // Progress thread (threaded only): runs MPI_Test while active_; mu_ serialises MPI calls.
  bool threaded_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool active_ = false, stop_ = false;
  std::thread progress_;
  // Shared memory: group communicators (all null unless the groups have one size > 1), the window,
  // every rank's segment, the bytes of one half-segment, the half of this step.
  bool shared_memory_ = false;
  bool shared_step_ = false;  // this step (since begin) uses the window
  MPI_Comm node_all_ = MPI_COMM_NULL, node_first_ = MPI_COMM_NULL, node_second_ = MPI_COMM_NULL;
  // The network sums' alltoalls and allgathers: over every rank (the MPI path), or across groups
  // (the ranks of this one's position in every group, several groups).
  MPI_Comm net_first_ = MPI_COMM_NULL, net_second_ = MPI_COMM_NULL;
  MPI_Comm across_first_ = MPI_COMM_NULL, across_second_ = MPI_COMM_NULL;
  bool compress_ = false;
  std::size_t gathered_ = 0;  // the MPI path: buffers whose allgather is issued (in order)
  std::size_t issued_ = 0;    // the MPI path: buffers whose alltoall is issued (under mu_: the
                              // progress thread reads it; started_ is this thread's alone)
  int node_rank_ = 0, node_size_ = 1;
  MPI_Win window_ = MPI_WIN_NULL;
  std::vector<unsigned char*> segments_;
  std::int64_t half_bytes_ = 0;
  int half_ = 0;
  std::size_t summed_ = 0;  // buffers whose second barrier is issued (in order)
  std::chrono::microseconds copy_out_delay_{0};
};

}  // namespace tapeflow::distribute::internal
