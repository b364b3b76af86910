#include "distribute/internal/gradient_reducer.h"

#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#ifdef TAPEFLOW_DISTRIBUTE_TRACE
#include <cstdio>
#include <map>
#include <tuple>
#endif

#include "distribute/internal/mpi_types.h"
#include "distribute/internal/scale.h"
#include "tape/kernels/convert.h"

namespace tapeflow::distribute::internal {
namespace {

// dst[i] = srcs[0][i] + srcs[1][i] + ... (left to right; dst may be one of the sources). Blocks of
// kBlock elements are summed in a local array first: writing dst while later sources are still to
// be read would change a source that dst aliases.
template <class T>
void sum_into(const std::vector<const unsigned char*>& srcs, std::int64_t n, unsigned char* dst) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  constexpr std::int64_t kBlock = 1024;
  Eigen::Array<T, kBlock, 1> acc;
  for (std::int64_t at = 0; at < n; at += kBlock) {
    const std::int64_t m = std::min(kBlock, n - at);
    auto in = [&](std::size_t r) { return Eigen::Map<const Array>(reinterpret_cast<const T*>(srcs[r]) + at, m); };
    auto block = acc.head(m);
    block = in(0) + in(1);
    for (std::size_t r = 2; r < srcs.size(); ++r) block += in(r);
    Eigen::Map<Array>(reinterpret_cast<T*>(dst) + at, m) = block;
  }
}

// out[0, n) = the sum over r < p of the half values parts[r][i] (in float32, left to right), rounded
// to half: the compressed network sum of one rank's part. out may be one of the parts (blocks of
// kBlock are read before they are written).
void sum_half_parts(const std::uint16_t* const* parts, int p, std::int64_t n, std::uint16_t* out) {
  constexpr std::int64_t kBlock = 1024;
  float acc[kBlock], x[kBlock];
  for (std::int64_t at = 0; at < n; at += kBlock) {
    const std::int64_t m = std::min(kBlock, n - at);
    kernels::half_to_float(parts[0] + at, acc, m);
    for (int r = 1; r < p; ++r) {
      kernels::half_to_float(parts[r] + at, x, m);
      for (std::int64_t i = 0; i < m; ++i) acc[i] += x[i];
    }
    kernels::float_to_half(acc, out + at, m);
  }
}

// The exchange's pieces (2 ranks): at most this many bytes per message. A piece is summed (and
// copied out) while the later ones are on the wire; but every message costs, and Open MPI's TCP
// transport copies the eager ones (up to 64 KiB) once more on arrival: W1's comm-only between 2
// test hosts took longer with pieces of 32, 128 and 256 KiB than with one message per buffer
// (issue 33's notes), so pieces only cut buffers larger than this.
constexpr std::int64_t kPieceBytes = 1 << 20;
constexpr int kExchangeTag = 33;

#ifdef TAPEFLOW_DISTRIBUTE_TRACE
// Profiling only (cmake -DTAPEFLOW_DISTRIBUTE_TRACE=ON; never in a normal build): microseconds
// since begin() of each event of a step, their medians over steps printed per rank at destruction.
struct Trace {
  std::chrono::steady_clock::time_point t0;
  std::map<std::string, std::vector<double>> at;
  std::map<std::string, double> step;  // this step's first time of each event
  int steps = 0;
};
std::mutex g_trace_mu;
std::map<const void*, Trace> g_traces;
void trace_begin(const void* r) {
  std::lock_guard<std::mutex> lock(g_trace_mu);
  Trace& t = g_traces[r];
  for (auto& [k, v] : t.step) t.at[k].push_back(v);
  t.step.clear();
  t.t0 = std::chrono::steady_clock::now();
  ++t.steps;
}
void trace(const void* r, const std::string& what, bool last = false) {
  std::lock_guard<std::mutex> lock(g_trace_mu);
  Trace& t = g_traces[r];
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t.t0).count();
  if (last) t.step[what] = us;
  else t.step.try_emplace(what, us);
}
void trace_print(const void* r, int rank) {
  std::lock_guard<std::mutex> lock(g_trace_mu);
  Trace& t = g_traces[r];
  std::vector<std::tuple<double, double, double, std::string>> rows;
  for (auto& [k, v] : t.at) {
    std::sort(v.begin(), v.end());
    rows.emplace_back(v[v.size() / 2], v[v.size() / 10], v[v.size() * 9 / 10], k + " (" + std::to_string(v.size()) + ")");
  }
  std::sort(rows.begin(), rows.end());
  std::string out = "trace rank " + std::to_string(rank) + ", " + std::to_string(t.steps) + " steps: us since begin (median, p10, p90)\n";
  for (const auto& [m, lo, hi, k] : rows) {
    char line[256];
    std::snprintf(line, sizeof line, "  r%d %8.1f %8.1f %8.1f  %s\n", rank, m, lo, hi, k.c_str());
    out += line;
  }
  std::fputs(out.c_str(), stderr);
  g_traces.erase(r);
}
#define TF_TRACE(what) trace(this, std::string(shared_step_ ? "shm " : "net ") + (what))
#define TF_TRACE_LAST(what) trace(this, std::string(shared_step_ ? "shm " : "net ") + (what), true)
#define TF_TRACE_B(b, what)                                                                                \
  do {                                                                                                        \
    char name_[96];                                                                                           \
    std::snprintf(name_, sizeof name_, "%s b%d %s%s", shared_step_ ? "shm" : "net",                          \
                  static_cast<int>(&(b) - buffers_.data()), what,                                             \
                  std::this_thread::get_id() == progress_.get_id() ? " [progress thread]" : "");              \
    trace(this, name_);                                                                                       \
  } while (0)
