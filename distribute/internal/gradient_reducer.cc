#include "distribute/internal/gradient_reducer.h"

#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include "distribute/internal/mpi_types.h"
#include "distribute/internal/scale.h"

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

constexpr std::int64_t kAlign = 64;  // bytes: buffers and slices start on their own cache lines

std::int64_t round_up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

}  // namespace

GradientReducer::GradientReducer(Communicator& comm, bool threaded, bool shared_memory, int group_limit)
    : comm_(comm), threaded_(threaded), shared_memory_(shared_memory) {
  if (comm_.size() > 1) {
    // Groups: the ranks of one machine (MPI_COMM_TYPE_SHARED), split further into groups of at
    // most group_limit (> 0). Every group must have the same size, so that the slices of a buffer
    // line up across groups; otherwise (or with groups of one) reductions stay with MPI_Iallreduce.
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
        Communicator::check(MPI_Comm_split(comm_.comm(), node_rank_, comm_.rank(), &across_), "MPI_Comm_split");
        MPI_Comm_set_errhandler(across_, MPI_ERRORS_RETURN);
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
  for (MPI_Comm* c : {&node_all_, &node_first_, &node_second_, &across_})
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
                              "or the apps' --no-shared-memory, reduces with MPI_Iallreduce instead)");
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
    if (!b.started || !comm_.test_all(std::span<MPI_Request>(&b.request, 1))) return;
    if (b.phase == 1) {  // every rank of the group has written b (first barrier)
      MPI_Win_sync(window_);
      sum_slice(b);
      if (across_ != MPI_COMM_NULL) {  // this slice's sum over the groups, in place
        const auto [lo, hi] = slice(b, node_rank_);
        Communicator::check(MPI_Iallreduce(MPI_IN_PLACE, segment(node_rank_, b) + static_cast<std::size_t>(lo) * dtype_size(b.dtype),
                                           static_cast<int>(hi - lo), mpi_type(b.dtype), MPI_SUM, across_, &b.request),
                            "MPI_Iallreduce (gradients, across groups)");
        b.phase = 2;
        continue;
      }
    }
    MPI_Win_sync(window_);  // the slice's sum is written before the second barrier
    Communicator::check(MPI_Ibarrier(node_second_, &b.request), "MPI_Ibarrier (gradients, shared memory)");
    b.phase = 3;
    ++summed_;
  }
}

void GradientReducer::progress_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || active_; });
    if (stop_) return;
    for (Buffer& b : buffers_)
      if (b.started && b.request != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&b.request, &done, MPI_STATUS_IGNORE);
      }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
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
  op_ = op;
  finishing_ = false;
  started_ = 0;
  summed_ = 0;
  shared_step_ = uses_shared_memory();
  set_.assign(variables.size(), 0);
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
    } else {
      b.data.resize(static_cast<std::size_t>(nbytes));
    }
    b.missing = b.vars.size();
    b.started = false;
    b.phase = 0;
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
  Buffer& b = buffers_[buffer_of_[i]];
  const std::size_t slot = slot_of_[i];
  const std::size_t esize = dtype_size(b.dtype);
  unsigned char* dst = data(b) + static_cast<std::size_t>(b.offsets[slot]) * esize;
  const std::size_t nbytes = static_cast<std::size_t>(shapes_[i].num_elements()) * esize;
  unsigned char* flag = data(b) + (static_cast<std::size_t>(b.elements) - b.vars.size() + slot) * esize;
  if (gradient.defined()) {
    if (gradient.shape() != shapes_[i] || gradient.dtype() != dtypes_[i])
      throw std::invalid_argument("distribute: gradient " + std::to_string(i) + " has shape " +
                                  gradient.shape().to_string() + " " + dtype_name(gradient.dtype()) +
                                  ", its variable " + shapes_[i].to_string() + " " + dtype_name(dtypes_[i]));
    std::memcpy(dst, gradient.raw_data(), nbytes);
  } else {
    std::memset(dst, 0, nbytes);  // reduced as zeros, never skipped
  }
  if (b.dtype == DType::kFloat32) {
    const float one = gradient.defined() ? 1.0f : 0.0f;
    std::memcpy(flag, &one, sizeof one);
  } else {
    const double one = gradient.defined() ? 1.0 : 0.0;
    std::memcpy(flag, &one, sizeof one);
  }
  set_[i] = 1;
  --b.missing;
  // Every rank must issue its collectives in the same order, but the order in which gradients become
  // final can differ between ranks (with GradientOptions::on_gradient_final, a gradient that is absent
  // on one rank is reported at the end of its backward pass, present ones on the way): so buffers
  // start in index order, buffer k once it is complete and 0..k-1 have started (start() counts).
  while (started_ < buffers_.size() && buffers_[started_].missing == 0) start(buffers_[started_]);
  progress();
}

void GradientReducer::start(Buffer& b) {
  ++started_;
  if (shared_step_) {
    MPI_Win_sync(window_);  // this rank's gradients of b are written before it enters the barrier
    Communicator::check(MPI_Ibarrier(node_first_, &b.request), "MPI_Ibarrier (gradients, shared memory)");
    b.started = true;
    b.phase = 1;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    b.started = true;
    Communicator::check(MPI_Iallreduce(MPI_IN_PLACE, b.data.data(), static_cast<int>(b.elements), mpi_type(b.dtype),
                                       MPI_SUM, comm_.comm(), &b.request),
                        "MPI_Iallreduce (gradients)");
    active_ = threaded_ && !finishing_;
  }
  cv_.notify_one();
}

void GradientReducer::progress() {
  if (shared_step_) return progress_shared();
  if (threaded_) return;  // the progress thread does it
  for (Buffer& b : buffers_)
    if (b.started && b.request != MPI_REQUEST_NULL) comm_.test_all(std::span<MPI_Request>(&b.request, 1));
}

std::vector<std::optional<Tensor>> GradientReducer::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);  // from here on this thread alone calls MPI
    finishing_ = true;
    active_ = false;
  }
  for (std::size_t i = 0; i < set_.size(); ++i)
    if (!set_[i]) set(i, Tensor());
  if (shared_step_) {
    while (summed_ < buffers_.size()) {  // in order: first barrier, slice sum (and across groups), second barrier
      comm_.wait(buffers_[summed_].request);
      progress_shared();
    }
  }
  std::vector<MPI_Request> requests;
  for (Buffer& b : buffers_) requests.push_back(b.request);
  comm_.wait_all(requests);
  if (shared_step_) MPI_Win_sync(window_);  // every slice is summed (second barrier)
  if (copy_out_delay_.count() > 0) std::this_thread::sleep_for(copy_out_delay_);
  const int divisor = op_ == models::ReduceOp::kAverage ? comm_.size() : 1;
  std::vector<std::optional<Tensor>> out(set_.size());
  for (Buffer& b : buffers_) {
    const std::size_t esize = dtype_size(b.dtype);
    // The reduced elements from `pos` on: b.data, or the segment of the rank that summed them.
    auto piece = [&](std::int64_t pos) -> std::pair<const unsigned char*, std::int64_t> {
      if (!shared_step_) return {b.data.data() + static_cast<std::size_t>(pos) * esize, b.elements - pos};
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
  return out;
}

}  // namespace tapeflow::distribute::internal