#else
#define TF_TRACE(what) ((void)0)
#define TF_TRACE_LAST(what) ((void)0)
#define TF_TRACE_B(b, what) ((void)0)
#endif

constexpr std::int64_t kAlign = 64;  // bytes: buffers and slices start on their own cache lines

std::int64_t round_up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

// Elements of each of the p parts of an n-element network sum whose elements travel as wsize
// bytes: parts start on their own cache lines.
std::int64_t net_part(std::int64_t n, std::int64_t p, std::int64_t wsize) {
  return round_up(std::max<std::int64_t>((n + p - 1) / p, 1), kAlign / wsize);
}

}  // namespace

GradientReducer::GradientReducer(Communicator& comm, bool threaded, bool shared_memory, int group_limit)
    : comm_(comm), threaded_(threaded), shared_memory_(shared_memory) {
  if (comm_.size() > 1) {
    for (MPI_Comm* c : {&net_first_, &net_second_}) {
      Communicator::check(MPI_Comm_dup(comm_.comm(), c), "MPI_Comm_dup");
      MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
    }
    // Groups: the ranks of one machine (MPI_COMM_TYPE_SHARED), split further into groups of at
    // most group_limit (> 0). Every group must have the same size, so that the slices of a buffer
    // line up across groups; otherwise (or with groups of one) reductions take the network sum.
    MPI_Comm node = MPI_COMM_NULL;
    Communicator::check(MPI_Comm_split_type(comm_.comm(), MPI_COMM_TYPE_SHARED, comm_.rank(), MPI_INFO_NULL, &node),
                        "MPI_Comm_split_type");
    if (group_limit > 0) {
      int node_rank = 0;
      MPI_Comm_rank(node, &node_rank);
      MPI_Comm group = MPI_COMM_NULL;
      Communicator::check(MPI_Comm_split(node, node_rank / group_limit, node_rank, &group), "MPI_Comm_split");
      MPI_Comm_free(&node);
      node = group;
    }
    MPI_Comm_size(node, &node_size_);
    MPI_Comm_rank(node, &node_rank_);
    int sizes[2] = {-node_size_, node_size_};  // -min, max
    Communicator::check(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, comm_.comm()), "MPI_Allreduce");
    if (-sizes[0] == sizes[1] && node_size_ > 1) {
      node_all_ = node;
      Communicator::check(MPI_Comm_dup(node_all_, &node_first_), "MPI_Comm_dup");
      Communicator::check(MPI_Comm_dup(node_all_, &node_second_), "MPI_Comm_dup");
      for (MPI_Comm c : {node_all_, node_first_, node_second_}) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
      if (node_size_ < comm_.size()) {  // several groups: slice r of every group reduced among them
        Communicator::check(MPI_Comm_split(comm_.comm(), node_rank_, comm_.rank(), &across_first_), "MPI_Comm_split");
        Communicator::check(MPI_Comm_dup(across_first_, &across_second_), "MPI_Comm_dup");
        for (MPI_Comm c : {across_first_, across_second_}) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
      }
    } else {
      MPI_Comm_free(&node);
      node_size_ = 1;
      node_rank_ = 0;
    }
  }
  if (threaded_) progress_ = std::thread([this] { progress_loop(); });
}

GradientReducer::~GradientReducer() {
#ifdef TAPEFLOW_DISTRIBUTE_TRACE
  trace_begin(this);  // the last step's events
  trace_print(this, comm_.rank());
#endif
  if (progress_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    progress_.join();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  free_window();
  for (MPI_Comm* c : {&node_all_, &node_first_, &node_second_, &across_first_, &across_second_, &net_first_, &net_second_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

void GradientReducer::free_window() {
  if (window_ == MPI_WIN_NULL) return;
  MPI_Win_unlock_all(window_);
  MPI_Win_free(&window_);
  segments_.clear();
  half_bytes_ = 0;
}

void GradientReducer::reserve_window(std::int64_t bytes) {
  if (bytes <= half_bytes_) return;
  // Every rank gets here in the same begin() (the layout is the same everywhere). A barrier with
  // the deadline first: a missing rank is then reported instead of hanging in the window calls.
  MPI_Request r = MPI_REQUEST_NULL;
  Communicator::check(MPI_Ibarrier(node_all_, &r), "MPI_Ibarrier (shared-memory window)");
  comm_.wait(r);
  free_window();
  const std::int64_t half = round_up(bytes, 4096);
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");  // each segment near its own rank's memory
  void* base = nullptr;
  const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(2 * half), 1, info, node_all_, &base, &window_);
  MPI_Info_free(&info);
  Communicator::check(rc, "MPI_Win_allocate_shared (" + std::to_string(2 * half) +
                              " bytes: the shared-memory gradient reduction needs twice the gradients' bytes of "
                              "shared memory per rank, /dev/shm in containers; ContextOptions::shared_memory = false, "
                              "or the apps' --no-shared-memory, reduces over the network instead)");
  MPI_Win_set_errhandler(window_, MPI_ERRORS_RETURN);
  // A passive-target epoch for the whole life of the window, so that MPI_Win_sync orders the
  // plain loads and stores around the barriers (MPI 3.1 §11.5.5, the separate-model recipe).
  Communicator::check(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_), "MPI_Win_lock_all");
  segments_.assign(static_cast<std::size_t>(node_size_), nullptr);
  for (int q = 0; q < node_size_; ++q) {
    MPI_Aint size = 0;
    int disp = 0;
    void* p = nullptr;
    Communicator::check(MPI_Win_shared_query(window_, q, &size, &disp, &p), "MPI_Win_shared_query");
    segments_[static_cast<std::size_t>(q)] = static_cast<unsigned char*>(p);
  }
  half_bytes_ = half;
}

unsigned char* GradientReducer::data(Buffer& b) {
  return shared_step_ ? segment(node_rank_, b) : b.data.data();
}

unsigned char* GradientReducer::segment(int r, const Buffer& b) const {
  return segments_[static_cast<std::size_t>(r)] + half_ * half_bytes_ + b.window_offset;
}

std::pair<std::int64_t, std::int64_t> GradientReducer::slice(const Buffer& b, int r) const {
  const std::int64_t per_line = kAlign / static_cast<std::int64_t>(dtype_size(b.dtype));
  const std::int64_t chunk = round_up((b.elements + node_size_ - 1) / node_size_, per_line);
  return {std::min(b.elements, r * chunk), std::min(b.elements, (r + 1) * chunk)};
}

void GradientReducer::sum_slice(Buffer& b) {
  const auto [lo, hi] = slice(b, node_rank_);
  if (lo >= hi) return;
  const std::size_t esize = dtype_size(b.dtype);
  std::vector<const unsigned char*> srcs;
  for (int q = 0; q < node_size_; ++q) srcs.push_back(segment(q, b) + static_cast<std::size_t>(lo) * esize);
  unsigned char* dst = segment(node_rank_, b) + static_cast<std::size_t>(lo) * esize;
  if (b.dtype == DType::kFloat32) sum_into<float>(srcs, hi - lo, dst);
  else sum_into<double>(srcs, hi - lo, dst);
}

void GradientReducer::progress_shared() {
  // In buffer order: each communicator must see its collectives in the same order on every rank.
  while (summed_ < buffers_.size()) {
    Buffer& b = buffers_[summed_];
    if (!b.started || !comm_.test_all(waiting(b))) return;
    if (b.phase == 1) {  // every rank of the group has written b (first barrier)
      TF_TRACE_B(b, "barrier 1 done seen");
      MPI_Win_sync(window_);
      sum_slice(b);
      TF_TRACE_B(b, "slice summed");
      if (across_first_ != MPI_COMM_NULL) {  // this slice's sum over the groups, in place
        const auto [lo, hi] = slice(b, node_rank_);
        net_start(b, segment(node_rank_, b) + static_cast<std::size_t>(lo) * dtype_size(b.dtype), hi - lo,
                  across_first_, across_second_);
        b.phase = 2;
        continue;
      }
    } else if (b.phase == 2 && !net_advance(b)) {
      continue;  // the allgather is issued: wait for it
    }
    MPI_Win_sync(window_);  // the slice's sum is written before the second barrier
    Communicator::check(MPI_Ibarrier(node_second_, &b.request), "MPI_Ibarrier (gradients, shared memory)");
    TF_TRACE_B(b, "barrier 2 issued");
    b.phase = 3;
    ++summed_;
  }
}

void GradientReducer::net_start(Buffer& b, unsigned char* target, std::int64_t n, MPI_Comm a2a, MPI_Comm gather) {
  int p = 1;
  MPI_Comm_size(a2a, &p);
  const std::size_t esize = dtype_size(b.dtype);
  // A prefilled buffer holds halves already (set_compression changed since begin() or not).
  b.half = b.prefilled || (compress_ && b.dtype == DType::kFloat32);
  const std::size_t wsize = b.half ? sizeof(std::uint16_t) : esize;
  b.part = net_part(n, p, static_cast<std::int64_t>(wsize));
  b.target = target;
  b.n = n;
  b.gather = gather;
  if (p == 2) {  // the exchange (see the header)
    if (b.prefilled && target == b.data.data()) {
      // set() wrote the halves
    } else if (b.half) {
      b.wire.resize(static_cast<std::size_t>(n) * wsize);
      kernels::float_to_half(reinterpret_cast<const float*>(target), reinterpret_cast<std::uint16_t*>(b.wire.data()), n);
    } else {
      b.wire.clear();  // target itself is sent, and summed into piece by piece once a piece is sent
    }
    exchange_start(b, a2a);
    return;
  }
  b.rank = -1;
  const std::size_t wire_bytes = static_cast<std::size_t>(p * b.part) * wsize;
  b.inbox.resize(wire_bytes);
  if (b.prefilled && target == b.data.data()) {
    // set() wrote the halves (the padding stays zeros: summed, never read)
  } else if (b.half) {
    b.wire.resize(wire_bytes);  // new bytes are zeros: the padding is summed, never read
    kernels::float_to_half(reinterpret_cast<const float*>(target), reinterpret_cast<std::uint16_t*>(b.wire.data()), n);
  } else if (target == b.data.data() && b.data.size() >= wire_bytes) {
    b.wire.clear();  // the MPI path's own buffer, padded (begin): sent and gathered in place
  } else {
    b.wire.resize(wire_bytes);
    std::memcpy(b.wire.data(), target, static_cast<std::size_t>(n) * esize);
  }
  const MPI_Datatype type = b.half ? MPI_UINT16_T : mpi_type(b.dtype);
  TF_TRACE_B(b, "a2a call");
  Communicator::check(MPI_Ialltoall(wire(b), static_cast<int>(b.part), type, b.inbox.data(), static_cast<int>(b.part),
                                    type, a2a, &b.request),
                      "MPI_Ialltoall (gradients)");
  TF_TRACE_B(b, "a2a issued");
  b.net = 1;
}

void GradientReducer::exchange_start(Buffer& b, MPI_Comm comm) {
  MPI_Comm_rank(comm, &b.rank);
  const std::int64_t wsize = b.half ? 2 : static_cast<std::int64_t>(dtype_size(b.dtype));
  b.piece = std::max<std::int64_t>(kPieceBytes / wsize, 1);
  b.pieces = (b.n + b.piece - 1) / b.piece;
  b.done = 0;
  b.inbox.resize(static_cast<std::size_t>(b.n * wsize));
  b.requests.assign(static_cast<std::size_t>(2 * b.pieces), MPI_REQUEST_NULL);
  const MPI_Datatype type = b.half ? MPI_UINT16_T : mpi_type(b.dtype);
  const int partner = 1 - b.rank;
  TF_TRACE_B(b, "exchange call");
  // Every receive first, so that the partner's pieces land in place (not in MPI's unexpected queue).
  for (std::int64_t j = 0; j < b.pieces; ++j) {
    const std::int64_t lo = j * b.piece, m = std::min(b.piece, b.n - lo);
    Communicator::check(MPI_Irecv(b.inbox.data() + lo * wsize, static_cast<int>(m), type, partner, kExchangeTag, comm,
                                  &b.requests[static_cast<std::size_t>(2 * j)]),
                        "MPI_Irecv (gradients)");
  }
  unsigned char* mine = wire(b);
  for (std::int64_t j = 0; j < b.pieces; ++j) {
    const std::int64_t lo = j * b.piece, m = std::min(b.piece, b.n - lo);
    Communicator::check(MPI_Isend(mine + lo * wsize, static_cast<int>(m), type, partner, kExchangeTag, comm,
                                  &b.requests[static_cast<std::size_t>(2 * j + 1)]),
                        "MPI_Isend (gradients)");
  }
  TF_TRACE_B(b, "exchange issued");
  b.net = 1;
}

bool GradientReducer::exchange_advance(Buffer& b) {
  const std::int64_t wsize = b.half ? 2 : static_cast<std::int64_t>(dtype_size(b.dtype));
  const bool mpi_path = b.target == b.data.data();
  const int divisor = op_ == models::ReduceOp::kAverage ? comm_.size() : 1;
  while (b.done < b.pieces) {
    // Both the partner's piece and ours: the sum overwrites what we sent.
    if (!comm_.test_all(std::span<MPI_Request>(&b.requests[static_cast<std::size_t>(2 * b.done)], 2))) return false;
    if (b.done == 0) TF_TRACE_B(b, "first piece in");
    const std::int64_t lo = b.done * b.piece, m = std::min(b.piece, b.n - lo);
    unsigned char* mine = wire(b) + lo * wsize;
    const unsigned char* theirs = b.inbox.data() + lo * wsize;
    const unsigned char* first = b.rank == 0 ? mine : theirs;  // rank 0's + rank 1's
    const unsigned char* second = b.rank == 0 ? theirs : mine;
    if (b.half && mpi_path) {  // summed, rounded, converted and averaged into the outputs in one pass
      sum_out_half(b, reinterpret_cast<const std::uint16_t*>(first) - lo, reinterpret_cast<const std::uint16_t*>(second) - lo,
                   lo, lo + m, divisor, out_);
      ++b.done;
      continue;
    }
    if (b.half) {
      const std::uint16_t* parts[2] = {reinterpret_cast<const std::uint16_t*>(first),
                                       reinterpret_cast<const std::uint16_t*>(second)};
      sum_half_parts(parts, 2, m, reinterpret_cast<std::uint16_t*>(mine));
      if (!mpi_path)
        kernels::half_to_float(reinterpret_cast<const std::uint16_t*>(mine), reinterpret_cast<float*>(b.target) + lo, m);
    } else {
      const std::vector<const unsigned char*> parts{first, second};
      if (b.dtype == DType::kFloat32) sum_into<float>(parts, m, mine);
      else sum_into<double>(parts, m, mine);
    }
    if (mpi_path) copy_out(b, lo, lo + m, divisor, out_);
    ++b.done;
  }
  TF_TRACE_B(b, "exchange summed");
  b.copied = mpi_path;
  b.net = 3;
  return true;
}

std::span<MPI_Request> GradientReducer::waiting(Buffer& b) {
  if (b.rank >= 0 && b.net == 1 && b.done < b.pieces)
    return std::span<MPI_Request>(&b.requests[static_cast<std::size_t>(2 * b.done)], 2);
  return std::span<MPI_Request>(&b.request, 1);
}

bool GradientReducer::net_advance(Buffer& b) {
  if (b.rank >= 0) return b.net == 3 || exchange_advance(b);
  if (b.net == 1) {  // this rank's part, summed over the P copies in rank order
    TF_TRACE_B(b, "a2a done seen");
    int p = 1, q = 0;
    MPI_Comm_size(b.gather, &p);
    MPI_Comm_rank(b.gather, &q);
    const std::size_t wsize = b.half ? sizeof(std::uint16_t) : dtype_size(b.dtype);
    unsigned char* mine = wire(b) + static_cast<std::size_t>(q * b.part) * wsize;
    if (b.half) {
      std::vector<const std::uint16_t*> parts;
      for (int r = 0; r < p; ++r) parts.push_back(reinterpret_cast<const std::uint16_t*>(b.inbox.data()) + r * b.part);
      sum_half_parts(parts.data(), p, b.part, reinterpret_cast<std::uint16_t*>(mine));
    } else {
      std::vector<const unsigned char*> parts;
      for (int r = 0; r < p; ++r) parts.push_back(b.inbox.data() + static_cast<std::size_t>(r * b.part) * wsize);
      if (p == 1) std::memcpy(mine, parts[0], static_cast<std::size_t>(b.part) * wsize);
      else if (b.dtype == DType::kFloat32) sum_into<float>(parts, b.part, mine);
      else sum_into<double>(parts, b.part, mine);
    }
    const MPI_Datatype type = b.half ? MPI_UINT16_T : mpi_type(b.dtype);
    TF_TRACE_B(b, "part summed");
    Communicator::check(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, wire(b), static_cast<int>(b.part), type,
                                       b.gather, &b.request),
                        "MPI_Iallgather (gradients)");
    TF_TRACE_B(b, "allgather issued");
    b.net = 2;
    return false;
  }
  if (b.net == 2) {  // every part's sum is here
    TF_TRACE_B(b, "allgather done seen");
    if (b.half && b.target == b.data.data()) {
      // the MPI path: finish() converts the halves straight into the output tensors (one pass less)
    } else if (b.half)
      kernels::half_to_float(reinterpret_cast<const std::uint16_t*>(b.wire.data()), reinterpret_cast<float*>(b.target), b.n);
    else if (!b.wire.empty())
      std::memcpy(b.target, b.wire.data(), static_cast<std::size_t>(b.n) * dtype_size(b.dtype));
    b.net = 3;
    TF_TRACE_B(b, "net done");
  }
  return b.net == 3;
}

bool GradientReducer::progress_net() {
  bool moved = false;
  for (std::size_t k = 0; k < issued_; ++k) {  // exchanges: each buffer's pieces in order
    Buffer& b = buffers_[k];
    if (b.rank < 0 || b.net != 1) continue;
    const std::int64_t before = b.done;
    exchange_advance(b);
    moved = moved || b.done != before;
  }
  // Allgathers in buffer order (each communicator sees its collectives in one order everywhere).
  while (gathered_ < issued_) {
    Buffer& b = buffers_[gathered_];
    if (b.rank >= 0) {  // an exchange: no allgather
      ++gathered_;
      continue;
    }
    if (b.net != 1 || !comm_.test_all(std::span<MPI_Request>(&b.request, 1))) break;
    net_advance(b);
    ++gathered_;
    moved = true;
  }
  for (std::size_t k = 0; k < gathered_; ++k) {
    Buffer& b = buffers_[k];
    if (b.rank < 0 && b.net == 2 && comm_.test_all(std::span<MPI_Request>(&b.request, 1))) {
      net_advance(b);
      moved = true;
    }
  }
  return moved;
}

void GradientReducer::progress_loop() {
  // The pause between tests doubles from kFirstPause up to kLongestPause while nothing moves, and
  // starts again at kFirstPause when a buffer was started or advanced: every wakeup takes a core
  // from the compute threads when they use all of them (W1 over TCP on 2 cores: polling every
  // 50 us cost ~0.7 ms of CPU per 5 ms step; issue 33's notes).
  constexpr std::chrono::microseconds kFirstPause{50}, kLongestPause{1000};
  std::chrono::microseconds pause = kFirstPause;
  std::size_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || active_; });
    if (stop_) return;
    const bool moved = progress_net() || issued_ != seen;
    seen = issued_;
    pause = moved ? kFirstPause : std::min(2 * pause, kLongestPause);
    lock.unlock();
    std::this_thread::sleep_for(pause);
    lock.lock();
  }
}

void GradientReducer::begin(const std::vector<Variable>& variables, models::ReduceOp op, std::int64_t threshold) {
  if (op != models::ReduceOp::kAverage && op != models::ReduceOp::kSum)
    throw std::invalid_argument("distribute: gradients are reduced by average or sum only");
  bool same = variables.size() == ids_.size() && threshold == threshold_;
  for (std::size_t i = 0; same && i < variables.size(); ++i)
    same = variables[i].handle_id() == ids_[i] && variables[i].shape() == shapes_[i] &&
           variables[i].dtype() == dtypes_[i];
#ifdef TAPEFLOW_DISTRIBUTE_TRACE
  trace_begin(this);
#endif
  op_ = op;
  finishing_ = false;
  started_ = 0;
  issued_ = 0;
  summed_ = 0;
  gathered_ = 0;
  shared_step_ = uses_shared_memory();
  set_.assign(variables.size(), 0);
  out_.assign(variables.size(), std::nullopt);
  if (!same) {  // a new layout: walk the variables from the last one (the backward pass's order)
    ids_.clear();
    shapes_.clear();
    dtypes_.clear();
    buffers_.clear();
    threshold_ = threshold;
    buffer_of_.assign(variables.size(), 0);
    slot_of_.assign(variables.size(), 0);
    for (const Variable& v : variables) {
      if (!is_floating(v.dtype()))
        throw std::invalid_argument("distribute: cannot reduce gradients of variable '" + v.name() + "' of dtype " +
                                    dtype_name(v.dtype()));
      ids_.push_back(v.handle_id());
      shapes_.push_back(v.shape());
      dtypes_.push_back(v.dtype());
    }
    std::int64_t bytes_in_last = 0;
    for (std::size_t k = variables.size(); k-- > 0;) {
      const std::int64_t bytes = shapes_[k].num_elements() * static_cast<std::int64_t>(dtype_size(dtypes_[k]));
      if (buffers_.empty() || buffers_.back().dtype != dtypes_[k] ||
          (bytes_in_last > 0 && bytes_in_last + bytes > threshold)) {
        buffers_.push_back(Buffer{.dtype = dtypes_[k]});
        bytes_in_last = 0;
      }
      Buffer& b = buffers_.back();
      buffer_of_[k] = buffers_.size() - 1;
      slot_of_[k] = b.vars.size();
      b.vars.push_back(k);
      b.offsets.push_back(b.elements);
      b.elements += shapes_[k].num_elements();
      bytes_in_last += bytes;
    }
    for (Buffer& b : buffers_) b.elements += static_cast<std::int64_t>(b.vars.size());  // presence flags
  }
  std::int64_t window_bytes = 0;
  for (Buffer& b : buffers_) {
    const std::int64_t nbytes = b.elements * static_cast<std::int64_t>(dtype_size(b.dtype));
    if (shared_step_) {
      b.window_offset = window_bytes;
      window_bytes += round_up(nbytes, kAlign);
    } else {  // padded to P equal parts of cache lines (the network sum's layout, in place)
      const std::int64_t p = comm_.size();
      const std::int64_t part = net_part(b.elements, p, static_cast<std::int64_t>(dtype_size(b.dtype)));
      b.data.resize(static_cast<std::size_t>(p * part) * dtype_size(b.dtype));
    }
    // The MPI path, compressed: set() writes the half copies straight into the wire (net_start's layout).
    b.prefilled = !shared_step_ && compress_ && b.dtype == DType::kFloat32;
    if (b.prefilled) {
      const std::int64_t p = comm_.size();
      b.wire.resize(static_cast<std::size_t>(p * net_part(b.elements, p, 2)) * 2);
    }
    b.missing = b.vars.size();
    b.started = false;
    b.phase = 0;
    b.net = 0;
    b.copied = false;
    b.rank = -1;
    b.done = b.pieces = 0;
    b.request = MPI_REQUEST_NULL;
  }
  if (shared_step_) {
    reserve_window(window_bytes);
    half_ ^= 1;  // the other half from the previous step's (see the header)
  }
}

std::int64_t GradientReducer::bytes() const {
  std::int64_t n = 0;
  for (const Buffer& b : buffers_) n += b.elements * static_cast<std::int64_t>(dtype_size(b.dtype));
  return n;
}

void GradientReducer::set(std::size_t i, const Tensor& gradient) {
  if (i >= set_.size() || set_[i]) return;  // unknown index or reported twice: the first one counts
  TF_TRACE("set first");
  Buffer& b = buffers_[buffer_of_[i]];
  const std::size_t slot = slot_of_[i];
  const std::size_t esize = dtype_size(b.dtype);
  if (gradient.defined() && (gradient.shape() != shapes_[i] || gradient.dtype() != dtypes_[i]))
    throw std::invalid_argument("distribute: gradient " + std::to_string(i) + " has shape " +
                                gradient.shape().to_string() + " " + dtype_name(gradient.dtype()) +
                                ", its variable " + shapes_[i].to_string() + " " + dtype_name(dtypes_[i]));
  if (b.prefilled) {  // the MPI path, compressed: this rank's copy goes to the wire as half at once
    auto* halves = reinterpret_cast<std::uint16_t*>(b.wire.data());
    const std::int64_t n = shapes_[i].num_elements();
    if (gradient.defined())
      kernels::float_to_half(static_cast<const float*>(gradient.raw_data()), halves + b.offsets[slot], n);
    else
      std::fill_n(halves + b.offsets[slot], n, std::uint16_t{0});  // reduced as zeros, never skipped
    const float one = gradient.defined() ? 1.0f : 0.0f;
    kernels::float_to_half(&one, halves + b.elements - static_cast<std::int64_t>(b.vars.size() - slot), 1);
  } else {
    unsigned char* dst = data(b) + static_cast<std::size_t>(b.offsets[slot]) * esize;
    const std::size_t nbytes = static_cast<std::size_t>(shapes_[i].num_elements()) * esize;
    unsigned char* flag = data(b) + (static_cast<std::size_t>(b.elements) - b.vars.size() + slot) * esize;
    if (gradient.defined())
      std::memcpy(dst, gradient.raw_data(), nbytes);
    else
      std::memset(dst, 0, nbytes);  // reduced as zeros, never skipped
    if (b.dtype == DType::kFloat32) {
      const float one = gradient.defined() ? 1.0f : 0.0f;
      std::memcpy(flag, &one, sizeof one);
    } else {
      const double one = gradient.defined() ? 1.0 : 0.0;
      std::memcpy(flag, &one, sizeof one);
    }
  }
  set_[i] = 1;
  --b.missing;
  // Every rank must issue its collectives in the same order, but the order in which gradients become
  // final can differ between ranks (with GradientOptions::on_gradient_final, a gradient that is absent
  // on one rank is reported at the end of its backward pass, present ones on the way): so buffers
  // start in index order, buffer k once it is complete and 0..k-1 have started (start() counts).
  TF_TRACE_LAST("set last copied");
  while (started_ < buffers_.size() && buffers_[started_].missing == 0) start(buffers_[started_]);
  progress();
  TF_TRACE_LAST("set last returns");
}

void GradientReducer::start(Buffer& b) {
  TF_TRACE_B(b, "start");
  ++started_;
  if (shared_step_) {
    MPI_Win_sync(window_);  // this rank's gradients of b are written before it enters the barrier
    Communicator::check(MPI_Ibarrier(node_first_, &b.request), "MPI_Ibarrier (gradients, shared memory)");
    TF_TRACE_B(b, "barrier 1 issued");
    b.started = true;
    b.phase = 1;
    return;
  }
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    b.started = true;
    net_start(b, b.data.data(), b.elements, net_first_, net_second_);
    ++issued_;
    active_ = threaded_ && !finishing_;
    wake = active_;
  }
  if (wake) cv_.notify_one();  // finish() progresses by itself
}

void GradientReducer::progress() {
  if (shared_step_) return progress_shared();
  if (threaded_) return;  // the progress thread does it
  progress_net();
}

std::vector<std::optional<Tensor>> GradientReducer::finish(const std::vector<std::optional<Tensor>>& rest) {
  TF_TRACE("finish enter");
  {
    std::lock_guard<std::mutex> lock(mu_);  // from here on this thread alone calls MPI
    finishing_ = true;
    active_ = false;
  }
  for (std::size_t i = 0; i < set_.size(); ++i)
    if (!set_[i]) set(i, i < rest.size() && rest[i] ? *rest[i] : Tensor());
  if (shared_step_) {
    while (summed_ < buffers_.size()) {  // in order: first barrier, slice sum (and across groups), second barrier
      comm_.wait_all(waiting(buffers_[summed_]));
      progress_shared();
    }
  }
  if (!shared_step_) {
    for (Buffer& b : buffers_)
      while (b.net != 3) {  // in order: alltoall, part sum and allgather, copy-out (exchange: piece by piece)
        comm_.wait_all(waiting(b));
        progress_net();
      }
  }
  TF_TRACE("finish reduced");
  std::vector<MPI_Request> requests;
  for (Buffer& b : buffers_) requests.push_back(b.request);
  comm_.wait_all(requests);
  TF_TRACE("finish copy-out starts");
  if (shared_step_) MPI_Win_sync(window_);  // every slice is summed (second barrier)
  if (copy_out_delay_.count() > 0) std::this_thread::sleep_for(copy_out_delay_);
  const int divisor = op_ == models::ReduceOp::kAverage ? comm_.size() : 1;
  std::vector<std::optional<Tensor>> out = std::move(out_);  // the exchange's pieces, copied out already
  out.resize(set_.size());
  for (Buffer& b : buffers_) {
    if (!shared_step_) {  // the MPI path: sums in b.data, or halves in b.wire
      if (!b.copied) copy_out(b, 0, b.elements, divisor, out);
      drop_absent(b, out);
      continue;
    }
    const std::size_t esize = dtype_size(b.dtype);
    // The reduced elements from `pos` on: b.data, or the segment of the rank that summed them.
    auto piece = [&](std::int64_t pos) -> std::pair<const unsigned char*, std::int64_t> {
      const std::int64_t chunk = slice(b, 0).second;  // every slice but the last has this length
      const int r = static_cast<int>(pos / chunk);
      return {segment(r, b) + static_cast<std::size_t>(pos) * esize, slice(b, r).second - pos};
    };
    for (std::size_t s = 0; s < b.vars.size(); ++s) {
      const std::size_t k = b.vars[s];
      const unsigned char* flag = piece(b.elements - static_cast<std::int64_t>(b.vars.size() - s)).first;
      const double present = b.dtype == DType::kFloat32 ? *reinterpret_cast<const float*>(flag)
                                                        : *reinterpret_cast<const double*>(flag);
      if (present == 0.0) continue;  // no rank had a gradient
      Tensor g = Tensor::empty(shapes_[k], b.dtype);
      unsigned char* dst = static_cast<unsigned char*>(g.mutable_raw_data());
      for (std::int64_t pos = b.offsets[s], end = pos + shapes_[k].num_elements(); pos < end;) {
        const auto [src, available] = piece(pos);
        const std::int64_t n = std::min(available, end - pos);
        if (b.dtype == DType::kFloat32) scale_copy<float>(src, n, divisor, dst);
        else scale_copy<double>(src, n, divisor, dst);
        dst += static_cast<std::size_t>(n) * esize;
        pos += n;
      }
      out[k] = g;
    }
  }
  TF_TRACE("finish returns");
  return out;
}

template <class F>
void GradientReducer::each_output(const Buffer& b, std::int64_t lo, std::int64_t hi,
                                  std::vector<std::optional<Tensor>>& out, F&& f) const {
  const std::size_t esize = dtype_size(b.dtype);
  for (std::size_t s = 0; s < b.vars.size(); ++s) {
    const std::size_t k = b.vars[s];
    const std::int64_t begin = b.offsets[s], end = begin + shapes_[k].num_elements();
    const std::int64_t from = std::max(lo, begin), to = std::min(hi, end);
    if (from >= to) continue;
    if (!out[k]) out[k] = Tensor::empty(shapes_[k], b.dtype);
    f(from, to, static_cast<unsigned char*>(out[k]->mutable_raw_data()) + static_cast<std::size_t>(from - begin) * esize);
  }
}

void GradientReducer::copy_out(const Buffer& b, std::int64_t lo, std::int64_t hi, int divisor,
                               std::vector<std::optional<Tensor>>& out) const {
  // Half sums in chunks small enough to stay in L1 between the conversion and the division (the
  // same bits as converting the whole buffer first: both steps are element-wise and exactly rounded).
  constexpr std::int64_t kChunk = 2048;
  const std::size_t esize = dtype_size(b.dtype);
  each_output(b, lo, hi, out, [&](std::int64_t from, std::int64_t to, unsigned char* dst) {
    if (b.half) {
      const auto* sums = reinterpret_cast<const std::uint16_t*>(b.wire.data());
      float* f = reinterpret_cast<float*>(dst);
      for (std::int64_t at = from; at < to; at += kChunk) {
        const std::int64_t m = std::min(kChunk, to - at);
        kernels::half_to_float(sums + at, f + (at - from), m);
        scale_copy<float>(f + (at - from), m, divisor, f + (at - from));
      }
    } else if (b.dtype == DType::kFloat32) {
      scale_copy<float>(b.data.data() + static_cast<std::size_t>(from) * esize, to - from, divisor, dst);
    } else {
      scale_copy<double>(b.data.data() + static_cast<std::size_t>(from) * esize, to - from, divisor, dst);
    }
  });
}

void GradientReducer::sum_out_half(Buffer& b, const std::uint16_t* r0, const std::uint16_t* r1, std::int64_t lo,
                                   std::int64_t hi, int divisor, std::vector<std::optional<Tensor>>& out) {
  // Per block of kBlock (in L1): x = r0 + r1 in float32, rounded to half and back (the bits of
  // sum_half_parts, then copy_out), divided into the output; no pass over memory in between.
  constexpr std::int64_t kBlock = 1024;
  float x[kBlock], y[kBlock];
  std::uint16_t h[kBlock];
  each_output(b, lo, hi, out, [&](std::int64_t from, std::int64_t to, unsigned char* bytes) {
    float* dst = reinterpret_cast<float*>(bytes);
    for (std::int64_t at = from; at < to; at += kBlock) {
      const std::int64_t m = std::min(kBlock, to - at);
      kernels::half_to_float(r0 + at, x, m);
      kernels::half_to_float(r1 + at, y, m);
      for (std::int64_t i = 0; i < m; ++i) x[i] += y[i];
      kernels::float_to_half(x, h, m);
      kernels::half_to_float(h, x, m);
      scale_copy<float>(x, m, divisor, dst + (at - from));
    }
  });
  // The presence flags (the buffer's last elements), summed as halves into the wire for drop_absent.
  const std::int64_t flags = b.elements - static_cast<std::int64_t>(b.vars.size());
  const std::int64_t from = std::max(lo, flags), to = std::min(hi, b.elements);
  if (from < to) {
    const std::uint16_t* parts[2] = {r0 + from, r1 + from};
    sum_half_parts(parts, 2, to - from, reinterpret_cast<std::uint16_t*>(b.wire.data()) + from);
  }
}

void GradientReducer::drop_absent(const Buffer& b, std::vector<std::optional<Tensor>>& out) const {
  for (std::size_t s = 0; s < b.vars.size(); ++s) {
    const std::size_t k = b.vars[s];
    const std::int64_t at = b.elements - static_cast<std::int64_t>(b.vars.size() - s);  // its flag
    double present = 0;
    if (b.half) {
      float f = 0;
      kernels::half_to_float(reinterpret_cast<const std::uint16_t*>(b.wire.data()) + at, &f, 1);
      present = f;
    } else if (b.dtype == DType::kFloat32) {
      present = reinterpret_cast<const float*>(b.data.data())[at];
    } else {
      present = reinterpret_cast<const double*>(b.data.data())[at];
    }
    if (present == 0.0) out[k].reset();  // no rank had a gradient
    else if (!out[k]) out[k] = Tensor::empty(shapes_[k], b.dtype);  // present, without elements
  }
}

}  // namespace tapeflow::distribute::internal
